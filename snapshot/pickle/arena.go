package pickle

import (
	"sync/atomic"

	"memscope/internal/pages"
)

// chunked is an append-only array stored in fixed-size chunks. Growing a
// single slice to millions of elements copies it over and over (half of the
// decode time on an 80 MB snapshot went to those copies); chunks never move.
//
// An array with a pool takes its chunks from outside the Go heap
// (offHeap) where it can, so that free and freeChunk give them back to the
// kernel at once instead of at the collector's next cycle; T must then hold
// no pointers, and nothing may read a chunk after it is freed.
type chunked[T any] struct {
	chunks [][]T
	n      uint32
	pool   *offHeapPool
	mapped []bool // per chunk: from offHeap
	// spare holds chunks of the heap taken from an array that was copied
	// (recycle): the next new chunks are these, cleared.
	spare [][]T
	// zero is the chunk that padShared's whole chunks share.
	zero []T
	// lazy maps new chunks off the heap page by page as they are written,
	// not at once: a helper's last chunk of records is mostly empty (with
	// 8 machines, 10 MiB of bigtrain's peak were such pages).
	lazy bool
	// small maps them in small pages (offHeapSmall), lazily: for records
	// of which a snapshot usually has a few thousand.
	small bool
}

// offHeapPool counts the chunks taken from outside the heap and not given
// back yet, for the arrays of one decode (both machines).
type offHeapPool struct{ live atomic.Int64 }

// newChunk makes a zeroed chunk.
func (c *chunked[T]) newChunk() []T { return c.newChunkPopulated(!c.lazy) }

// newChunkPopulated makes a zeroed chunk, its pages mapped at once or, off
// the heap, as they are first written (populate false).
func (c *chunked[T]) newChunkPopulated(populate bool) []T {
	if n := len(c.spare); n > 0 {
		s := c.spare[n-1]
		c.spare = c.spare[:n-1]
		clear(s)
		c.mapped = append(c.mapped, false)
		return s
	}
	if c.pool != nil {
		s, ok := []T(nil), false
		if c.small {
			s, ok = offHeapSmall[T](chunkLen)
		} else {
			s, ok = offHeap[T](chunkLen, populate)
		}
		if ok {
			c.pool.live.Add(1)
			c.mapped = append(c.mapped, true)
			return s
		}
	}
	c.mapped = append(c.mapped, false)
	return make([]T, chunkLen)
}

// freeChunk gives chunk k back; its elements must not be read again.
func (c *chunked[T]) freeChunk(k int) {
	if c.chunks[k] == nil {
		return
	}
	if c.mapped[k] {
		freeOffHeap(c.chunks[k])
		c.pool.live.Add(-1)
	}
	c.chunks[k] = nil
}

// giveChunk is freeChunk for a chunk whose pages sup may move onto memory
// about to be written (pages.Supply): one off the heap goes to sup, which
// unmaps what it does not move.
func (c *chunked[T]) giveChunk(k int, sup *pages.Supply) {
	if c.chunks[k] == nil || !c.mapped[k] {
		c.freeChunk(k)
		return
	}
	pages.Give(sup, c.chunks[k])
	c.pool.live.Add(-1)
	c.chunks[k] = nil
}

// free gives every chunk back and empties the array.
func (c *chunked[T]) free() {
	for k := range c.chunks {
		c.freeChunk(k)
	}
	c.chunks, c.mapped, c.n = nil, nil, 0
}

const (
	chunkBits = 16
	chunkLen  = 1 << chunkBits
	chunkMask = chunkLen - 1
)

func (c *chunked[T]) len() int { return int(c.n) }

func (c *chunked[T]) push(v T) uint32 {
	i := c.n
	if i&chunkMask == 0 && int(i>>chunkBits) == len(c.chunks) {
		c.chunks = append(c.chunks, c.newChunk())
	}
	c.chunks[i>>chunkBits][i&chunkMask] = v
	c.n++
	return i
}

func (c *chunked[T]) at(i uint32) *T { return &c.chunks[i>>chunkBits][i&chunkMask] }

// next is the element the next push would write, for a caller that fills
// it in place (a trace record, 40 bytes, was built, returned and copied):
// commit makes it the last element; a caller that does not commit calls
// abandon, so that the elements past len stay zero (pad relies on it).
func (c *chunked[T]) next() *T {
	i := c.n
	if i&chunkMask == 0 && int(i>>chunkBits) == len(c.chunks) {
		c.chunks = append(c.chunks, c.newChunk())
	}
	return &c.chunks[i>>chunkBits][i&chunkMask]
}

// commit adds the element next returned, and returns its index.
func (c *chunked[T]) commit() uint32 {
	i := c.n
	c.n++
	return i
}

// abandon clears the element next returned, not to be committed.
func (c *chunked[T]) abandon() {
	var zero T
	*c.next() = zero
}

// run reserves n contiguous elements and returns the index of the first one,
// or false when n does not fit in a chunk at all.
func (c *chunked[T]) run(n int) (uint32, bool) {
	if n > chunkLen {
		return 0, false
	}
	off := int(c.n & chunkMask)
	if c.n == 0 || off == 0 || off+n > chunkLen {
		// Start a fresh chunk; the tail of the previous one stays unused.
		c.chunks = append(c.chunks, c.newChunk())
		c.n = uint32(len(c.chunks)-1) << chunkBits
	}
	i := c.n
	c.n += uint32(n)
	return i, true
}

// slice returns n elements starting at i; they must lie in one chunk.
func (c *chunked[T]) slice(i uint32, n uint32) []T {
	off := i & chunkMask
	return c.chunks[i>>chunkBits][off : off+n : off+n]
}

// canGrow reports whether the run [i, i+n) ends at the array's tail and can
// grow by m within its chunk.
func (c *chunked[T]) canGrow(i, n uint32, m int) bool {
	return i+n == c.n && int((i&chunkMask)+n)+m <= chunkLen && c.n&chunkMask != 0
}

// recycle empties from, an array whose contents are no longer read, and
// keeps its chunks of the heap as c's next new chunks. A main machine that
// joins helpers one after the other copies each one's containers: with
// the chunks of the last one reused for the next, the copies leave no
// garbage behind (a report collects rarely, and 8 machines left 30 MiB).
func (c *chunked[T]) recycle(from *chunked[T]) {
	for k, s := range from.chunks {
		if s != nil && !from.mapped[k] && len(s) == chunkLen && !from.isZero(s) {
			c.spare = append(c.spare, s)
			from.chunks[k] = nil
		}
	}
	from.free()
}

// padShared is pad for elements that are only read until own is called
// for them (the memo's holes for a joined helper's entries, millions in a
// real trace): whole chunks of them share one zero chunk.
func (c *chunked[T]) padShared(n int) {
	for n > 0 {
		if c.n&chunkMask == 0 && n >= chunkLen && int(c.n>>chunkBits) == len(c.chunks) {
			if c.zero == nil {
				c.zero = make([]T, chunkLen)
			}
			c.chunks = append(c.chunks, c.zero)
			c.mapped = append(c.mapped, false)
			c.n += chunkLen
			n -= chunkLen
			continue
		}
		m := min(n, chunkLen-int(c.n&chunkMask))
		c.pad(m)
		n -= m
	}
}

// own makes element i writable: a shared zero chunk (padShared) that holds
// it is replaced by a chunk of its own.
func (c *chunked[T]) own(i uint32) {
	if k := i >> chunkBits; c.isZero(c.chunks[k]) {
		c.chunks[k] = make([]T, chunkLen) // the memo's: never off the heap
	}
}

// isZero reports whether s is the shared zero chunk.
func (c *chunked[T]) isZero(s []T) bool { return c.zero != nil && len(s) > 0 && &s[0] == &c.zero[0] }

// pad appends n zero elements. Only for an array that never used run: its
// elements past n are still zero.
func (c *chunked[T]) pad(n int) { c.padPopulated(n, true) }

// padPopulated is pad, the new chunks' pages mapped at once or as they are
// first written (see newChunkPopulated).
func (c *chunked[T]) padPopulated(n int, populate bool) {
	for n > 0 {
		if c.n&chunkMask == 0 && int(c.n>>chunkBits) == len(c.chunks) {
			c.chunks = append(c.chunks, c.newChunkPopulated(populate))
		}
		m := min(n, chunkLen-int(c.n&chunkMask))
		c.n += uint32(m)
		n -= m
	}
}
