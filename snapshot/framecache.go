package snapshot

import (
	"math/bits"
	"unsafe"
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
	keys  []*Frame
	vals  []V
	n     int
	shift uint // 64 - log2(len(keys))
}

// frameCacheMinSize is the smallest table.
const frameCacheMinSize = 256

func newFrameCache[V any]() *frameCache[V] {
	c := &frameCache[V]{}
	c.init(frameCacheMinSize)
	return c
}

func (c *frameCache[V]) init(size int) {
	c.keys = make([]*Frame, size)
	c.vals = make([]V, size)
	c.shift = uint(64 - bits.TrailingZeros(uint(size)))
	c.n = 0
}

// slot is where f's probe starts: frames are 8-byte aligned, so the
// multiplication mixes the high bits down.
func (c *frameCache[V]) slot(f *Frame) int {
	return int((uint64(uintptr(unsafe.Pointer(f))) * 0x9E3779B97F4A7C15) >> c.shift)
}

// Get returns f's value.
func (c *frameCache[V]) Get(f *Frame) (V, bool) {
	mask := len(c.keys) - 1
	for i := c.slot(f); c.keys[i] != nil; i = (i + 1) & mask {
		if c.keys[i] == f {
			return c.vals[i], true
		}
	}
	var zero V
	return zero, false
}

// Put sets f's value; f is not nil.
func (c *frameCache[V]) Put(f *Frame, v V) {
	if 4*(c.n+1) > 3*len(c.keys) { // load over 3/4: double
		keys, vals := c.keys, c.vals
		c.init(2 * len(keys))
		for i, k := range keys {
			if k != nil {
				c.Put(k, vals[i])
			}
		}
	}
	mask := len(c.keys) - 1
	i := c.slot(f)
	for ; c.keys[i] != nil; i = (i + 1) & mask {
		if c.keys[i] == f {
			c.vals[i] = v
			return
		}
	}
	c.keys[i], c.vals[i] = f, v
	c.n++
}

// Len is the number of frames cached.
func (c *frameCache[V]) Len() int { return c.n }
