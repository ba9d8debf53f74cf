package pickle

import (
	"strings"
	"testing"
)

// TestFrameTableAroundItsResize interns distinct frames below, at and past
// the point where the index doubles, and finds each again.
func TestFrameTableAroundItsResize(t *testing.T) {
	for _, n := range []int{minFrameSlots/2 - 1, minFrameSlots / 2, minFrameSlots/2 + 1, 5 * minFrameSlots} {
		var tab frameTable
		for i := range n {
			f := rawFrame{file: uint32(i % 7), name: uint32(i / 7), line: int64(i) - 3}
			if id, ok := tab.intern(f); !ok || id != uint32(i) {
				t.Fatalf("n=%d: frame %d got id %d, %v", n, i, id, ok)
			}
		}
		for i := range n {
			f := rawFrame{file: uint32(i % 7), name: uint32(i / 7), line: int64(i) - 3}
			if id, _ := tab.intern(f); id != uint32(i) || tab.at(id) != f {
				t.Fatalf("n=%d: frame %d found as %d", n, i, id)
			}
		}
		if tab.len() != n || 2*n > len(tab.slots) {
			t.Errorf("n=%d: %d frames in %d slots", n, tab.len(), len(tab.slots))
		}
	}
}

// TestFrameTableLimit: the table takes up to its limit, then refuses; a
// frame dict past it stays a dict, and binding says what is wrong.
func TestFrameTableLimit(t *testing.T) {
	tab := frameTable{limit: 3}
	for i := range 4 {
		_, ok := tab.intern(rawFrame{line: int64(i)})
		if want := i < 3; ok != want {
			t.Errorf("frame %d: ok=%v, want %v", i, ok, want)
		}
	}
	if _, ok := tab.intern(rawFrame{line: 1}); !ok {
		t.Error("a frame already in a full table is refused")
	}

	// Two frames, the second past a limit of one.
	data := pickleOf([]byte{opEmptyList, opMemoize, opMark}, frameOps("a.py", 1, "f"), frameOps("b.py", 2, "g"), []byte{opAppends})
	d := newDecoder(data)
	d.g.frames.limit = 1
	root, err := d.run()
	if err != nil {
		t.Fatal(err)
	}
	items := d.g.seq(root)
	if len(items) != 2 || items[0].k != kFrame || items[1].k != kDict {
		t.Fatalf("items %+v: want a frame, then a dict", items)
	}
	b := newBinder(d.g, len(data))
	if _, err := b.stack(root, "frames"); err == nil || !strings.Contains(err.Error(), "distinct frames") {
		t.Errorf("binding past the limit: %v", err)
	}
}

// TestMemoValsLimit: scalars memoized up to the limit are kept; one more
// is refused with the offset.
func TestMemoValsLimit(t *testing.T) {
	ops := []byte{opEmptyList, opMemoize, opMark}
	for _, s := range []string{"a", "b", "c"} {
		ops = append(ops, su(s)...)
		ops = append(ops, opMemoize)
	}
	data := pickleOf(append(ops, opAppends))
	for _, c := range []struct {
		max int
		ok  bool
	}{{3, true}, {2, false}} {
		d := newDecoder(data)
		d.memoValsMax = c.max
		_, err := d.run()
		if (err == nil) != c.ok {
			t.Errorf("limit %d: %v", c.max, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "limit") || !strings.Contains(err.Error(), "byte 16")) {
			t.Errorf("limit %d: the refusal does not name the limit and offset: %v", c.max, err)
		}
	}
}

// TestStacksAroundTheSlabLimit: stacks up to a quarter slab are copied into
// the shared slab, longer ones get their own array; both are found again.
func TestStacksAroundTheSlabLimit(t *testing.T) {
	var tab stackTable
	var ids []uint32
	for _, n := range []int{0, 1, stackSlab/4 - 1, stackSlab / 4, stackSlab/4 + 1, stackSlab} {
		st := make([]uint32, n)
		for i := range st {
			st[i] = uint32(i * n)
		}
		ids = append(ids, tab.intern(st))
		if again := tab.intern(append([]uint32(nil), st...)); again != ids[len(ids)-1] {
			t.Errorf("len %d: interned as %d, then %d", n, ids[len(ids)-1], again)
		}
		if got := tab.get(ids[len(ids)-1]); !equalIDs(got, st) {
			t.Errorf("len %d: stored stack differs", n)
		}
	}
	if tab.len() != len(ids) {
		t.Errorf("%d stacks stored for %d distinct", tab.len(), len(ids))
	}
}

// TestFrameTableTagCollisions: frames whose hashes share their top 32 bits
// (the tag a slot keeps) are told apart by the frames themselves. With a
// fixed seed, 300k frames hold such pairs; each is found under its own id,
// before and after the resizes that place frames by their tags alone.
func TestFrameTableTagCollisions(t *testing.T) {
	tab := frameTable{seed: 1, limit: maxFrameID}
	tab.resize(minFrameSlots)
	const n = 300000
	frame := func(i int) rawFrame { return rawFrame{file: uint32(i % 13), name: uint32(i % 101), line: int64(i)} }
	byTag := map[uint32]int{}
	pairs := 0
	for i := range n {
		tag := uint32(tab.hash(frame(i)) >> 32)
		if _, ok := byTag[tag]; ok {
			pairs++
		}
		byTag[tag] = i
		if id, ok := tab.intern(frame(i)); !ok || id != uint32(i) {
			t.Fatalf("frame %d interned as %d, %v", i, id, ok)
		}
	}
	if pairs == 0 {
		t.Fatal("no two frames share a tag: the test checks nothing")
	}
	for i := range n {
		if id, _ := tab.intern(frame(i)); id != uint32(i) {
			t.Fatalf("frame %d found as %d (%d tag pairs)", i, id, pairs)
		}
	}
	if tab.len() != n {
		t.Errorf("%d frames, want %d", tab.len(), n)
	}
}
