package pickle

import (
	"math/bits"
	"math/rand/v2"

	"memscope/internal/pages"
)

// frameTable interns frames: a snapshot's millions of frame dicts hold a few
// thousand distinct (file, line, name) triples, so the decoder keeps a frame
// as a 4-byte id (in the memo, in a stack) rather than a 16-byte record or a
// container per dict.
type frameTable struct {
	frames chunked[rawFrame]
	// slots is an open-addressing index; it holds the frames themselves,
	// so a lookup reads one slot rather than the slot and the frame.
	slots []frameSlot
	shift uint // 64 - log2(len(slots))
	// seed randomises the hash, so a file cannot be built to make every
	// frame collide.
	seed uint64
	// limit is the most frames the table takes: maxFrameID, lower in tests.
	limit int
}

type frameSlot struct {
	f  rawFrame
	id uint32 // id + 1; 0 marks an empty slot
}

// maxFrameID bounds frame ids: the memo keeps a frame as an id under a
// three-bit tag (see memoFrame).
const maxFrameID = 1<<29 - 1

// frameMemoRef marks, in a helper's stack, a frame it could not read: the
// rest is the frame dict's memo index, resolved when the helper is joined
// (see frameList). Frame ids stay below it.
const frameMemoRef = 1 << 31

// minFrameSlots is the index size of a fresh table.
const minFrameSlots = 1 << 10

func (t *frameTable) len() int { return t.frames.len() }

func (t *frameTable) at(id uint32) rawFrame { return *t.frames.at(id) }

func (t *frameTable) hash(f rawFrame) uint64 {
	hi, lo := bits.Mul64(uint64(f.file)<<32|uint64(f.name)^t.seed, uint64(f.line)^0x9e3779b97f4a7c15)
	return hi ^ lo
}

// intern returns f's id, adding f when it is new; ok is false when the
// table is full (maxFrameID frames).
func (t *frameTable) intern(f rawFrame) (id uint32, ok bool) {
	if t.slots == nil {
		t.seed = rand.Uint64()
		t.resize(minFrameSlots)
		if t.limit == 0 {
			t.limit = maxFrameID
		}
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.hash(f) >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.id == 0 {
			break
		}
		if s.f == f {
			return s.id - 1, true
		}
	}
	n := t.frames.len()
	if n >= t.limit {
		return 0, false
	}
	if 2*(n+1) > len(t.slots) {
		t.resize(2 * len(t.slots))
	}
	id = t.frames.push(f)
	t.place(id)
	return id, true
}

func (t *frameTable) place(id uint32) {
	mask := uint64(len(t.slots) - 1)
	f := *t.frames.at(id)
	i := t.hash(f) >> t.shift
	for t.slots[i].id != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = frameSlot{f: f, id: id + 1}
}

func (t *frameTable) resize(n int) {
	t.slots = make([]frameSlot, n)
	pages.Prefault(t.slots)
	t.shift = uint(64 - bits.TrailingZeros(uint(n)))
	for id := range uint32(t.frames.len()) {
		t.place(id)
	}
}
