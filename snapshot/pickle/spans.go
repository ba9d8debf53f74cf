package pickle

import "bytes"

// spanCache remembers the frame lists a machine has interned, by their
// bytes. PyTorch writes each trace entry's frames as a fresh list of memo
// gets of frame dicts it wrote once, so a training loop's million entries
// repeat a few hundred lists byte for byte (bigtrain: 732k lists, under a
// hundred distinct). A list whose bytes were seen before is interned
// without looking up each of its thirty-odd frames in the memo and hashing
// their ids again.
//
// Equal bytes are the same list as long as no memo entry a list reads has
// changed since: memo entries are only appended, except by BINPUT and
// LONG_BINPUT at an index already used, and those empty the cache
// (decoder.setMemo). A memo entry that becomes a frame later (a dict
// filled after its MEMOIZE) cannot change a list in the cache, which read
// only entries that were frames already.
//
// A machine reading distinct stacks (generated shapes, or a model whose
// stacks never repeat) would only pay for the cache: it turns itself off
// after spanGiveUp misses with fewer hits than misses, and it keeps at
// most spanMaxBytes of list bytes.
type spanCache struct {
	slots        []spanSlot // open addressing; len a power of two
	n, bytes     int
	hits, misses int
	off          bool
}

// spanSlot is a list's bytes (from its MARK's next opcode to its APPENDS,
// included) and what they interned to.
type spanSlot struct {
	hash     uint64
	span     []byte
	start, n uint32
}

const (
	spanMinSlots = 256
	spanMaxBytes = 1 << 20
	spanGiveUp   = 4096
)

// spanHash folds one memo get into h: the opcode's index, with BINGET's
// one-byte indices kept apart from LONG_BINGET's.
func spanHash(h uint64, idx uint32, long bool) uint64 {
	x := uint64(idx)
	if !long {
		x |= 1 << 40
	}
	return (h ^ x) * 0x100000001b3
}

const spanSeed = 0xcbf29ce484222325

// get returns what span interned to, when it was seen.
func (c *spanCache) get(h uint64, span []byte) (start, n uint32, ok bool) {
	if c.off || c.n == 0 {
		return 0, 0, false
	}
	mask := len(c.slots) - 1
	for i := c.slot(h); c.slots[i].span != nil; i = (i + 1) & mask {
		if s := &c.slots[i]; s.hash == h && bytes.Equal(s.span, span) {
			c.hits++
			return s.start, s.n, true
		}
	}
	return 0, 0, false
}

// put records a span that was not in the cache.
func (c *spanCache) put(h uint64, span []byte, start, n uint32) {
	if c.off {
		return
	}
	if c.misses++; c.misses >= spanGiveUp && 4*c.hits < c.misses {
		*c = spanCache{off: true}
		return
	}
	if c.bytes+len(span) > spanMaxBytes {
		return
	}
	if 4*(c.n+1) > 3*len(c.slots) {
		old := c.slots
		c.slots = make([]spanSlot, max(spanMinSlots, 2*len(old)))
		for _, s := range old {
			if s.span != nil {
				c.place(s)
			}
		}
	}
	c.place(spanSlot{hash: h, span: bytes.Clone(span), start: start, n: n})
	c.n++
	c.bytes += len(span)
}

// slot is where h's probe starts.
func (c *spanCache) slot(h uint64) int {
	return int((h*0x9E3779B97F4A7C15)>>32) & (len(c.slots) - 1)
}

func (c *spanCache) place(s spanSlot) {
	mask := len(c.slots) - 1
	i := c.slot(s.hash)
	for c.slots[i].span != nil {
		i = (i + 1) & mask
	}
	c.slots[i] = s
}

// reset forgets every list (a memo entry changed), not how well the cache
// did.
func (c *spanCache) reset() {
	clear(c.slots)
	c.n, c.bytes = 0, 0
}
