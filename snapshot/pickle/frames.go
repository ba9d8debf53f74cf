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
	// slots is an open-addressing index of 8-byte slots: a frame's id and
	// the top half of its hash. A trace of millions of distinct frames
	// (line numbers drawn at random) held them in 24-byte slots with the
	// frame inline: 96 MB for 1.6M frames, and 240 MB allocated by the
	// doublings. A lookup that matches the tag reads the frame from
	// frames; one that does not, nothing else.
	slots []frameSlot
	shift uint // 64 - log2(len(slots))
	// seed randomises the hash, so a file cannot be built to make every
	// frame collide.
	seed uint64
	// limit is the most frames the table takes: maxFrameID, lower in tests.
	limit int
}

type frameSlot struct {
	// tag is the top 32 bits of the frame's hash: the slot a probe starts
	// from is its top bits too, so a resize places frames without reading
	// them.
	tag uint32
	id  uint32 // id + 1; 0 marks an empty slot
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
	h := t.hash(f)
	tag := uint32(h >> 32)
	mask := uint64(len(t.slots) - 1)
	i := h >> t.shift
	for ; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.id == 0 {
			break
		}
		if s.tag == tag && *t.frames.at(s.id - 1) == f {
			return s.id - 1, true
		}
	}
	n := t.frames.len()
	if n >= t.limit {
		return 0, false
	}
	id = t.frames.push(f)
	if 2*(n+1) > len(t.slots) {
		t.resize(2 * len(t.slots)) // places id with the others
	} else {
		t.slots[i] = frameSlot{tag: tag, id: id + 1}
	}
	return id, true
}

// place puts a frame of hash tag tag in the first free slot of its probe.
func (t *frameTable) place(s frameSlot) {
	mask := uint64(len(t.slots) - 1)
	i := uint64(s.tag) >> (t.shift - 32)
	for t.slots[i].id != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// resize makes an index of n slots (a power of two, at most 1<<32) and
// places every frame in it, from the old index's tags.
func (t *frameTable) resize(n int) {
	old := t.slots
	t.slots = make([]frameSlot, n)
	pages.Prefault(t.slots)
	t.shift = uint(64 - bits.TrailingZeros(uint(n)))
	placed := 0
	for _, s := range old {
		if s.id != 0 {
			t.place(s)
			placed++
		}
	}
	// A frame pushed before this resize has no slot yet.
	for id := uint32(placed); id < uint32(t.frames.len()); id++ {
		t.place(frameSlot{tag: uint32(t.hash(*t.frames.at(id)) >> 32), id: id + 1})
	}
}
