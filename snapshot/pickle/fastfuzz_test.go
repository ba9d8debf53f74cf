package pickle

import (
	"context"
	"fmt"
	"testing"

	pt "memscope/internal/pickletest"
)

// framesProgram writes a pickle of frame lists from prog, a byte program:
// a dict whose values are lists as pickle.dump writes them (EMPTY_LIST
// MEMOIZE MARK ... APPENDS) of memo gets of frames and of other values,
// by BINGET and LONG_BINGET; lists that repeat the list before, or an
// older one, byte for byte; frames replaced by BINPUT at the index the
// lists read; frames made inside a list; empty lists; lists in two
// batches. It is what the fast paths (frameList, the list before, the span
// cache) must read exactly as the opcodes one by one read it.
func framesProgram(prog []byte) []byte {
	next := func() byte {
		if len(prog) == 0 {
			return 0
		}
		b := prog[0]
		prog = prog[1:]
		return b
	}
	w := &pt.Writer{}
	memo := uint32(0)
	put := func() { w.Op(pt.OpMemoize); memo++ }
	w.Op(pt.OpProto, 4, pt.OpEmptyDict)
	put() // 0: the dict
	w.Op(pt.OpMark)
	key := 0
	pair := func() { w.Put(fmt.Sprintf("k%d", key)); key++ }
	// The first value: a list that makes the frames, and a string.
	var frames []uint32
	pair()
	w.Op(pt.OpEmptyList)
	put()
	w.Op(pt.OpMark)
	for i := range 1 + int(next()%6) {
		w.Put(pt.FrameDict(fmt.Sprintf("/w/f%d.py", i), i+1, fmt.Sprintf("f%d", i)))
		frames = append(frames, memo)
		put()
	}
	w.Put("not a frame")
	str := memo
	put()
	w.Op(pt.OpAppends)
	get := func(idx uint32, long bool) []byte {
		if idx < 256 && !long {
			return []byte{pt.OpBinGet, byte(idx)}
		}
		return []byte{pt.OpLongBinGet, byte(idx), byte(idx >> 8), byte(idx >> 16), byte(idx >> 24)}
	}
	var last []byte
	var history [][]byte
	list := func(items []byte) {
		w.Op(pt.OpEmptyList)
		put()
		w.Op(pt.OpMark)
		w.Op(items...)
		w.Op(pt.OpAppends)
		last = items
		history = append(history, items)
	}
	gets := func(n int, other bool) []byte {
		var b []byte
		for range n {
			a := next()
			idx := frames[int(a)%len(frames)]
			if other && a%7 == 0 {
				idx = str
			}
			b = append(b, get(idx, a&0x80 != 0)...)
		}
		return b
	}
	for steps := 0; len(prog) > 0 && steps < 200; steps++ {
		op, arg := next(), next()
		pair()
		switch op % 8 {
		case 0: // a list of frames
			list(gets(1+int(arg%20), false))
		case 1: // the list before again
			list(last)
		case 2: // an older list again
			if len(history) == 0 {
				list(nil)
				break
			}
			list(history[int(arg)%len(history)])
		case 3: // a frame the lists read is replaced
			idx := frames[int(arg)%len(frames)]
			w.Put(pt.FrameDict("/w/new.py", int(arg), "replaced"))
			if idx < 256 {
				w.Op(pt.OpBinPut, byte(idx))
			} else {
				w.Op(pt.OpLongBinPut, byte(idx), byte(idx>>8), byte(idx>>16), byte(idx>>24))
			}
		case 4: // frames and a value that is not one
			list(gets(1+int(arg%20), true))
		case 5: // a frame made inside the list, then read
			w.Op(pt.OpEmptyList)
			put()
			w.Op(pt.OpMark)
			w.Put(pt.FrameDict("/w/inner.py", int(arg), "inner"))
			frames = append(frames, memo)
			put()
			items := gets(1+int(arg%4), false)
			w.Op(items...)
			w.Op(pt.OpAppends)
		case 6: // an empty list
			list(nil)
		case 7: // a list in two batches
			first, second := gets(1+int(arg%5), false), gets(1+int(arg%3), false)
			w.Op(pt.OpEmptyList)
			put()
			w.Op(pt.OpMark)
			w.Op(first...)
			w.Op(pt.OpAppends, pt.OpMark)
			w.Op(second...)
			w.Op(pt.OpAppends)
			last = first
		}
	}
	w.Op(pt.OpSetItems, pt.OpStop)
	return w.Bytes()
}

// FuzzFastPaths: a pickle of frame lists written by framesProgram loads
// to the same value, memo and stacks with the fast paths as opcode by
// opcode (fastAgrees), whole and cut short.
//
//	go test ./snapshot/pickle -run '^$' -fuzz FuzzFastPaths
func FuzzFastPaths(f *testing.F) {
	for _, seed := range [][]byte{
		// Three frames; a list of four gets, the same list again, frame
		// 1 replaced by BINPUT, the same bytes again (other frames now).
		{2, 0, 3, 0, 1, 2, 0, 1, 0, 3, 1, 1, 0},
		// Two frames; seven gets, long ones and a non-frame among them;
		// an older list again; an empty list; the list before again.
		{1, 4, 6, 0x87, 0x81, 7, 14, 0x82, 3, 5, 2, 0, 6, 0, 1, 0},
		// An inner frame read in its own list; a list in two batches,
		// then the list before (its first batch) again.
		{0, 5, 2, 1, 0, 1, 7, 1, 0, 1, 1, 0, 1, 0},
		// Twenty gets; one other; the twenty again, from the span cache.
		{5, 0, 19, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 0, 0, 3, 2, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		data := framesProgram(prog)
		for _, cut := range []int{len(data), len(data) * 2 / 3} {
			fastAgrees(t, fmt.Sprintf("%d of %d bytes", cut, len(data)), data[:cut], nil)
		}
	})
}

// TestFramesProgramPaths: framesProgram reaches the paths FuzzFastPaths is
// for: lists taken at once, the list before found again (and not after a
// BINPUT), and an older list found in the span cache.
func TestFramesProgramPaths(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		prog                   []byte
		lists, repeats, cached int
	}{
		// A list, it again, a frame replaced, it again: the last is
		// not a repeat (the BINPUT forgot the list before).
		{"repeat", []byte{2, 0, 3, 0, 1, 2, 0, 1, 0, 3, 1, 1, 0}, 3, 1, 0},
		// Twenty gets, a list of one, the twenty again: from the cache.
		{"cached", []byte{5, 0, 19, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 0, 0, 3, 2, 0}, 3, 0, 1},
	} {
		d, _, err := decodeWith(context.Background(), framesProgram(tc.prog), nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d.fastLists != tc.lists || d.spans.repeats != tc.repeats || d.spans.hits != tc.cached {
			t.Errorf("%s: %d lists at once, %d the list before, %d from the cache; want %d, %d, %d",
				tc.name, d.fastLists, d.spans.repeats, d.spans.hits, tc.lists, tc.repeats, tc.cached)
		}
	}
}
