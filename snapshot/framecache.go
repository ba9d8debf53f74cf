package snapshot

import (
	"math/bits"
	"unsafe"

	"memscope/internal/pages"
)

// frameCache maps frames, by pointer, to what was read from them. A
// snapshot's stacks point into its table of a few thousand distinct frames,
// and the role rules read every frame of every distinct stack: 3.7 million
// lookups on a trace of 124k stacks of 30 frames, where Go's map spent
// 20 ns each. This is an open-addressing table with linear probing and no
// deletes.
//
// The slot comes from the frame's address, but the key compared is the
// pointer itself: were a frame ever to move, a lookup would only miss and
// read the frame again.
type frameCache[V any] struct {
	// slots hold each frame next to its value: a lookup reads one cache
	// line, not one in a keys array and one in a values array.
	slots []frameSlot[V]
	n     int
	shift uint // 64 - log2(len(slots))
	// dense holds the values of one table's frames by index (see
	// useTable), base being the address of its first frame. frames
	// keeps that array alive: were the table to grow into a new one, no
	// other frame could then take an address in the old one's range.
	frames []Frame
	base   uintptr
	dense  []denseSlot[V]
	nd     int // frames set in dense
}

type denseSlot[V any] struct {
	val V
	ok  bool
}

// frameSize is the distance between two frames of a table.
const frameSize = unsafe.Sizeof(Frame{})

type frameSlot[V any] struct {
	key *Frame
	val V
}

// frameCacheMinSize is the smallest table.
const frameCacheMinSize = 256

func newFrameCache[V any]() *frameCache[V] {
	c := &frameCache[V]{}
	c.init(frameCacheMinSize)
	return c
}

func (c *frameCache[V]) init(size int) {
	c.slots = make([]frameSlot[V], size)
	pages.Prefault(c.slots)
	c.shift = uint(64 - bits.TrailingZeros(uint(size)))
	c.n = 0
}

// slot is where f's probe starts: frames are 8-byte aligned, so the
// multiplication mixes the high bits down.
func (c *frameCache[V]) slot(f *Frame) int {
	return int((uint64(uintptr(unsafe.Pointer(f))) * 0x9E3779B97F4A7C15) >> c.shift)
}

// useTable keeps the values of t's frames in an array by index: a frame of
// a snapshot's stacks is found by its distance from the table's first
// frame, which on a trace of 300k distinct stacks was 9 million probes of
// the table by address. Frames outside t (appended later, or of another
// table) still go to the table by address.
func (c *frameCache[V]) useTable(t *FrameTable) {
	if t == nil || len(t.Frames) == 0 || c.dense != nil {
		return
	}
	c.frames = t.Frames
	c.base = uintptr(unsafe.Pointer(&t.Frames[0]))
	c.dense = make([]denseSlot[V], len(t.Frames))
	pages.Prefault(c.dense)
}

// denseOf is the dense array when it holds t's frames by index (useTable
// was given t, or a table sharing its array), else nil. An id past its end
// is a frame added to t since.
func (c *frameCache[V]) denseOf(t *FrameTable) []denseSlot[V] {
	if c.dense == nil || t == nil || len(t.Frames) == 0 || uintptr(unsafe.Pointer(&t.Frames[0])) != c.base {
		return nil
	}
	return c.dense
}

// fill sets dense slot d (of denseOf's array) to v.
func (c *frameCache[V]) fill(d *denseSlot[V], v V) {
	if !d.ok {
		c.nd++
	}
	*d = denseSlot[V]{v, true}
}

// at is f's slot in the dense array, or nil.
func (c *frameCache[V]) at(f *Frame) *denseSlot[V] {
	// Only the difference of the addresses is computed: nothing is made a
	// pointer again, and a frame outside the table is a large or
	// "negative" (wrapped) offset.
	if off := uintptr(unsafe.Pointer(f)) - c.base; off < uintptr(len(c.dense))*frameSize {
		return &c.dense[off/frameSize]
	}
	return nil
}

// Get returns f's value.
func (c *frameCache[V]) Get(f *Frame) (V, bool) {
	if d := c.at(f); d != nil {
		return d.val, d.ok
	}
	mask := len(c.slots) - 1
	for i := c.slot(f); c.slots[i].key != nil; i = (i + 1) & mask {
		if c.slots[i].key == f {
			return c.slots[i].val, true
		}
	}
	var zero V
	return zero, false
}

// Put sets f's value; f is not nil.
func (c *frameCache[V]) Put(f *Frame, v V) {
	if d := c.at(f); d != nil {
		if !d.ok {
			c.nd++
		}
		*d = denseSlot[V]{v, true}
		return
	}
	if 4*(c.n+1) > 3*len(c.slots) { // load over 3/4: double
		old := c.slots
		c.init(2 * len(old))
		for _, s := range old {
			if s.key != nil {
				c.Put(s.key, s.val)
			}
		}
	}
	mask := len(c.slots) - 1
	i := c.slot(f)
	for ; c.slots[i].key != nil; i = (i + 1) & mask {
		if c.slots[i].key == f {
			c.slots[i].val = v
			return
		}
	}
	c.slots[i] = frameSlot[V]{f, v}
	c.n++
}

// Len is the number of frames cached.
func (c *frameCache[V]) Len() int { return c.n + c.nd }
