package pickle

import (
	"hash/maphash"
	"slices"
	"unsafe"

	"memscope/internal/pages"
)

// stackTable interns call stacks, as lists of frame ids, by content. Real
// snapshots repeat the same few hundred stacks across hundreds of thousands
// of blocks and trace entries; storing each once keeps memory flat and lets
// analysis work per distinct stack.
//
// A trace of distinct stacks is the other extreme (300k stacks of 30 frames
// over a pool of 2000 frames: a miss in the table for most lists), so a
// lookup touches as little memory as it can: one 8-byte slot, which holds
// the stack's number and a part of its hash, then the stack's ids.
type stackTable struct {
	// refs says where each stack's ids are in slabs.
	refs  []stackRef
	slabs [][]uint32
	// slots is an open-addressing table (linear probing) by hash. Go's
	// map of hash chains was a fifth of the decode of a trace of 124k
	// distinct stacks; slices of ids per stack and separate arrays of
	// hashes were a cache miss each.
	slots []stackSlot
	seed  maphash.Seed
	// slabSize is the size of the next slab (0: stackSlab).
	slabSize int
	// claims are the stacks claim returned unchecked, checked in batches
	// (see claim).
	claims claimLog
	// named marks the stacks that hold a frame read by its memo index
	// (frameMemoRef), a bit a stack: fastList asks for each list, and
	// reading the stack's ids for it was a cache miss a list where
	// stacks are many.
	named []uint64
	// values marks, among a helper's named stacks, those it used as a
	// value (kStack), a bit a stack (see internStacks).
	values []uint64
	// weak, for tests, keeps 20 bits of each hash: distinct stacks then
	// share hashes, as they would by chance one time in 2^64.
	weak bool
	// pending is how many of the last stacks are not in slots yet: the
	// last join adds a helper's new stacks without placing them
	// (appendUnplaced), and ready places them before any lookup.
	pending int
}

// stackSlot is a slot of the table: a stack's hash, in two halves (12
// bytes a slot, not 16), and its id + 1 (0 for an empty slot).
type stackSlot struct{ lo, hi, id uint32 }

func slotOf(h uint64, id uint32) stackSlot {
	return stackSlot{lo: uint32(h), hi: uint32(h >> 32), id: id}
}

// is says whether the slot's hash is h.
func (s stackSlot) is(h uint64) bool { return s.lo == uint32(h) && s.hi == uint32(h>>32) }

// stackRef locates a stack's ids: slabs[slab][off : off+n].
type stackRef struct{ slab, off, n uint32 }

// stackSlab is the number of frame ids of a table's first slab; each
// later one doubles, to stackSlabMax. A slab of stackSlabMax holds at least
// one whole huge page, which it asks for (pages.Huge): a trace of distinct
// stacks stores tens of MiB of ids, and a fault per 4 KiB page of them
// was a twentieth of its decode's CPU. Small snapshots keep small slabs.
const (
	stackSlab    = 1 << 16
	stackSlabMax = 1 << 20
)

// stackSlotsMin is the smallest table.
const stackSlotsMin = 256

// len is the number of stacks.
func (t *stackTable) len() int { return len(t.refs) }

// isNamed says whether stack id holds a frame read by its memo index.
func (t *stackTable) isNamed(id uint32) bool { return t.named[id>>6]&(1<<(id&63)) != 0 }

// markValue marks stack id as used as a value (see values).
func (t *stackTable) markValue(id uint32) {
	for int(id>>6) >= len(t.values) {
		t.values = append(t.values, 0)
	}
	t.values[id>>6] |= 1 << (id & 63)
}

// isValue says whether markValue marked stack id.
func (t *stackTable) isValue(id uint32) bool {
	return int(id>>6) < len(t.values) && t.values[id>>6]&(1<<(id&63)) != 0
}

// get returns stack id's frame ids; they must not be changed.
func (t *stackTable) get(id uint32) []uint32 {
	r := t.refs[id]
	return t.slabs[r.slab][r.off : r.off+r.n : r.off+r.n]
}

// heapBytes is the memory the table holds.
func (t *stackTable) heapBytes() int64 {
	n := t.indexBytes()
	for _, s := range t.slabs {
		n += int64(cap(s)) * 4
	}
	return n
}

// indexBytes is the memory of the table less its slabs.
func (t *stackTable) indexBytes() int64 {
	return int64(cap(t.refs))*int64(unsafe.Sizeof(stackRef{})) + int64(cap(t.slots))*int64(unsafe.Sizeof(stackSlot{})) +
		int64(cap(t.claims.ids))*4 + int64(cap(t.named)+cap(t.values))*8 + int64(cap(t.claims.at))*int64(unsafe.Sizeof(claimed{}))
}

// hash is ids' hash: where a probe starts (its low bits) and what a slot
// keeps.
func (t *stackTable) hash(ids []uint32) uint64 {
	if len(ids) == 0 {
		return 0
	}
	h := maphash.Bytes(t.seed, idBytes(ids))
	if t.weak {
		h &= 0xff000000_00000fff
	}
	return h
}

// ready makes an empty table's slots and seed, and places the stacks added
// unplaced: lookups (find) and hashes from several goroutines at once need
// them made before.
func (t *stackTable) ready() {
	if t.slots == nil {
		t.slots = make([]stackSlot, stackSlotsMin)
		t.seed = maphash.MakeSeed()
	}
	if t.pending > 0 {
		t.placePending()
	}
}

// appendUnplaced adds a stack at ref, in a slab adoptSlabs gave t, that
// the table lacks, without placing it in slots: a stack distinct from
// every other, that holds no placeholder (a helper's, whose ids a join
// renumbered, and found missing). After the last join the slots are read
// only if the main machine meets another frame list, and placing the
// join's new stacks was most of its cost where stacks are distinct
// (hugesegs: 364k of them doubled the slots to 24 MiB, 106 ms of page
// faults, then 26 ms of cache misses).
func (t *stackTable) appendUnplaced(ref stackRef) uint32 {
	id := uint32(len(t.refs))
	t.refs = append(t.refs, ref)
	if int(id>>6) == len(t.named) {
		t.named = append(t.named, 0)
	}
	t.pending++
	return id
}

// placePending places the stacks appendUnplaced added, growing the slots
// once for all of them.
func (t *stackTable) placePending() {
	n := t.pending
	t.pending = 0
	size := len(t.slots)
	for 4*len(t.refs) > 3*size {
		size *= 2
	}
	if size > len(t.slots) {
		t.resize(size)
	}
	for id := len(t.refs) - n; id < len(t.refs); id++ {
		t.place(slotOf(t.hash(t.get(uint32(id))), uint32(id)+1))
	}
}

func (t *stackTable) intern(ids []uint32) uint32 {
	t.ready()
	return t.internHashed(t.hash(ids), ids)
}

// find is the id of the stack equal to ids, whose hash is h, if the
// table has one. It only reads the table (made ready): goroutines may call
// it at once while none interns.
func (t *stackTable) find(h uint64, ids []uint32) (uint32, bool) {
	mask := len(t.slots) - 1
	for i := int(h) & mask; t.slots[i].id != 0; i = (i + 1) & mask {
		if s := t.slots[i]; s.is(h) && equalIDs(t.get(s.id-1), ids) {
			return s.id - 1, true
		}
	}
	return 0, false
}

// findBatch is how many stacks findMany looks up together.
const findBatch = 16

// findMany is find for up to findBatch stacks: ids[k], whose hash is
// hs[k], into out[k] and found[k]. Finding a stack the table holds is
// three dependent cache misses (its slot, its ref, its ids), and a join
// finds a helper's hundreds of thousands: each level is read here for
// every stack before the next, so that the misses of different stacks
// overlap rather than follow one another. A stack not settled by its
// first slot goes through find.
func (t *stackTable) findMany(hs []uint64, ids [][]uint32, out []uint32, found []bool) {
	mask := len(t.slots) - 1
	var cand [findBatch]uint32 // the first slot's id + 1, when its hash matches
	for k, h := range hs {
		if s := t.slots[int(h)&mask]; s.id != 0 && s.is(h) && len(ids[k]) > 0 {
			cand[k] = s.id
		}
	}
	var refs [findBatch]stackRef
	for k, c := range cand[:len(hs)] {
		if c != 0 {
			refs[k] = t.refs[c-1]
		}
	}
	var first [findBatch]uint32 // the candidate's first frame id
	for k, c := range cand[:len(hs)] {
		if r := refs[k]; c != 0 && r.n > 0 {
			first[k] = t.slabs[r.slab][r.off]
		}
	}
	for k, h := range hs {
		if c := cand[k]; c != 0 && first[k] == ids[k][0] && equalIDs(t.get(c-1), ids[k]) {
			out[k], found[k] = c-1, true
			continue
		}
		out[k], found[k] = t.find(h, ids[k])
	}
}

// internHashed is intern for ids whose hash is h, in a ready table.
func (t *stackTable) internHashed(h uint64, ids []uint32) uint32 {
	return t.internAt(h, ids, stackRef{}, false)
}

// adoptSlabs makes o's slabs t's too, after t's own, and returns the index
// o's first slab has in t: o's stacks can then be adopted.
func (t *stackTable) adoptSlabs(o *stackTable) uint32 {
	base := uint32(len(t.slabs))
	t.slabs = append(t.slabs, o.slabs...)
	return base
}

// adopt is internHashed for ids that lie in a slab adoptSlabs gave t, at
// o's ref (its slab numbered from base): a new stack keeps them there
// instead of a copy. Nothing may change them after. They are frame ids
// of t's graph, never placeholders (frameMemoRef): a join adopts only a
// helper's stacks whose frames it renumbered, and scanning each for one
// was a tenth of the serial part of a join of 150k new stacks of 40.
func (t *stackTable) adopt(h uint64, ids []uint32, ref stackRef, base uint32) uint32 {
	ref.slab += base
	return t.internAt(h, ids, ref, true)
}

// slabPacker moves some of a table's stacks, in the order they were
// stored, to the front of its slabs, as store would have placed them alone
// (a stack alone in its slab stays there), and gives up the slabs left
// unused. A stack never moves past where it was, nor onto one not moved
// yet: packing a subsequence in order never ends later than packing all.
type slabPacker struct {
	t       *stackTable
	w, used int    // the slab being filled, and its ids so far
	big     []bool // slabs of one stack alone
	keep    []bool // big slabs whose stack moved (stays)
}

func newSlabPacker(t *stackTable) *slabPacker {
	p := &slabPacker{t: t, big: make([]bool, len(t.slabs)), keep: make([]bool, len(t.slabs))}
	for _, r := range t.refs {
		if r.n > stackSlab/4 {
			p.big[r.slab] = true
		}
	}
	return p
}

// move packs the stack at r, which comes after every stack moved before,
// and returns where it is now.
func (p *slabPacker) move(r stackRef) stackRef {
	if r.n > stackSlab/4 {
		p.keep[r.slab] = true
		return r
	}
	for p.w < len(p.big) && (p.big[p.w] || p.used+int(r.n) > cap(p.t.slabs[p.w])) {
		if !p.big[p.w] {
			p.t.slabs[p.w] = p.t.slabs[p.w][:p.used]
		}
		p.w, p.used = p.w+1, 0
	}
	dst := p.t.slabs[p.w][:max(len(p.t.slabs[p.w]), p.used+int(r.n))]
	copy(dst[p.used:], p.t.slabs[r.slab][r.off:r.off+r.n])
	p.t.slabs[p.w] = dst
	out := stackRef{slab: uint32(p.w), off: uint32(p.used), n: r.n}
	p.used += int(r.n)
	return out
}

// finish gives up the slabs no moved stack is in: after it only the moved
// stacks may be read.
func (p *slabPacker) finish() {
	for k := range p.t.slabs {
		switch {
		case p.big[k]:
			if !p.keep[k] {
				p.t.slabs[k] = nil
			}
		case k == p.w:
			p.t.slabs[k] = p.t.slabs[k][:p.used]
		case k > p.w:
			p.t.slabs[k] = nil
		}
	}
}

// internAt is internHashed, storing a new stack's ids (or, adopted, taking
// ref for them).
func (t *stackTable) internAt(h uint64, ids []uint32, ref stackRef, adopted bool) uint32 {
	mask := len(t.slots) - 1
	i := int(h) & mask
	for ; t.slots[i].id != 0; i = (i + 1) & mask {
		if s := t.slots[i]; s.is(h) && equalIDs(t.get(s.id-1), ids) {
			return s.id - 1
		}
	}
	if !adopted {
		ref = t.store(ids)
	}
	return t.add(i, h, ref, !adopted && hasPlaceholders(ids))
}

// add makes the stack at ref a new one, in the free slot i of its probe;
// named says whether it holds a frame read by its memo index.
func (t *stackTable) add(i int, h uint64, ref stackRef, named bool) uint32 {
	id := uint32(len(t.refs))
	if len(t.refs) == cap(t.refs) {
		// Doubled, where append grows a large slice by a quarter: the
		// 217 MB frame pool's 120k stacks a machine allocated 5x their
		// refs, none of it reused at report's collector pace.
		t.refs = slices.Grow(t.refs, max(stackSlotsMin, len(t.refs)))
	}
	t.refs = append(t.refs, ref)
	if int(id>>6) == len(t.named) {
		t.named = append(t.named, 0)
	}
	if named {
		t.named[id>>6] |= 1 << (id & 63)
	}
	s := slotOf(h, id+1)
	if 4*len(t.refs) > 3*len(t.slots) { // load over 3/4: double, then place it
		t.grow()
		t.place(s)
		return id
	}
	t.slots[i] = s
	return id
}

// reserve makes room for n more stacks at once, so that adding them does
// not double the slots (and place every stack again) along the way.
func (t *stackTable) reserve(n int) {
	t.ready()
	size := len(t.slots)
	for 4*(len(t.refs)+n) > 3*size {
		size *= 2
	}
	if size > len(t.slots) {
		t.resize(size)
	}
	t.refs = slices.Grow(t.refs, n)
}

// grow doubles the table.
func (t *stackTable) grow() { t.resize(2 * len(t.slots)) }

// resize places every stack in a table of size slots (a power of two).
func (t *stackTable) resize(size int) {
	slots := t.slots
	t.slots = make([]stackSlot, size)
	pages.Prefault(t.slots)
	for _, s := range slots {
		if s.id != 0 {
			t.place(s)
		}
	}
}

// place puts slot s in the first free slot of its probe.
func (t *stackTable) place(s stackSlot) {
	mask := len(t.slots) - 1
	i := int(s.lo) & mask
	for t.slots[i].id != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// store copies ids into the last slab, starting a new one when they do not
// fit; a stack longer than a quarter of a slab gets a slab of its own.
func (t *stackTable) store(ids []uint32) stackRef {
	last := len(t.slabs) - 1
	if big := len(ids) > stackSlab/4; big || last < 0 || len(ids) > cap(t.slabs[last])-len(t.slabs[last]) {
		size := len(ids) // a big stack's slab is full at once: the next starts one
		if !big {
			size = max(stackSlab, t.slabSize)
			t.slabSize = min(2*size, stackSlabMax)
		}
		slab := make([]uint32, 0, size)
		if size == stackSlabMax {
			pages.Huge(slab[:size])
		}
		t.slabs = append(t.slabs, slab)
		last++
	}
	s := t.slabs[last]
	t.slabs[last] = append(s, ids...)
	return stackRef{slab: uint32(last), off: uint32(len(s)), n: uint32(len(ids))}
}

// equalIDs compares the ids as bytes: the runtime's vectorised compare is a
// third of a loop's time on stacks of 30 frames, and interning a trace of
// distinct stacks compares one for most lists.
func equalIDs(a, b []uint32) bool {
	return len(a) == len(b) && string(idBytes(a)) == string(idBytes(b))
}

// idBytes is ids' memory as bytes.
func idBytes(ids []uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), len(ids)*4)
}
