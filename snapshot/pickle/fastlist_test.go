package pickle

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	pt "memscope/internal/pickletest"
)

func noFast(d *decoder) { d.noFast = true }

// TestFrameListFastPath: frame lists taken at once (frameList) leave
// exactly what the opcodes one by one leave, on one machine and on two,
// for the fuzz corpus, the samples, every generated shape and lists the
// fast path must refuse (a get of something that is not a frame, of the
// pending dict, an empty list, a list cut short); and it is taken where
// frames are memo reads, as PyTorch writes them.
func TestFrameListFastPath(t *testing.T) {
	inputs := corpusInputs(t)
	// What PyTorch 2.x writes (frame lists repeated byte for byte, which
	// frameList's cache takes at once), but not the larger files: they take
	// seconds each to compare and add no shape.
	for name, data := range samplePickles(t) {
		if (strings.HasPrefix(name, "h100/") || strings.HasPrefix(name, "h200/")) && len(data) <= 1<<20 {
			inputs["sample "+name] = data
		}
	}
	// Lists as pickle.dump writes them (EMPTY_LIST MEMOIZE MARK ... APPENDS),
	// memo: 0 the dict, 1 the first list, 2 a frame, 3 a string.
	f := pt.FrameDict("/w/a.py", 1, "f")
	w := &pt.Writer{}
	list := func(gets ...any) { writeList(w, gets...) }
	w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
	w.Put("frames")
	list(pt.Memoize(f), pt.Memoize("not a frame"))
	w.Put("a")
	list(pt.Ref(2), pt.Ref(2)) // two frames: taken at once
	w.Put("b")
	list(pt.Ref(2), pt.Ref(3)) // a string among them
	w.Put("c")
	list() // MARK APPENDS with nothing
	w.Put("d")
	list([]byte{pt.OpBinGet, 2}) // BINGET of a frame: taken at once
	w.Put("e")
	list(pt.Ref(4), pt.Ref(2)) // list "a" (a stack in the memo) among frames
	w.Op(pt.OpSetItems, pt.OpStop)
	inputs["crafted lists"] = w.Bytes()
	// A frame, then a LONG_BINGET past the memo's end: the fast path's
	// one compare sends it to the machine, which reports the error.
	w = &pt.Writer{}
	w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
	w.Put("frames")
	list(pt.Memoize(f)) // memo 1 the list, 2 the frame
	w.Put("a")
	list(pt.Ref(2), pt.Ref(1<<20)) // past every memo chunk
	w.Op(pt.OpSetItems, pt.OpStop)
	inputs["a get past the memo in a list"] = w.Bytes()
	// A get of the pending dict's slot inside its own frames list.
	w = &pt.Writer{}
	w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
	w.Put("frames")
	w.Op(pt.OpEmptyList, pt.OpMemoize, pt.OpMark)
	w.Put(pt.Ref(0))
	w.Op(pt.OpAppends, pt.OpSetItems, pt.OpStop)
	inputs["pending dict in its list"] = w.Bytes()
	taken := 0
	if !testing.Short() {
		for _, shape := range []string{"distinct", "shared", "late", "sharedlists", "multi", "selfref"} {
			if _, err := exec.LookPath("python3"); err == nil {
				inputs["gen "+shape] = genPickle(t, shape, 3000)
			}
		}
	}
	for name, data := range inputs {
		for _, split := range []splitFunc{nil, splitAt(1.0/32, 0.5)} {
			for _, cut := range []int{len(data), len(data) * 2 / 3} {
				taken += fastAgrees(t, fmt.Sprintf("%s (%d bytes)", name, cut), data[:cut], split)
			}
		}
	}
	if taken == 0 {
		t.Error("the fast path was never taken")
	}
}

// fastAgrees decodes in with the fast paths and opcode by opcode (split
// places the helpers of both), fails t unless both give the same error or
// the same value, memo, trace records and stacks, and no more containers
// (a list read at once as a value has none), and returns how many lists
// the fast paths took at once.
func fastAgrees(t testing.TB, name string, in []byte, split splitFunc) (taken int) {
	t.Helper()
	fast, r1, e1 := decodeWith(context.Background(), in, nil, split, nil, nil)
	slow, r2, e2 := decodeWith(context.Background(), in, nil, split, nil, nil, noFast)
	if !sameErrors(t, name, "fast", e1, "slow", e2) {
		return 0
	}
	if a, b := canonical(fast.g, r1), canonical(slow.g, r2); a != b {
		t.Fatalf("%s: values differ:\nfast %.2000s\nslow %.2000s", name, a, b)
	}
	// A list read at once is a value (bareLists); a frame dict written
	// out in one leaves the dict around it pending, where the machine
	// gives it a container: the fast paths make no more containers.
	if fast.memo.len() != slow.memo.len() || fast.g.conts.len()+fast.bareLists > slow.g.conts.len() ||
		fast.g.traces.len() != slow.g.traces.len() || fast.g.stacks.len() != slow.g.stacks.len() {
		t.Fatalf("%s: memo %d/%d, containers %d/%d, trace records %d/%d, stacks %d/%d", name,
			fast.memo.len(), slow.memo.len(), fast.g.conts.len(), slow.g.conts.len(),
			fast.g.traces.len(), slow.g.traces.len(), fast.g.stacks.len(), slow.g.stacks.len())
	}
	if slow.fastLists != 0 {
		t.Fatalf("%s: the slow path took %d lists at once", name, slow.fastLists)
	}
	return fast.fastLists
}

// writeList writes a list as pickle.dump does: EMPTY_LIST MEMOIZE MARK, the
// items, APPENDS.
func writeList(w *pt.Writer, items ...any) {
	w.Op(pt.OpEmptyList, pt.OpMemoize, pt.OpMark)
	for _, it := range items {
		w.Put(it)
	}
	w.Op(pt.OpAppends)
}

// TestFrameListsAsValues: a frame list taken at once is a value with no
// container (kStack). The fresh list may still get more items, as
// pickle.dump writes a list of more than 1000 in batches: it then gets a
// container, and a later memo read of it sees every item. A copy of it (a
// memo read, a DUP, a second MEMOIZE) that gets more items is refused, as
// a frame dict changed after it was filled is. What is read equals what
// CPython loads.
func TestFrameListsAsValues(t *testing.T) {
	// Memo 0 is the frame dict; the list is memo 1 (its MEMOIZE comes
	// right after EMPTY_LIST, as pickle.dump writes it).
	list := func(then ...byte) []byte {
		w := &pt.Writer{}
		w.Put(pt.Memoize(pt.FrameDict("/src/train.py", 10, "step")))
		w.Op(pt.OpPop, pt.OpEmptyList, pt.OpMemoize, pt.OpMark)
		w.Put(pt.Ref(0))
		w.Put(pt.Ref(0))
		w.Op(pt.OpAppends)
		w.Op(then...)
		return w.Bytes()
	}
	more := func(ops ...byte) []byte { // a second batch of one frame
		w := &pt.Writer{}
		w.Op(ops...)
		w.Op(pt.OpMark)
		w.Put(pt.Ref(0))
		w.Op(pt.OpAppends)
		return w.Bytes()
	}
	wrap := func(l []byte, readBack bool) []byte {
		d := pt.Dict{{"segments", []any{}}, {"device_traces", []any{}}, {"frames", l}}
		if readBack {
			d = append(d, pt.KV{"again", pt.Ref(1)})
		}
		return pt.Of(d)
	}
	cases := []struct {
		name   string
		data   []byte
		frames int    // the list's frames, read at "frames" and "again"
		err    string // a decode error containing this
	}{
		{name: "one batch", data: wrap(list(), true), frames: 2},
		{name: "a second batch", data: wrap(list(more()...), true), frames: 3},
		{name: "a second batch by APPEND", data: func() []byte {
			w := &pt.Writer{}
			w.Op(list()...)
			w.Put(pt.Ref(0))
			w.Op(pt.OpAppend)
			return wrap(w.Bytes(), true)
		}(), frames: 3},
		{name: "a memo read gets more", data: wrap(list(append([]byte{pt.OpPop, pt.OpLongBinGet, 1, 0, 0, 0}, more()...)...), false),
			err: "APPENDS adds to a list of frames that was already used elsewhere"},
		{name: "a DUP gets more", data: wrap(list(append([]byte{pt.OpDup}, append(more(), pt.OpPop)...)...), false),
			err: "APPENDS adds to a list of frames"},
		{name: "memoized twice gets more", data: wrap(list(append([]byte{pt.OpMemoize}, more()...)...), false),
			err: "APPENDS adds to a list of frames"},
	}
	inputs := map[string][]byte{}
	for _, c := range cases {
		d, root, err := decodeWith(context.Background(), c.data, nil, nil, nil, nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		inputs[c.name] = c.data
		kv := d.g.seq(root)
		for i := 0; i+1 < len(kv); i += 2 {
			if k := d.g.strs[kv[i].ref]; k == "frames" || k == "again" {
				b := newBinder(d.g, len(c.data))
				st, err := b.stack(kv[i+1], k)
				if err != nil || st.Len() != c.frames {
					t.Errorf("%s: %s has %d frames (%v), want %d", c.name, k, st.Len(), err, c.frames)
				}
			}
		}
		if c.name == "one batch" && d.bareLists != 1 {
			t.Errorf("%s: %d lists without a container, want 1", c.name, d.bareLists)
		}
	}
	if _, err := exec.LookPath("python3"); err == nil {
		if n := compareWithPython(t, inputs); n != len(inputs) {
			t.Errorf("CPython agreed on %d of %d", n, len(inputs))
		}
	}
}

// TestFrameDictFastPath: frame dicts taken at once (frameDict) leave
// exactly what the opcodes one by one leave, on one machine and on two,
// whole and cut short, and CPython loads the same: those whose keys and
// values are memo gets (LONG_BINGET or BINGET, in any order) and small
// ints are taken; a new string, a LONG1, the dict's own memo slot, a
// frame where a string belongs, a fourth key and a first key no frame has
// are not.
func TestFrameDictFastPath(t *testing.T) {
	w := &pt.Writer{}
	w.Op(pt.OpProto, 4, pt.OpEmptyList, pt.OpMemoize, pt.OpMark) // memo 0
	for _, s := range []string{"filename", "line", "name", "/w/a.py", "f"} {
		w.Put(pt.Memoize(s)) // memo 1-5
	}
	memo := uint32(6)
	dict := func(items ...any) {
		w.Op(pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
		for _, it := range items {
			w.Put(it)
		}
		w.Op(pt.OpSetItems)
		memo++
	}
	binGet := func(i byte) []byte { return []byte{pt.OpBinGet, i} }
	dict(pt.Ref(1), pt.Ref(4), pt.Ref(2), 7, pt.Ref(3), pt.Ref(5))                          // taken (memo 6, a frame)
	dict(binGet(1), binGet(4), binGet(2), 7, binGet(3), binGet(5))                          // taken: the same frame
	dict(pt.Ref(3), pt.Ref(5), pt.Ref(1), pt.Ref(4), pt.Ref(2), 300)                        // taken: keys in another order, BININT
	dict(pt.Ref(1), pt.Ref(4), pt.Ref(2), -5, pt.Ref(3), pt.Ref(5))                         // taken: a negative line
	dict(pt.Ref(1), pt.Ref(4), pt.Ref(2), []byte{pt.OpBinInt2, 1, 2}, pt.Ref(3), pt.Ref(5)) // taken: BININT2
	dict(pt.Ref(1), pt.Ref(4), pt.Ref(2), int64(1)<<40, pt.Ref(3), pt.Ref(5))               // LONG1: not taken
	dict(pt.Ref(1), "/w/b.py", pt.Ref(2), 7, pt.Ref(3), pt.Ref(5))                          // a new string: not taken
	dict(pt.Ref(1), pt.Ref(memo), pt.Ref(2), 7, pt.Ref(3), pt.Ref(5))                       // its own slot: not taken
	dict(pt.Ref(1), pt.Ref(6), pt.Ref(2), 7, pt.Ref(3), pt.Ref(5))                          // a frame for a file: not taken
	dict(pt.Ref(1), pt.Ref(4), pt.Ref(2), 7, pt.Ref(3), pt.Ref(5), pt.Ref(5), 1)            // four keys: not taken
	dict(pt.Ref(5), pt.Ref(4), pt.Ref(2), 7, pt.Ref(3), pt.Ref(5))                          // a first key no frame has: not taken
	w.Op(pt.OpAppends, pt.OpStop)
	data := w.Bytes()
	for _, split := range []splitFunc{nil, splitAt(1.0/32, 0.5)} {
		for _, cut := range []int{len(data), len(data) * 2 / 3, len(data) / 3} {
			in := data[:cut]
			fast, r1, e1 := decodeWith(context.Background(), in, nil, split, nil, nil)
			slow, r2, e2 := decodeWith(context.Background(), in, nil, split, nil, nil, noFast)
			switch {
			case (e1 == nil) != (e2 == nil) || e1 != nil && e1.Error() != e2.Error():
				t.Fatalf("%d bytes: fast %v, slow %v", cut, e1, e2)
			case e1 == nil && canonical(fast.g, r1) != canonical(slow.g, r2):
				t.Fatalf("%d bytes: values differ", cut)
			case e1 == nil && (fast.memo.len() != slow.memo.len() || fast.g.frames.len() != slow.g.frames.len() || fast.puts != slow.puts):
				t.Fatalf("%d bytes: memo %d/%d, frames %d/%d, puts %d/%d", cut, fast.memo.len(), slow.memo.len(),
					fast.g.frames.len(), slow.g.frames.len(), fast.puts, slow.puts)
			}
			if cut == len(data) && (fast.fastDicts != 5 || slow.fastDicts != 0) {
				t.Fatalf("frame dicts taken at once: %d (the slow path %d), want 5", fast.fastDicts, slow.fastDicts)
			}
		}
	}
	if _, err := exec.LookPath("python3"); err == nil {
		if agreed := compareWithPython(t, map[string][]byte{"frame dicts": data}); agreed != 1 {
			t.Error("CPython loads the frame dicts otherwise")
		}
	}
}

// TestFrameListWithFramesWrittenOut: a frame list may write out a frame
// dict it is the first to hold (a frame pool's frames, where a stack first
// holds them); the list is still read at once when each such dict is one
// frameDict takes, with its memo entry after the list's, as the opcodes
// one by one leave them. Anything else, a frame table without room for
// them among it, is left to the machine.
func TestFrameListWithFramesWrittenOut(t *testing.T) {
	// Memo 0-6: the keys, then two files' and names' strings.
	var prelude []byte
	for _, s := range []string{"filename", "line", "name", "a.py", "f", "b.py", "g"} {
		w := &pt.Writer{}
		w.Put(s)
		prelude = append(prelude, w.Bytes()...)
		prelude = append(prelude, opMemoize, opPop)
	}
	dict := func(file, name byte, line byte, put ...byte) []byte {
		d := append([]byte{opEmptyDict}, put...)
		return append(d, opMark, opBinGet, 0, opBinGet, file, opBinGet, 1, opBinInt1, line, opBinGet, 2, opBinGet, name, opSetItems)
	}
	list := func(put []byte, items ...[]byte) []byte {
		l := append(append([]byte{opEmptyList}, put...), opMark)
		for _, it := range items {
			l = append(l, it...)
		}
		return append(l, opAppends)
	}
	memoize := []byte{opMemoize}
	cases := []struct {
		name         string
		list         []byte
		limit        int // of the frame table; 0: none
		lists, dicts int // taken at once
		reads        []byte
	}{
		{"two frames written out", list(memoize, dict(3, 4, 1, opMemoize), dict(5, 6, 2, opMemoize)), 0, 1, 2, []byte{7, 8, 9}},
		{"a frame read, one written out", list(memoize, []byte{opBinGet, 0}, dict(5, 6, 2, opMemoize)), 0, 0, 1, []byte{7, 8}},
		{"written out among frames read", list(memoize, dict(3, 4, 1, opMemoize), []byte{opBinGet, 8}), 0, 0, 1, []byte{7, 8}},
		{"puts by index", list([]byte{opBinPut, 7}, dict(3, 4, 1, opBinPut, 8), dict(5, 6, 2, opBinPut, 9)), 0, 1, 2, []byte{7, 8, 9}},
		{"a put of another index", list([]byte{opBinPut, 7}, dict(3, 4, 1, opBinPut, 9)), 0, 0, 0, []byte{7, 9}},
		{"a dict that is no frame", list(memoize, []byte{opEmptyDict, opMemoize, opMark, opBinGet, 3, opBinGet, 4, opSetItems}), 0, 0, 0, []byte{7, 8}},
		{"room for both", list(memoize, dict(3, 4, 1, opMemoize), dict(5, 6, 2, opMemoize)), 2, 1, 2, []byte{7, 8, 9}},
		{"room for one", list(memoize, dict(3, 4, 1, opMemoize), dict(5, 6, 2, opMemoize)), 1, 0, 1, []byte{7, 8, 9}},
		// Room is counted by dicts, not distinct frames: the machine
		// takes these one by one.
		{"the same frame twice, room for one", list(memoize, dict(3, 4, 1, opMemoize), dict(3, 4, 1, opMemoize)), 1, 0, 2, []byte{7, 8, 9}},
		{"the same frame twice", list(memoize, dict(3, 4, 1, opMemoize), dict(3, 4, 1, opMemoize)), 0, 1, 2, []byte{7, 8, 9}},
	}
	for _, c := range cases {
		// The list and, read back from the memo, what it and its dicts
		// put there, in a tuple.
		data := append(append([]byte{opProto, 4}, prelude...), opMark)
		data = append(data, c.list...)
		for _, i := range c.reads {
			data = append(data, opBinGet, i)
		}
		data = append(data, opTuple, opStop)
		opts := []func(*decoder){}
		if c.limit > 0 {
			opts = append(opts, func(d *decoder) { d.g.frames.limit = c.limit })
		}
		fast, r1, e1 := decodeWith(context.Background(), data, nil, nil, nil, nil, opts...)
		slow, r2, e2 := decodeWith(context.Background(), data, nil, nil, nil, nil, append(opts, noFast)...)
		if e1 != nil || e2 != nil {
			t.Fatalf("%s: %v, %v", c.name, e1, e2)
		}
		if a, b := canonical(fast.g, r1), canonical(slow.g, r2); a != b {
			t.Errorf("%s: values differ:\nfast %s\nslow %s", c.name, a, b)
		}
		if fast.memo.len() != slow.memo.len() || fast.g.frames.len() != slow.g.frames.len() {
			t.Errorf("%s: memo %d/%d, frames %d/%d", c.name, fast.memo.len(), slow.memo.len(), fast.g.frames.len(), slow.g.frames.len())
		}
		if fast.fastLists != c.lists || fast.fastDicts != c.dicts {
			t.Errorf("%s: %d lists and %d dicts taken at once, want %d and %d", c.name, fast.fastLists, fast.fastDicts, c.lists, c.dicts)
		}
	}
}
