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
	// slots is an open-addressing table (linear probing) of stack ids + 1
	// by hash, 0 for empty; hashes holds each slot's stack hash. Go's map
	// of hash chains was a fifth of the decode of a trace of 124k distinct
	// stacks.
	slots  []uint32
	hashes []uint64
	seed   maphash.Seed
	// slab is where new stacks are copied: one allocation per many stacks
	// rather than one per stack.
	slab []uint32
}

// stackSlab is the number of frame ids allocated at once for new stacks.
const stackSlab = 1 << 16

// stackSlotsMin is the smallest table.
const stackSlotsMin = 256

func (t *stackTable) intern(ids []uint32) uint32 {
	if t.slots == nil {
		t.slots, t.hashes = make([]uint32, stackSlotsMin), make([]uint64, stackSlotsMin)
		t.seed = maphash.MakeSeed()
	}
	var h uint64
	if len(ids) > 0 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), len(ids)*4)
		h = maphash.Bytes(t.seed, b)
	}
	mask := len(t.slots) - 1
	i := int(h) & mask
	for ; t.slots[i] != 0; i = (i + 1) & mask {
		if s := t.slots[i]; t.hashes[i] == h && equalIDs(t.raws[s-1], ids) {
			return s - 1
		}
	}
	id := uint32(len(t.raws))
	t.raws = append(t.raws, t.copyOf(ids))
	if 4*len(t.raws) > 3*len(t.slots) { // load over 3/4: double, then place it
		t.grow()
		t.place(id+1, h)
		return id
	}
	t.slots[i], t.hashes[i] = id+1, h
	return id
}

// grow doubles the table.
func (t *stackTable) grow() {
	slots, hashes := t.slots, t.hashes
	t.slots, t.hashes = make([]uint32, 2*len(slots)), make([]uint64, 2*len(slots))
	for i, s := range slots {
		if s != 0 {
			t.place(s, hashes[i])
		}
	}
}

// place puts stack id+1 s of hash h in the first free slot of its probe.
func (t *stackTable) place(s uint32, h uint64) {
	mask := len(t.slots) - 1
	i := int(h) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i], t.hashes[i] = s, h
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
