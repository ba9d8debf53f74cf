package pickle

import (
	"hash/maphash"
	"unsafe"
)

// stackTable interns call stacks by content. Real snapshots repeat the same
// few hundred stacks across hundreds of thousands of blocks and trace
// entries; storing each once keeps memory flat and lets analysis work per
// distinct stack.
type stackTable struct {
	raws  [][]rawFrame
	index map[uint64][]uint32
	seed  maphash.Seed
}

func (t *stackTable) intern(raw []rawFrame) uint32 {
	if t.index == nil {
		t.index = make(map[uint64][]uint32)
		t.seed = maphash.MakeSeed()
	}
	var h uint64
	if len(raw) > 0 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw)*int(unsafe.Sizeof(rawFrame{})))
		h = maphash.Bytes(t.seed, b)
	}
	for _, id := range t.index[h] {
		if equalRaw(t.raws[id], raw) {
			return id
		}
	}
	id := uint32(len(t.raws))
	t.raws = append(t.raws, append([]rawFrame(nil), raw...))
	t.index[h] = append(t.index[h], id)
	return id
}

func equalRaw(a, b []rawFrame) bool {
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
