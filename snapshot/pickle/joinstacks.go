package pickle

// Joining a helper's stacks: each numbered as the main machine's table
// numbers it, looked up on every core, the new ones interned in order.

import (
	"slices"

	"memscope/internal/par"
)

// joinStacksMin is the fewest of a helper's stacks a goroutine of the join
// looks up.
const joinStacksMin = 4096

// joinParts is how many goroutines look up n stacks on procs cores.
func joinParts(procs, n int) int { return max(1, min(procs, n/joinStacksMin)) }

// internStacks numbers each of the helper's stacks as the main machine's
// table does, interning those it lacks. The join is serial, and on one
// core this was most of it (the frame-pool shape: a helper's 113k stacks,
// 45 ms; with four machines, three such joins): so the stacks are first
// looked up on up to procs goroutines, which only read the table, and
// those it lacks are interned after, in order, numbered as they would be
// one by one. A stack with a frame the helper named by memo index
// (frameMemoRef) is resolved in the first pass when every such frame
// names a frame (framesNamed), and is otherwise left to the second, which
// makes it a generic list; unless the helper used it as a value (kStack,
// see fastList), which the join does not turn into a container: then it
// is false, with no stack added, and the main machine runs the region.
func (j *joiner) internStacks(procs int) bool {
	hg, t, n := j.h.g, &j.d.g.stacks, len(j.stacks)
	t.ready()
	parts := joinParts(procs, n)
	// missed holds, per part, the stacks to intern: a stack's number,
	// with its hash when the first pass read all its frames.
	type miss struct {
		i uint32
		h uint64
	}
	const unread = 1 << 31 // in miss.i: a placeholder stopped the first pass
	missed := make([][]miss, parts)
	valued := make([]bool, parts) // a part met a value whose placeholder names no frame
	named := make([]bool, parts)  // a part resolved a stack's placeholders
	look := func(p int) {
		var out []miss
		// A batch of stacks for findMany: their numbers, hashes, ids.
		var (
			is    [findBatch]uint32
			hs    [findBatch]uint64
			idss  [findBatch][]uint32
			got   [findBatch]uint32
			found [findBatch]bool
		)
		nb := 0
		lookBatch := func() {
			t.findMany(hs[:nb], idss[:nb], got[:nb], found[:nb])
			for k := range nb {
				if found[k] {
					j.stacks[is[k]] = got[k]
				} else {
					out = append(out, miss{i: is[k], h: hs[k]})
				}
			}
			nb = 0
		}
		var resolved []uint32 // a stack's ids resolved, before they replace its own
		for i := p * n / parts; i < (p+1)*n/parts; i++ {
			ids := hg.stacks.get(uint32(i))
			if hasPlaceholders(ids) {
				var ok bool
				named[p] = true
				if resolved, ok = j.framesNamed(resolved[:0], ids); !ok {
					if hg.stacks.isValue(uint32(i)) {
						valued[p] = true
						return
					}
					lookBatch() // out stays in order: it numbers the new stacks
					out = append(out, miss{i: uint32(i) | unread})
					continue
				}
				copy(ids, resolved)
			} else {
				// The helper's stack becomes the main machine's: its ids
				// are renumbered where they lie (see adopt).
				for k, f := range ids {
					ids[k] = j.frames[f]
				}
			}
			is[nb], hs[nb], idss[nb] = uint32(i), t.hash(ids), ids
			if nb++; nb == findBatch {
				lookBatch()
			}
		}
		lookBatch()
		missed[p] = out
	}
	par.Each(parts, look)
	if slices.Contains(valued, true) {
		return false
	}
	// The stacks the main machine lacks keep the ids the first pass
	// renumbered, in the helper's slabs, which the main table takes over:
	// copying them was most of a join of distinct stacks (the frame pool's
	// 67k new stacks of 30 frames, 8 MB written to fresh pages). When the
	// helper has no stack that is read after this pass (one with a
	// placeholder, see copyContainers), the ones taken over are first
	// packed to the front of its slabs, and the rest given up: with four
	// machines the stacks the main machine had already were 18 MiB.
	compact, adds := true, 0
	for _, out := range missed {
		adds += len(out)
		for _, m := range out {
			compact = compact && m.i&unread == 0
		}
	}
	// The last join's new stacks are added unplaced (see
	// appendUnplaced), when none is left to the second pass. Two of them
	// may be one stack where a placeholder was resolved (two that named
	// different memo entries may name one frame, and one frame written
	// twice is one frame here) or where two of the helper's frames are
	// one of the main machine's: then they are told apart by a table of
	// their own (adds), a fraction of the main table's size. Otherwise
	// most of what the table lacks is new to it: its slots grow once for
	// all, not doubling (and placing every stack again) as they come.
	unplaced := compact && j.d.nextHelper == len(j.d.helpers)
	var dedup *addSet
	if unplaced && (slices.Contains(named, true) || !distinctIDs(j.frames)) {
		dedup = newAddSet(adds)
	}
	if !unplaced {
		t.reserve(adds)
	} else {
		t.refs = slices.Grow(t.refs, adds)
	}
	refs := hg.stacks.refs
	if compact {
		refs = make([]stackRef, len(hg.stacks.refs))
		pk := newSlabPacker(&hg.stacks)
		for _, out := range missed {
			for _, m := range out {
				refs[m.i] = pk.move(hg.stacks.refs[m.i])
			}
		}
		pk.finish()
	}
	slab := t.adoptSlabs(&hg.stacks)
	var ids []uint32
	for _, out := range missed {
	misses:
		for _, m := range out {
			i := m.i &^ unread
			if m.i&unread == 0 {
				r := refs[i]
				if unplaced {
					if dedup != nil {
						if id, ok := dedup.find(t, m.h, hg.stacks.slabs[r.slab][r.off:r.off+r.n]); ok {
							j.stacks[i] = id
							continue
						}
					}
					r.slab += slab
					j.stacks[i] = t.appendUnplaced(r)
					if dedup != nil {
						dedup.add(m.h, j.stacks[i])
					}
				} else {
					j.stacks[i] = t.adopt(m.h, hg.stacks.slabs[r.slab][r.off:r.off+r.n], r, slab)
				}
				continue
			}
			ids = ids[:0]
			for _, f := range hg.stacks.get(i) {
				if f&frameMemoRef == 0 {
					ids = append(ids, j.frames[f])
					continue
				}
				// A frame the helper read by its memo index. Were it
				// none, one machine would have made a generic list: so
				// does the join (see copyContainers).
				v := j.resolve(val{k: kRef, ref: f &^ frameMemoRef})
				if v.k != kFrame {
					j.stacks[i] = noRef
					continue misses
				}
				ids = append(ids, v.ref)
			}
			j.stacks[i] = t.internHashed(t.hash(ids), ids)
		}
	}
	return true
}

// framesNamed appends to dst the main machine's ids of a helper's stack
// ids, whose placeholders (frameMemoRef) name frames; false when one names
// anything else. It only reads (the main machine's memo, the helper's,
// and the joins before), so internStacks runs it on every core: resolved
// one by one after the lookups, the stacks with a placeholder were most
// of the join of a frame pool whose frames are first written all along
// the trace (70k frames: 28 ms a report, one core idle).
func (j *joiner) framesNamed(dst, ids []uint32) ([]uint32, bool) {
	for _, f := range ids {
		if f&frameMemoRef == 0 {
			dst = append(dst, j.frames[f])
			continue
		}
		id, ok := j.frameNamed(f &^ frameMemoRef)
		if !ok {
			return dst, false
		}
		dst = append(dst, id)
	}
	return dst, true
}

// frameNamed is resolve for a placeholder that must name a frame, without
// remap's reads of the tables internStacks is still filling: a stack is
// all frames, or the join leaves it a generic list (copyContainers).
func (j *joiner) frameNamed(idx uint32) (uint32, bool) {
	for {
		if int(idx) < j.memoAt {
			v := j.d.entryBelow(idx)
			return v.ref, v.k == kFrame
		}
		v, ok := j.helperEntry(idx)
		switch {
		case !ok:
			return 0, false
		case v.k == kFrame:
			return j.frames[v.ref], true
		case v.k != kRef:
			return 0, false
		}
		idx = v.ref
	}
}

// distinctIDs says whether no id is in ids twice.
func distinctIDs(ids []uint32) bool {
	seen := make([]uint64, 0, 64)
	for _, id := range ids {
		w := int(id >> 6)
		if w >= len(seen) {
			seen = append(seen, make([]uint64, w+1-len(seen))...)
		}
		if seen[w]&(1<<(id&63)) != 0 {
			return false
		}
		seen[w] |= 1 << (id & 63)
	}
	return true
}

// addSet finds, among the stacks a join adds unplaced, one equal to a
// stack: an open-addressing table of their ids, by hash.
type addSet struct {
	slots []stackSlot
	last  int // the slot the last find stopped at: where add puts
}

func newAddSet(n int) *addSet {
	size := stackSlotsMin
	for 4*n > 3*size {
		size *= 2
	}
	return &addSet{slots: make([]stackSlot, size)}
}

// find looks up the stack of ids, whose hash is h, among those added.
func (a *addSet) find(t *stackTable, h uint64, ids []uint32) (uint32, bool) {
	mask := len(a.slots) - 1
	i := int(h) & mask
	for ; a.slots[i].id != 0; i = (i + 1) & mask {
		if s := a.slots[i]; s.is(h) && equalIDs(t.get(s.id-1), ids) {
			return s.id - 1, true
		}
	}
	a.last = i
	return 0, false
}

// add puts stack id, whose hash is h, where the last find (which missed
// it) stopped.
func (a *addSet) add(h uint64, id uint32) { a.slots[a.last] = slotOf(h, id+1) }
