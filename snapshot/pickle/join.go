package pickle

import "runtime"

// Joining a helper's work into the main machine (see helper.go).

// joiner renumbers a helper's values into the main machine's graph.
type joiner struct {
	d, h *decoder
	// strs, frames, stacks and extras map the helper's ids to the main
	// machine's.
	strs, frames, stacks, extras []uint32
	// conts and traces are where the helper's containers and trace
	// records start in the main machine's arrays.
	conts, traces uint32
	// blocks is where the helper's block records start in the main
	// machine's.
	blocks uint32
	// items and spills are where the helper's generic containers' items
	// and spilled items start in the main machine's (see adoptItems).
	items, spills uint32
	// memoAt is the main machine's memo size at the boundary: the index
	// the helper's first region entry (its entry hbase) has; memoEnd is
	// past the helper's last one.
	memoAt, memoEnd, hbase int
	// actions maps each memo index a helper's record names as its action
	// (actionRef) to the string id it has here.
	actions map[uint32]uint32
}

// join takes in helper h's work at the boundary, with the main machine's
// stack in d.stack and its position at h's region start; false leaves the
// main machine to run the region itself.
func (d *decoder) join(h *decoder) bool {
	if d.otherPuts > 0 || d.batchList(h) < 0 {
		// A put of another index than the next may have replaced an
		// entry the helper read in its prefix; and the batches must go
		// to a list.
		return false
	}
	if limit := d.stackLimit(); h.openBatch && len(d.stack)+len(h.openItems) > limit ||
		h.inBatch && !h.openBatch && len(h.residN) > 0 && len(d.stack)+h.residN[0] > limit {
		// One machine would pass the stack's limit in the region, with
		// the batch's items before it and the region's on its stack: the
		// main machine runs the region and reports it there.
		return false
	}
	if h.regionBase >= 0 && h.regionBase != int64(d.memo.len()) {
		// The helper's puts numbered its entries from another index than
		// the one they have here.
		return false
	}
	d.materialize(d.stack) // a pending dict further down: its memo hole is read as a reference
	j := &joiner{d: d, h: h, memoAt: d.memo.len(), hbase: int(h.refFrom)}
	if h.refGap >= int64(j.memoAt-j.hbase) {
		// A placeholder named an entry not made yet when it was read:
		// the main machine reports that error.
		return false
	}
	if !j.tables() {
		return false
	}
	if d.nextHelper == len(d.helpers) {
		d.reserveTyped(h)
	}
	if d.collectBeforeJoin() {
		// The join copies the helper's containers into new chunks: a
		// collection first lets them take the pages of what both
		// machines let go while decoding (grown tables, caches), which
		// with report's slow collector pace nothing else reclaims. On
		// the frame-pool shape the decode's peak went from 166 to 156
		// MiB; marking costs a millisecond, the arrays holding no
		// pointers.
		runtime.GC()
		d.joinGarbage = 0
	}
	j.containers(runtime.GOMAXPROCS(0))
	d.bareLists += h.bareLists
	// The helper's memo entries stay in its memo: they are holes here,
	// read through j (see getMemo). A snapshot has millions, read after
	// the region rarely if at all.
	n := h.memo.len() - j.hbase
	d.memo.padShared(n)
	d.puts += n
	j.memoEnd = j.memoAt + n
	d.joined = append(d.joined, j)
	if h.openBatch {
		// The region ended inside the batch it started in: its items
		// follow the main machine's on the stack, above the batch's MARK.
		if !d.stackMoved && len(d.stack)+len(h.openItems) > stackOffHeapMin {
			d.stack = d.moveStack(d.stack)
		}
		for _, v := range h.openItems {
			d.stack = append(d.stack, j.remap(v))
		}
		d.pos = h.pos
		return true
	}
	if h.inBatch {
		// The batch the region started in ended there with an APPENDS to
		// the list: the items the main machine read before the region
		// come first.
		m := d.lastMark()
		d.marks = d.marks[:len(d.marks)-1]
		if items := d.stack[m:]; len(items) > 0 {
			d.appendItems(d.stack[m-1].ref, items)
		}
		d.stack = d.stack[:m]
	}
	list := d.stack[len(d.stack)-1].ref
	rest := h.resid
	next := h.residRun[0] + j.traces
	for _, n := range h.residN {
		var batch []val
		if h.residRun[1] > 0 {
			// A run of the helper's records: it continues the list's
			// own run, or becomes vals.
			if c := d.g.conts.at(list); c.kind == cTraceList && c.start+c.n == next {
				c.n += uint32(n)
				next += uint32(n)
				continue
			}
			run := container{start: next, n: uint32(n)}
			batch = d.g.traceListItems(&run)
			next += uint32(n)
		} else {
			batch = rest[:n]
			rest = rest[n:]
			for i, v := range batch {
				batch[i] = j.remap(v)
			}
		}
		d.appendItems(list, batch)
	}
	d.pos = h.pos
	return true
}

// batchList is the index in d.stack of the list that helper h's region
// appends its items to, -1 when there is none: on top of the stack after
// a batch, or below the last MARK for a region that starts inside a batch
// (that MARK is then the batch's).
func (d *decoder) batchList(h *decoder) int {
	if h.inBatch {
		if m := d.lastMark(); len(d.marks) > 0 && m >= 1 && d.stack[m-1].k == kList {
			return m - 1
		}
		return -1
	}
	if n := len(d.stack); n > d.lastMark() && d.stack[n-1].k == kList {
		return n - 1
	}
	return -1
}

// tables interns the helper's strings, frames and stacks in the main
// machine's tables (extra strings and frames there are harmless if the
// join fails later); false when the frame table is full or a frame the
// helper read by its memo index in a list it used as a value is none (see
// internStacks).
func (j *joiner) tables() bool {
	d, hg := j.d, j.h.g
	j.strs = make([]uint32, len(hg.strs))
	for i, s := range hg.strs {
		j.strs[i] = d.strID(s)
	}
	j.frames = make([]uint32, hg.frames.len())
	for i := range j.frames {
		f := hg.frames.at(uint32(i))
		id, ok := d.g.frames.intern(rawFrame{file: j.strs[f.file], name: j.strs[f.name], line: f.line})
		if !ok {
			return false
		}
		j.frames[i] = id
	}
	j.extras = make([]uint32, len(hg.extras))
	for i, x := range hg.extras {
		if x.cc != noRef {
			x.cc = j.strs[x.cc]
		}
		if x.um != noRef {
			x.um = j.strs[x.um]
		}
		id, ok := d.g.internExtra(x)
		if !ok {
			return false
		}
		j.extras[i] = id
	}
	if len(j.h.actionRefs) > 0 {
		j.actions = make(map[uint32]uint32, len(j.h.actionRefs))
		for _, idx := range j.h.actionRefs {
			v := j.resolve(val{k: kRef, ref: idx})
			if v.k != kStr {
				// One machine would have left the entries generic dicts.
				return false
			}
			j.actions[idx] = v.ref
		}
	}
	j.stacks = make([]uint32, hg.stacks.len())
	if !j.internStacks(runtime.GOMAXPROCS(0)) {
		return false
	}
	j.conts, j.traces, j.blocks = uint32(d.g.conts.len()), uint32(d.g.traces.len()), uint32(d.g.blocks.len())
	return true
}

// remap renumbers a helper's value. Every placeholder resolves (join checked
// refGap), and kTop never leaves the helper's stack.
func (j *joiner) remap(v val) val {
	switch v.k {
	case kStr, kBytes:
		v.ref = j.strs[v.ref]
	case kFrame:
		v.ref = j.frames[v.ref]
	case kList, kTuple, kDict, kSet:
		v.ref += j.conts
	case kTrace:
		v.ref += j.traces
	case kBlock:
		v.ref += j.blocks
	case kStack:
		// A helper makes a kStack only of frames it read (fastList), so
		// tables mapped it to a stack of the main machine's; a copy
		// here is no longer fresh.
		v.ref, v.i = j.stacks[v.ref], 0
	case kRef:
		return j.resolve(v)
	}
	return v
}

// resolve replaces a placeholder with the memo entry it names: the main
// machine's entry below the boundary, the helper's own above it (which
// may be a placeholder too, for a pickle that memoizes a memo read).
func (j *joiner) resolve(v val) val {
	for v.k == kRef {
		if int(v.ref) < j.memoAt {
			return j.d.entryBelow(v.ref)
		}
		var ok bool
		if v, ok = j.helperEntry(v.ref); !ok {
			return val{}
		}
	}
	return j.remap(v)
}

// entryBelow is the main machine's memo entry idx, below the boundary of
// the helper being joined: its own, or one an earlier helper made.
func (d *decoder) entryBelow(idx uint32) val {
	if v, ok := d.memoVal(*d.memo.at(idx)); ok {
		return v
	}
	if j := d.joinerOf(idx); j != nil {
		v, _ := j.entry(idx)
		return v
	}
	return val{}
}

// joinerOf is the joined helper that made memo entry idx, or nil.
func (d *decoder) joinerOf(idx uint32) *joiner {
	for _, j := range d.joined {
		if int(idx) >= j.memoAt && int(idx) < j.memoEnd {
			return j
		}
	}
	return nil
}

// helperEntry is the helper's memo entry for main-machine index idx, not
// renumbered.
func (j *joiner) helperEntry(idx uint32) (val, bool) {
	local := int(idx) - j.memoAt + j.hbase
	if local < j.hbase || local >= j.h.memo.len() {
		return val{}, false
	}
	return j.h.memoVal(*j.h.memo.at(uint32(local)))
}

// entry is the main machine's memo entry idx, one the helper made.
func (j *joiner) entry(idx uint32) (val, bool) {
	v, ok := j.helperEntry(idx)
	if !ok {
		return val{}, false
	}
	return j.resolve(v), true
}
