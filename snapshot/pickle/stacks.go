package pickle

import (
	"hash/maphash"
	"unsafe"
)

// stackTable interns call stacks, as lists of frame ids, by content. Real
// snapshots repeat the same few hundred stacks across hundreds of thousands
// of blocks and trace entries; storing each once keeps memory flat and lets
// analysis work per distinct stack.
type stackTable struct {
	raws [][]uint32
	// index maps a stack's hash to its id + 1; next chains ids whose
	// hashes collide (id + 1, 0 ends the chain).
	index map[uint64]uint32
	next  []uint32
	seed  maphash.Seed
	// slab is where new stacks are copied: one allocation per many stacks
	// rather than one per stack.
	slab []uint32
}

// stackSlab is the number of frame ids allocated at once for new stacks.
const stackSlab = 1 << 16

func (t *stackTable) intern(ids []uint32) uint32 {
	if t.index == nil {
		t.index = make(map[uint64]uint32)
		t.seed = maphash.MakeSeed()
	}
	var h uint64
	if len(ids) > 0 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), len(ids)*4)
		h = maphash.Bytes(t.seed, b)
	}
	head := t.index[h]
	for s := head; s != 0; s = t.next[s-1] {
		if equalIDs(t.raws[s-1], ids) {
			return s - 1
		}
	}
	id := uint32(len(t.raws))
	t.raws = append(t.raws, t.copyOf(ids))
	t.next = append(t.next, head)
	t.index[h] = id + 1
	return id
}

// copyOf copies ids into the slab, starting a new one when they do not fit.
func (t *stackTable) copyOf(ids []uint32) []uint32 {
	if len(ids) > cap(t.slab)-len(t.slab) {
		if len(ids) > stackSlab/4 {
			return append([]uint32(nil), ids...)
		}
		t.slab = make([]uint32, 0, stackSlab)
	}
	n := len(t.slab)
	t.slab = append(t.slab, ids...)
	return t.slab[n : n+len(ids) : n+len(ids)]
}

func equalIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
