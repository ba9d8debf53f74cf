package pickle

import (
	"bytes"
	"encoding/binary"

	"memscope/internal/pages"
)

// spanCache remembers the frame lists a machine has interned, by their
// bytes. PyTorch writes each trace entry's frames as a fresh list of memo
// gets of frame dicts it wrote once, so a training loop's million entries
// repeat a few hundred lists byte for byte (bigtrain: 732k lists, 121
// distinct). A list whose bytes were seen before is interned
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
// after spanGiveUp misses with fewer than spanHitsPerMiss hits for each,
// and it keeps at most spanMaxBytes of list bytes. A miss costs a scan of
// the list and a probe, about what a hit saves: with the list before
// read apart (last), a cache hitting one list in two, or even four in
// five, made the decode 10-20% slower on five generated shapes, and one
// hitting 25 or more in 26 up to 20% faster. A cache that still has room
// is given spanTrial misses.
type spanCache struct {
	slots        []spanSlot // open addressing; len a power of two
	n, bytes     int
	hits, misses int
	quick        int  // hits found by prefix (a part of hits)
	full         bool // a list was not kept for want of room
	repeats      int  // lists that were the last one again (not hits)
	off          bool
	// byPrefix holds the lists last read by the hash of their first
	// spanPrefix bytes, in sets of spanWays (a set forgets its least
	// recently found list for a new one). A list found there needs no scan
	// of its opcodes, only a comparison of its bytes: scanning lists that
	// were then found was a tenth of the decode.
	prefixKeys []uint64 // spanWays per set; 0 for empty
	byPrefix   []spanSlot
	// last is the list read last, by where its bytes lie in the input:
	// PyTorch writes a free's two entries (free_requested, then
	// free_completed) with one stack, and a segment's allocation and its
	// block's, so the list just before is the likeliest repeat of all,
	// also in a trace whose stacks are too many to keep (where the cache
	// is off). Its bytes are compared where they lie: nothing is copied.
	last lastList
	// keep, when not 0, is how far back the last list may lie and still
	// be compared: a stream keeps only that much behind the machine
	// (Stream.Keep).
	keep int
}

// lastList is a list's bytes, data[from:to] (to is 0 for none), and what
// they interned to.
type lastList struct {
	from, to int
	start, n uint32
}

// again is the list read last, when data[from:end] begins with its bytes.
func (c *spanCache) again(data []byte, from, end int) (lastList, bool) {
	l := c.last
	n := l.to - l.from
	if l.to == 0 || n > end-from || c.keep > 0 && from-l.from > c.keep {
		return l, false
	}
	// Most lists differ from the one before in their first frame: one
	// word says so without a call (bytes.Equal on every list was a
	// twentieth of a frame pool's decode, nearly all of it for no match).
	if n >= 8 && binary.LittleEndian.Uint64(data[from:]) != binary.LittleEndian.Uint64(data[l.from:]) ||
		!bytes.Equal(data[from:from+n], data[l.from:l.to]) {
		return l, false
	}
	c.repeats++
	return l, true
}

// read notes that data[from:to] interned to start (n frames).
func (c *spanCache) read(from, to int, start, n uint32) {
	c.last = lastList{from: from, to: to, start: start, n: n}
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
	// spanHitsPerMiss is the fewest hits per miss for which the cache
	// stays on (see spanCache).
	spanHitsPerMiss = 4
	// spanTrial is how many misses a cache with room left has to reach
	// spanHitsPerMiss: a model's distinct lists come in its first steps,
	// all misses, and repeat after (5,000 lists over 140k entries turned
	// the cache off at the 4,096th miss, where it would have hit 26 times
	// a miss). A full cache has no later to wait for.
	spanTrial = 4 * spanGiveUp
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

// spanPrefix is how many bytes of a list (or of what follows a shorter
// one) byPrefix hashes; a list of two LONG_BINGETs and its APPENDS is 11.
const spanPrefix = 64

// byPrefix has spanPrefixSets sets of spanWays lists: distinct lists often
// share their first bytes (the frames innermost in the call, common to many
// stacks), and a set keeps several of them.
const (
	spanPrefixSets = 512
	spanWays       = 16
)

// prefixKey hashes the first spanPrefix bytes of b, in four independent
// lanes (a chain of eight multiplications was 4% of the decode). It only
// picks a set: a list found there is compared byte for byte.
func prefixKey(b []byte) uint64 {
	var _ [spanPrefix - 64]struct{} // it reads eight words: spanPrefix
	var _ [64 - spanPrefix]struct{} // must be 64
	b = b[:spanPrefix]
	w := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
	const k1, k2, k3, k4, k5 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD
	h := (w(0)^w(1)*k1)*k2 ^ (w(2)^w(3)*k1)*k3 ^ (w(4)^w(5)*k1)*k4 ^ (w(6)^w(7)*k1)*k5
	return h ^ h>>29 ^ h>>47
}

// recent returns the list remembered under key whose bytes begin rest, or
// nil. A set holds its lists most recently found first, as copies (the
// table's slots move when it grows), and its keys apart from them, so that
// a lookup reads two cache lines of keys and the lists whose keys match.
func (c *spanCache) recent(key uint64, rest []byte) *spanSlot {
	if c.byPrefix == nil {
		return nil
	}
	base := int(key&(spanPrefixSets-1)) * spanWays
	keys := c.prefixKeys[base : base+spanWays]
	for i, k := range keys {
		if k == 0 {
			return nil
		}
		if k != key {
			continue
		}
		set := c.byPrefix[base : base+spanWays]
		if p := &set[i]; len(p.span) <= len(rest) && bytes.Equal(rest[:len(p.span)], p.span) {
			if i > 0 {
				hit := *p
				copy(set[1:i+1], set[:i])
				copy(keys[1:i+1], keys[:i])
				set[0], keys[0] = hit, key
			}
			return &set[0]
		}
	}
	return nil
}

// remember puts s first among the lists under key, when the list's first
// bytes were there to hash (ok).
func (c *spanCache) remember(key uint64, s spanSlot, ok bool) {
	if !ok || c.off || key == 0 {
		return
	}
	if c.byPrefix == nil {
		c.byPrefix = make([]spanSlot, spanPrefixSets*spanWays)
		c.prefixKeys = make([]uint64, spanPrefixSets*spanWays)
	}
	base := int(key&(spanPrefixSets-1)) * spanWays
	set, keys := c.byPrefix[base:base+spanWays], c.prefixKeys[base:base+spanWays]
	copy(set[1:], set[:spanWays-1])
	copy(keys[1:], keys[:spanWays-1])
	set[0], keys[0] = s, key
}

// get returns what span interned to, when it was seen, or nil.
func (c *spanCache) get(h uint64, span []byte) *spanSlot {
	if c.off || c.n == 0 {
		return nil
	}
	mask := len(c.slots) - 1
	for i := c.slot(h); c.slots[i].span != nil; i = (i + 1) & mask {
		if s := &c.slots[i]; s.hash == h && bytes.Equal(s.span, span) {
			c.hits++
			return s
		}
	}
	return nil
}

// put records a span that was not in the cache and returns its slot
// (false when it was not kept).
func (c *spanCache) put(h uint64, span []byte, start, n uint32) (spanSlot, bool) {
	if c.off {
		return spanSlot{}, false
	}
	c.misses++
	if c.misses >= spanGiveUp && c.hits < spanHitsPerMiss*c.misses && (c.full || c.misses >= spanTrial) {
		*c = spanCache{off: true, last: c.last, repeats: c.repeats, keep: c.keep}
		return spanSlot{}, false
	}
	if c.bytes+len(span) > spanMaxBytes {
		c.full = true
		return spanSlot{}, false
	}
	if 4*(c.n+1) > 3*len(c.slots) {
		old := c.slots
		c.slots = make([]spanSlot, max(spanMinSlots, 2*len(old)))
		pages.Prefault(c.slots)
		for _, s := range old {
			if s.span != nil {
				c.place(s)
			}
		}
	}
	sl := spanSlot{hash: h, span: bytes.Clone(span), start: start, n: n}
	c.place(sl)
	c.n++
	c.bytes += len(span)
	return sl, true
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

// reset forgets every list (a memo entry changed), the last one too, not
// how well the cache did.
func (c *spanCache) reset() {
	c.last = lastList{}
	clear(c.slots)
	clear(c.byPrefix)
	clear(c.prefixKeys)
	c.n, c.bytes = 0, 0
}
