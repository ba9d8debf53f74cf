package pickle

import (
	"maps"
	"slices"
	"unsafe"

	"memscope/internal/pages"
	"memscope/internal/par"
	"memscope/snapshot/schema"
)

// Copying a helper's containers, items and records into the main
// machine's arrays, renumbered (see join.go).

// containers copies the helper's containers and trace records. Each helper
// container i becomes container j.conts+i. Most are copied renumbered on
// up to cores cores, in runs of whole chunks, a generic one pointing at its
// items where the helper put them (adoptItems); a stack with a placeholder
// that names no frame and a trace entry whose frames resolved to something
// other than a list are rebuilt after, in order, on this goroutine (they
// intern strings and add items).
func (j *joiner) containers(cores int) {
	d, hg := j.d, j.h.g
	odd := j.records(min(cores, hg.traces.len()>>chunkBits))
	j.copyBlocks()
	j.adoptItems(cores)
	n := uint32(hg.conts.len())
	d.g.conts.pad(int(n))
	workers := max(1, min(cores, int(n>>chunkBits)))
	later := make([][]uint32, workers)
	var wg par.Group
	lo := uint32(0)
	for w := range workers {
		hi := n
		if w < workers-1 {
			hi = (n / uint32(workers) * uint32(w+1)) &^ chunkMask
		}
		from := lo
		wg.Go(func() { later[w] = j.copyContainers(from, hi, odd) })
		lo = hi
	}
	wg.Wait()
	var items []val
	for _, is := range later {
		for _, i := range is {
			c := *hg.conts.at(i)
			id := j.conts + i
			if c.kind == cTrace {
				d.g.traces.at(c.start + j.traces).mark(hasGeneric)
				r := *d.g.traces.at(c.start + j.traces)
				*d.g.conts.at(id) = container{vk: kDict}
				d.traceToDict(id, &r, odd[c.start])
				continue
			}
			// Not all frames (see tables): the list of what its
			// placeholders name.
			items = items[:0]
			for _, f := range hg.stacks.get(c.start) {
				items = append(items, stackItem(f))
			}
			*d.g.conts.at(id) = container{vk: c.vk}
			for k, v := range items {
				items[k] = j.remap(v)
			}
			if len(items) > 0 {
				d.extend(id, items)
			}
		}
	}
	// A record the helper made without a container (kTrace) whose frames
	// resolved to no list gets its dict here, in record order, as one
	// machine would have left the entry a generic dict.
	var recs []uint32
	for i := range odd {
		if d.g.traces.at(i+j.traces).has()&hasGeneric == 0 {
			recs = append(recs, i)
		}
	}
	slices.Sort(recs)
	for _, i := range recs {
		r := d.g.traces.at(i + j.traces)
		r.cid = d.g.conts.push(container{vk: kDict})
		r.mark(hasGeneric)
		rr := *r
		d.traceToDict(rr.cid, &rr, odd[i])
	}
	// Copied: the next join's copies go to these chunks.
	d.g.conts.recycle(&hg.conts)
	d.joinGarbage += hg.stacks.indexBytes() // its slabs are the main table's
	hg.stacks = stackTable{}
}

// reserveTyped makes room for the typed traces (see traceArrays) when
// the last helper joins, when every trace record but those after its
// region is known: one per record, and the file is large enough for
// decodeSnapshot to use it. Allocated now, before the join's collection
// frees what the machines let go, it lands in memory the heap never used,
// which Go does not clear and whose pages the bind then faults in as huge
// ones. Allocated after the decode, it started in freed memory in some
// runs and not others, and then Go cleared all of it, faulting in 43 MB
// of small pages: 2 or 23 ms on the 166 MiB frame pool, a bind slower by
// 8 ms, peak RSS the same.
func (d *decoder) reserveTyped(h *decoder) {
	n := d.g.traces.len() + h.g.traces.len()
	if len(d.data) <= GCThreshold || n < typedReserveMin {
		return
	}
	d.g.typed = make([]schema.TraceEntry, n)
	pages.Huge(d.g.typed) // written once, in full, by the bind
}

// typedReserveMin is the fewest records for which reserveTyped reserves:
// below a huge page's worth, where it lands matters little.
const typedReserveMin = pages.HugeSize / int(unsafe.Sizeof(schema.TraceEntry{}))

// joinGCMin is how much of the joined helpers' memory must be garbage
// before the next join collects again.
const joinGCMin = 4 << 20

// collectBeforeJoin says whether a join collects garbage first: for input
// over GCThreshold, at the first join, and at a later one once the helpers
// joined since the last collection let go of joinGCMin bytes (their stack
// tables). Where stacks repeat a helper's table is a few KiB, and eight
// machines' seven joins each collected for nothing (1-2 ms of the serial
// joins each); where they are distinct each table is megabytes, which the
// next join's copies reuse.
func (d *decoder) collectBeforeJoin() bool {
	return len(d.data) > GCThreshold && (len(d.joined) == 0 || d.joinGarbage >= joinGCMin)
}

// copyContainers copies the helper's containers [lo, hi) that need only
// renumbering, and returns the others (see containers).
func (j *joiner) copyContainers(lo, hi uint32, odd map[uint32]val) (later []uint32) {
	d, hg := j.d, j.h.g
	for i := lo; i < hi; i++ {
		c := *hg.conts.at(i)
		switch c.kind {
		case cFrame:
			c.start = j.frames[c.start]
		case cStack:
			if j.stacks[c.start] == noRef {
				later = append(later, i)
				continue
			}
			c.start = j.stacks[c.start]
		case cTraceList:
			c.start += j.traces
		case cTrace:
			if _, ok := odd[c.start]; ok {
				later = append(later, i)
				continue
			}
			c.start += j.traces
		case cGeneric:
			if c.spilled {
				c.start += j.spills
			} else if c.n > 0 {
				c.start += j.items
			}
		}
		*d.g.conts.at(j.conts + i) = c
	}
	return later
}

// adoptItems makes the helper's items (of its generic containers) the
// main machine's: its chunks follow the main machine's last one, and its
// spilled items its spills, renumbered where they lie, on up to cores
// goroutines. Copied one by one, after the other containers (they
// interned nothing, but were rebuilt in order with the few that must be),
// a helper's 150k block dicts were 27 ms of a join on one core, and both
// copies of them were at the decode's peak.
func (j *joiner) adoptItems(cores int) {
	d, hg := j.d, &j.h.g.items
	mi := &d.g.items
	j.items = uint32(len(mi.chunks)) << chunkBits
	j.spills = uint32(len(d.g.spills))
	var chunks [][]val
	n := hg.n // the helper's items, in its chunks from the first
	if n > 0 {
		chunks = hg.chunks[:(n+chunkMask)>>chunkBits]
		mi.chunks = append(mi.chunks, chunks...)
		mi.mapped = append(mi.mapped, hg.mapped[:len(chunks)]...)
		mi.n = j.items + n
	}
	spills := j.h.g.spills
	d.g.spills = append(d.g.spills, spills...)
	d.g.spilled += j.h.g.spilled
	// The helper no longer holds them: its graph is freed, not these.
	*hg = chunked[val]{}
	j.h.g.spills, j.h.g.spilled = nil, 0
	parts := len(chunks) + len(spills)
	workers := max(1, min(cores, parts))
	par.Each(workers, func(w int) {
		for k := w; k < parts; k += workers {
			var s []val
			if k < len(chunks) {
				s = chunks[k][:min(chunkLen, n-uint32(k)<<chunkBits)]
			} else {
				s = spills[k-len(chunks)]
			}
			for i, v := range s {
				s[i] = j.remap(v)
			}
		}
	})
}

// records copies the helper's trace records, renumbered, after the main
// machine's, on up to workers cores for a long run (half of bigtrain's 1.1M
// records took 30 ms on one), and gives the helper's chunks back as it goes. It
// returns the frames values, by helper trace index, that resolved to
// something other than a list: those entries become generic dicts, as one
// machine would have left them.
func (j *joiner) records(workers int) map[uint32]val {
	d, hg := j.d, j.h.g
	n := uint32(hg.traces.len())
	// The new chunks' pages are mapped as the workers write them, while
	// they give the helper's back: populating them all first held both
	// copies at once (bigtrain's peak rose by 19 MiB).
	d.g.traces.padPopulated(int(n), false)
	// Each worker copies whole chunks of the helper's: at least one.
	workers = max(1, min(workers, int(n>>chunkBits)))
	odds := make([]map[uint32]val, workers)
	var wg par.Group
	lo := uint32(0)
	for w := range workers {
		hi := n
		if w < workers-1 {
			hi = (n / uint32(workers) * uint32(w+1)) &^ chunkMask // whole chunks of the helper's: each worker frees its own
		}
		from := lo
		wg.Go(func() { odds[w] = j.copyRecords(from, hi) })
		lo = hi
	}
	wg.Wait()
	hg.traces.free()
	var odd map[uint32]val
	for _, o := range odds {
		if len(o) > 0 && odd == nil {
			odd = map[uint32]val{}
		}
		maps.Copy(odd, o)
	}
	return odd
}

// copyBlocks copies the helper's block records, renumbered, after the main
// machine's (a helper whose region is a segment's blocks makes them).
func (j *joiner) copyBlocks() {
	d, hg := j.d, j.h.g
	for i := range uint32(hg.blocks.len()) {
		r := d.g.blocks.at(d.g.blocks.push(*hg.blocks.at(i)))
		r.stateStr = j.strs[r.stateStr]
		if r.cid != noRef {
			r.cid += j.conts
		}
		switch r.fk {
		case kStack:
			r.fram = j.stacks[r.fram]
		case kList, kTuple:
			r.fram += j.conts
		}
	}
	for i, k := range hg.blockKeys {
		if hg.blockKeysMet&(1<<i) != 0 {
			d.g.blockKeys[i] = j.strs[k]
			d.g.blockKeysMet |= 1 << i
		}
	}
	hg.blocks.free()
}

// copyRecords copies the helper's records [lo, hi) (see records).
func (j *joiner) copyRecords(lo, hi uint32) map[uint32]val {
	d, hg := j.d, j.h.g
	var odd map[uint32]val
	// The helper's chunks copied are moved under the records still to
	// write: only the first chunk's copies take fresh pages.
	var sup pages.Supply
	defer sup.Release()
	for i := lo; i < hi; i++ {
		if i&chunkMask == 0 || i == lo {
			j.coverRecords(&sup, i, min(hi, (i|chunkMask)+1))
		}
		// Copied, then changed in place: a record of seven fields in a
		// local goes through the stack, one more copy a record.
		r := d.g.traces.at(j.traces + i)
		*r = *hg.traces.at(i)
		if r.action&actionRef != 0 {
			r.action = j.actions[r.action&^actionRef]
		} else {
			r.action = j.strs[r.action]
		}
		if x := r.extra(); x != 0 {
			r.setExtra(j.extras[x-1])
		}
		if r.cid != noRef {
			r.cid += j.conts
		}
		switch {
		case r.has()&hasFramesStack != 0:
			r.fram = j.stacks[r.fram]
		case r.has()&hasFramesRef != 0:
			// A frames list the helper could not read: usually one made
			// before its region, shared by entries with the same stack.
			if v := j.resolve(val{k: kRef, ref: r.fram}); v.k == kList {
				r.fram = v.ref
				r.unmark(hasFramesRef)
			} else if v.k == kStack {
				r.fram = v.ref
				r.unmark(hasFramesRef)
				r.mark(hasFramesStack)
			} else {
				if odd == nil {
					odd = map[uint32]val{}
				}
				odd[i] = v
			}
		case r.fram != noRef:
			r.fram += j.conts
		}
		if (i+1)&chunkMask == 0 {
			hg.traces.giveChunk(int(i>>chunkBits), &sup) // copied
		}
	}
	return odd
}

// coverRecords moves pages from sup under the main machine's records that
// the helper's [lo, hi) are copied to (pages.Cover: the copy writes each).
func (j *joiner) coverRecords(sup *pages.Supply, lo, hi uint32) {
	t := &j.d.g.traces
	for at, end := j.traces+lo, j.traces+hi; at < end; {
		k := at >> chunkBits
		n := min(end-at, chunkLen-at&chunkMask)
		pages.Cover(sup, t.chunks[k][at&chunkMask:at&chunkMask+n])
		at += n
	}
}
