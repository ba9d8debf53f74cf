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
// batches; trace entries and dicts like them (traceEntryProgram). It is
// what the fast paths (frameList, the list before, the span cache,
// traceEntry) must read exactly as the opcodes one by one read it.
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
	// A frame dict's keys and strings, for frames written out as
	// pickle.dump writes them (all memo gets).
	var keys []uint32
	for _, s := range []string{"filename", "line", "name", "/w/out.py", "out"} {
		w.Put(s)
		keys = append(keys, memo)
		put()
	}
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
	// Trace entries' keys, memoized when first written, and their dicts.
	names := map[string]uint32{}
	name := func(s string) {
		if idx, ok := names[s]; ok {
			w.Op(get(idx, idx >= 256)...)
			return
		}
		w.Put(s)
		names[s] = memo
		put()
	}
	var entries []uint32
	for steps := 0; len(prog) > 0 && steps < 200; steps++ {
		op, arg := next(), next()
		pair()
		switch op % 10 {
		case 8, 9: // a trace entry
			entries = append(entries, memo)
			traceEntryProgram(w, next, arg, &memo, name, func(long bool) []byte {
				if len(entries) > 1 && long {
					return get(entries[len(entries)-2], true) // an entry before
				}
				return get(memo-1, long) // the last memo entry: often the dict itself
			}, func() []byte { return gets(int(arg%30), arg&0x40 != 0) })
			continue
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
			if arg&1 == 0 {
				w.Put(pt.FrameDict("/w/inner.py", int(arg), "inner"))
			} else {
				// Written out as pickle.dump does: MEMOIZE first, then
				// the keys and values, memo gets but the line.
				w.Op(pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
				w.Op(get(keys[0], arg&2 != 0)...)
				w.Op(get(keys[3], false)...)
				w.Op(get(keys[1], false)...)
				w.Put(int(arg))
				w.Op(get(keys[2], false)...)
				w.Op(get(keys[4], arg&4 != 0)...)
				w.Op(pt.OpSetItems)
			}
			frames = append(frames, memo)
			if arg&1 == 0 {
				put()
			} else {
				memo++ // its MEMOIZE, written first
			}
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

// traceEntryProgram writes a trace entry's dict as pickle.dump does, and
// the ways a dict can stray from one, from next's bytes and arg: its put
// (MEMOIZE, BINPUT, LONG_BINPUT, of the next index or another); keys of
// trace entries (memoized by name), in any order, and another; values that
// are memo gets of names, of the dict itself or an entry before (other),
// strings new and memoized or not, ints of every opcode, LONG1s of every
// width, NONE, frame lists (frames) and lists with other values; odd item
// counts; items in two batches.
func traceEntryProgram(w *pt.Writer, next func() byte, arg byte, memo *uint32, name func(string), other func(long bool) []byte, frames func() []byte) {
	keys := []string{"action", "addr", "size", "stream", "time_us", "frames", "compile_context", "user_metadata", "device_free", "weird"}
	w.Op(pt.OpEmptyDict)
	switch arg % 4 {
	case 0, 1:
		w.Op(pt.OpMemoize)
	case 2:
		w.Op(pt.OpBinPut, byte(*memo)) // the next index only below 256
	case 3:
		w.Op(pt.OpLongBinPut, byte(*memo), byte(*memo>>8), byte(*memo>>16), byte(*memo>>24))
	}
	*memo++
	w.Op(pt.OpMark)
	items := 1 + int(next()%9)
	for i := range items {
		k := keys[int(next())%len(keys)]
		if i == 0 && arg&0x10 == 0 {
			k = "action"
		}
		name(k)
		if i == items-1 && arg&0x20 != 0 {
			break // an odd count
		}
		if i == items/2 && arg&0x80 != 0 {
			w.Op(pt.OpSetItems, pt.OpMark) // two batches (an empty first when the count was odd)
		}
		switch b := next(); b % 12 {
		case 0:
			name([]string{"alloc", "free_requested", "free_completed", "segment_alloc"}[b/12%4])
		case 1:
			w.Put(fmt.Sprintf("s%d", b))
		case 2, 3:
			w.Put(fmt.Sprintf("m%d", b))
			switch {
			case b&0x80 != 0:
				w.Op(pt.OpBinPut, byte(b)) // any index
			case b&0x40 != 0 && *memo < 256:
				w.Op(pt.OpBinPut, byte(*memo))
			default:
				w.Op(pt.OpMemoize)
			}
			*memo++
		case 4:
			w.Op(pt.OpBinInt1, next())
		case 5:
			w.Op(pt.OpBinInt2, next(), next())
		case 6:
			w.Op(pt.OpBinInt, next(), next(), next(), next())
		case 7:
			n := int(next() % 11)
			w.Op(pt.OpLong1, byte(n))
			for range n {
				w.Op(next())
			}
		case 8:
			w.Op(pt.OpNone)
		case 9:
			w.Op(other(b&0x80 != 0)...)
		default:
			w.Op(pt.OpEmptyList)
			*memo++
			w.Op(pt.OpMemoize, pt.OpMark)
			w.Op(frames()...)
			w.Op(pt.OpAppends)
		}
	}
	w.Op(pt.OpSetItems)
}

// FuzzFastPaths: a pickle of frame lists and trace entries written by
// framesProgram loads to the same value, memo and stacks with the fast
// paths as opcode by opcode (fastAgrees), whole and cut short.
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
		// Frames written out in lists, among gets of older ones, long
		// gets among the keys.
		{2, 5, 3, 0, 1, 2, 0, 5, 7, 1, 2, 0, 1, 0, 6, 0, 1, 2, 5, 0x25, 0, 1},
		traceSeed,
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

// traceSeed writes two frames, then trace entries: {action: "alloc", addr: 7} twice (the
// first with new strings, which traceEntry leaves to run; the second read
// at once), then one whose action is None (traceEntry stops at it), then
// two in dicts put by BINPUT with a frame list of two gets and an address
// in a LONG1 of 3 bytes: negative in the first (no trace record: it stops
// at the SETITEMS), positive in the second.
var traceSeed = []byte{
	1, // two frames
	8, 0, 1, 0, 0, 1, 4, 7,
	8, 0, 1, 0, 0, 1, 4, 7,
	8, 0, 1, 0, 8, 1, 4, 7,
	8, 2, 2, 0, 0, 1, 7, 3, 0xff, 0x10, 0x80, 5, 10, 0, 1,
	8, 2, 2, 0, 0, 1, 7, 3, 0xff, 0x10, 0x00, 5, 10, 0, 1,
}

// TestFramesProgramPaths: framesProgram reaches the paths FuzzFastPaths is
// for: lists taken at once, the list before found again (and not after a
// BINPUT), an older list found in the span cache, and trace entries read
// at once to their end.
func TestFramesProgramPaths(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		prog                           []byte
		lists, repeats, cached, traces int
	}{
		// A list, it again, a frame replaced, it again: the last is
		// not a repeat (the BINPUT forgot the list before).
		{"repeat", []byte{2, 0, 3, 0, 1, 2, 0, 1, 0, 3, 1, 1, 0}, 3, 1, 0, 0},
		// Twenty gets, a list of one, the twenty again: from the cache.
		{"cached", []byte{5, 0, 19, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 0, 0, 3, 2, 0}, 3, 0, 1, 0},
		// The second and fifth entries; the fourth's and fifth's lists
		// (the same bytes: the list before).
		{"traces", traceSeed, 2, 1, 0, 2},
	} {
		d, _, err := decodeWith(context.Background(), framesProgram(tc.prog), nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d.fastLists != tc.lists || d.spans.repeats != tc.repeats || d.spans.hits != tc.cached || d.fastTraces != tc.traces {
			t.Errorf("%s: %d lists at once, %d the list before, %d from the cache, %d trace entries; want %d, %d, %d, %d",
				tc.name, d.fastLists, d.spans.repeats, d.spans.hits, d.fastTraces, tc.lists, tc.repeats, tc.cached, tc.traces)
		}
	}
}

// TestTraceEntryItemsMax: traceEntry reads a dict to its end when it has
// up to traceItemsMax items, and leaves the rest of a longer one to run;
// both read as the opcodes one by one do.
func TestTraceEntryItemsMax(t *testing.T) {
	for _, items := range []int{traceItemsMax - 2, traceItemsMax, traceItemsMax + 2, 4 * traceItemsMax} {
		w := &pt.Writer{}
		w.Op(pt.OpProto, 4, pt.OpEmptyList, pt.OpMemoize, pt.OpMark)
		// The first entry memoizes its keys (1, 3) and action (2).
		w.Put(pt.Dict{{pt.Memoize("action"), pt.Memoize("alloc")}, {pt.Memoize("addr"), 1}})
		// The second: action, then addr again and again (the last wins).
		w.Op(pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
		w.Put(pt.Ref(1))
		w.Put(pt.Ref(2))
		for i := 1; i < items/2; i++ {
			w.Put(pt.Ref(3))
			w.Put(i)
		}
		w.Op(pt.OpSetItems, pt.OpAppends, pt.OpStop)
		data := w.Bytes()
		fastAgrees(t, fmt.Sprintf("%d items", items), data, nil)
		d, _, err := decodeWith(context.Background(), data, nil, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := 0 // the second entry, read to its end at once
		if items <= traceItemsMax {
			want = 1
		}
		if d.fastTraces != want || d.g.traces.len() != 2 {
			t.Errorf("%d items: %d entries read at once, %d trace records; want %d, 2", items, d.fastTraces, d.g.traces.len(), want)
		}
	}
}
