package snapshot

import (
	"cmp"
	"slices"
	"sort"
)

// Queries of a timeline's live set at an event: the allocations live then,
// largest first (LiveAt), and their count, bytes and categories
// (LiveStats), for the Timeline and Memory tabs and the report.

// liveSortMax is the live-set size up to which LiveAt sorts the live
// allocations themselves. Above it, it walks every interval in an order by
// size sorted once: sorting a million intervals takes 60 ms, which report
// would spend for one query of a live set of thousands.
const liveSortMax = 1 << 15

// LiveAt returns the allocations live after event i (-1: before the first
// event), largest first; limit 0 means all. A query costs a scan of the
// intervals' bounds and a sort of the live set, or, for a live set over
// liveSortMax, a walk of an order by size sorted once.
func (t *Timeline) LiveAt(i int, limit int) []Allocation {
	t.decMu.Lock()
	defer t.decMu.Unlock()
	t.buildBounds()
	i32 := int32(i)
	sortMax := liveSortMax
	if t.liveSortMax > 0 {
		sortMax = t.liveSortMax
	}
	var live []int32
	n := 0 // live intervals, to size the result
	for j := range t.starts {
		if t.starts[j] <= i32 && i32 < t.ends[j] {
			if n < sortMax {
				live = append(live, int32(j))
			}
			n++
		}
	}
	if n >= decideAllMin {
		t.decideLive(i32)
	}
	over := n > sortMax
	order := live
	selectMax := liveSelectMax
	if t.liveSelectMax > 0 {
		selectMax = t.liveSelectMax
	}
	switch {
	case over && limit > 0 && limit <= selectMax && t.bySize == nil:
		order = t.largestLive(i32, limit)
	case over:
		t.sizeOnce.Do(func() {
			t.bySize = make([]int32, len(t.Intervals))
			for j := range t.bySize {
				t.bySize[j] = int32(j)
			}
			t.sortBySize(t.bySize)
		})
		order = t.bySize
	default:
		t.sortBySize(live)
	}
	if limit > 0 {
		n = min(n, limit)
	}
	// Sized at once: an Allocation is 144 bytes, and a peak of 400k
	// live ones grown by appending was copied again and again (0.4 s of a
	// 3.9 s report), with the old arrays held meanwhile.
	out := make([]Allocation, 0, n)
	for _, j := range order {
		if t.starts[j] > i32 || t.ends[j] <= i32 {
			continue
		}
		iv := &t.Intervals[j]
		d := &t.decs[t.decisionOf(iv)] // Categorized's, decided once per stack
		out = append(out, Allocation{Address: iv.Addr, Size: iv.Size, RequestedSize: iv.Size,
			State: StateActiveAllocated, Frames: t.FramesOf(iv), FramesFromTrace: true, Role: t.Role(int(j)),
			Category: d.Category, CategoryFrame: int32(d.Frame), CategoryKeyword: d.Keyword})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

// liveSelectMax is the largest limit for which LiveAt, over liveSortMax
// and with no order by size made yet, selects the largest live
// allocations in one pass (a heap of limit) instead of sorting every
// interval: a report asks for the ten largest at the peak, and sorting
// 600k intervals for them took 60 ms.
const liveSelectMax = 1024

// largestLive returns the k largest intervals live after event i, in
// sortBySize's order.
func (t *Timeline) largestLive(i int32, k int) []int32 {
	type key struct {
		size int64
		addr uint64
		j    int32
	}
	before := func(x, y key) bool { // x comes first in sortBySize's order
		if x.size != y.size {
			return x.size > y.size
		}
		if x.addr != y.addr {
			return x.addr < y.addr
		}
		return x.j < y.j
	}
	// h is a heap whose root comes last of the k first so far.
	h := make([]key, 0, k)
	for j := range t.starts {
		if t.starts[j] > i || i >= t.ends[j] {
			continue
		}
		iv := &t.Intervals[j]
		x := key{iv.Size, iv.Addr, int32(j)}
		if len(h) < k {
			h = append(h, x)
			for c := len(h) - 1; c > 0; {
				p := (c - 1) / 2
				if !before(h[p], h[c]) {
					break
				}
				h[p], h[c] = h[c], h[p]
				c = p
			}
			continue
		}
		if !before(x, h[0]) {
			continue
		}
		h[0] = x
		for p := 0; ; {
			c := 2*p + 1
			if c >= len(h) {
				break
			}
			if c+1 < len(h) && before(h[c], h[c+1]) {
				c++ // the child that comes last
			}
			if !before(h[p], h[c]) {
				break
			}
			h[p], h[c] = h[c], h[p]
			p = c
		}
	}
	out := make([]int32, len(h))
	for n := range h {
		out[n] = h[n].j
	}
	t.sortBySize(out)
	return out
}

// sortBySize orders intervals (indices into Intervals) largest first, then
// by address and index, so both of LiveAt's orders agree. It sorts copies of
// the keys: comparing through the indices missed the cache on every
// comparison (600k intervals: 150 ms, the keys 3-4 times less).
func (t *Timeline) sortBySize(idx []int32) {
	type key struct {
		size int64
		addr uint64
		j    int32
	}
	keys := make([]key, len(idx))
	for k, j := range idx {
		iv := &t.Intervals[j]
		keys[k] = key{iv.Size, iv.Addr, j}
	}
	slices.SortFunc(keys, func(x, y key) int {
		if x.size != y.size {
			return cmp.Compare(y.size, x.size)
		}
		if x.addr != y.addr {
			return cmp.Compare(x.addr, y.addr)
		}
		return cmp.Compare(x.j, y.j)
	})
	for k := range keys {
		idx[k] = keys[k].j
	}
}

// buildBounds copies the intervals' bounds once, for cache-friendly scans.
func (t *Timeline) buildBounds() {
	t.boundsOnce.Do(func() {
		t.starts = make([]int32, len(t.Intervals))
		t.ends = make([]int32, len(t.Intervals))
		for j := range t.Intervals {
			t.starts[j], t.ends[j] = t.Intervals[j].Start, t.Intervals[j].End
		}
	})
}

// LiveStats counts the allocations live after event i, their bytes and
// their bytes by category (largest first), without building them.
func (t *Timeline) LiveStats(i int) (n int, bytes int64, cats []CategoryTotal) {
	t.decMu.Lock()
	defer t.decMu.Unlock()
	t.buildBounds()
	i32 := int32(i)
	m := &t.stats
	stepMax := liveStepMax
	if t.liveStepMax != 0 {
		stepMax = t.liveStepMax
	}
	if !m.ok || stepMax < 0 || t.changesBetween(m.at, i32) > stepMax {
		t.decideLive(i32)
		*m = liveTotals{ok: true}
		for j := range t.starts {
			if t.starts[j] <= i32 && i32 < t.ends[j] {
				m.add(t, j, 1)
			}
		}
	} else {
		// From the last query's totals: only the intervals that start or
		// end between the two events change (see TotalsFrom).
		lo, hi, sign := m.at, i32, 1
		if lo > hi {
			lo, hi, sign = hi, lo, -1
		}
		byStart, byEnd := t.orders()
		for k := t.firstAfter(byStart, lo, true); k < len(byStart) && t.Intervals[byStart[k]].Start <= hi; k++ {
			m.add(t, int(byStart[k]), sign)
		}
		for k := t.firstAfter(byEnd, lo, false); k < len(byEnd) && t.Intervals[byEnd[k]].End <= hi; k++ {
			m.add(t, int(byEnd[k]), -sign)
		}
	}
	m.at = i32
	for c, b := range m.blocks {
		if b != 0 {
			cats = append(cats, CategoryTotal{Name: t.catNames[c], Bytes: m.bytes[c], Blocks: b})
		}
	}
	slices.SortFunc(cats, func(a, b CategoryTotal) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return m.n, m.total, cats
}

// liveStepMax is the most intervals starting or ending between two
// LiveStats queries for the second to start from the first's totals
// rather than sweep every interval: a cursor move on a peak of 400k live
// allocations was 6 ms of sweep, and a step of a few events reads a few.
const liveStepMax = 1 << 15

// liveTotals are LiveStats' totals after event at: the live allocations'
// count and bytes, and by category (by index in catNames).
type liveTotals struct {
	ok     bool
	at     int32
	n      int
	total  int64
	bytes  []int64
	blocks []int
}

// add counts interval j in (sign 1) or out (-1).
func (m *liveTotals) add(t *Timeline, j int, sign int) {
	iv := &t.Intervals[j]
	c := int(t.decCat[t.decisionOf(iv)])
	if c >= len(m.blocks) {
		m.bytes = append(m.bytes, make([]int64, len(t.catNames)-len(m.bytes))...)
		m.blocks = append(m.blocks, make([]int, len(t.catNames)-len(m.blocks))...)
	}
	m.n += sign
	m.total += int64(sign) * iv.Size
	m.bytes[c] += int64(sign) * iv.Size
	m.blocks[c] += sign
}

// firstAfter is the first place in order (intervals by start, or by end)
// whose interval starts (ends) after event e.
func (t *Timeline) firstAfter(order []int32, e int32, starts bool) int {
	return sort.Search(len(order), func(k int) bool {
		if starts {
			return t.Intervals[order[k]].Start > e
		}
		return t.Intervals[order[k]].End > e
	})
}

// changesBetween counts the intervals that start or end between events a
// and b (in either order).
func (t *Timeline) changesBetween(a, b int32) int {
	if a > b {
		a, b = b, a
	}
	byStart, byEnd := t.orders()
	return t.firstAfter(byStart, b, true) - t.firstAfter(byStart, a, true) +
		t.firstAfter(byEnd, b, false) - t.firstAfter(byEnd, a, false)
}

// decisionOf is the index in decs of the categorizer's decision on iv's
// frames (FramesOf's), made once per stack: a cursor move on the Timeline
// sums the live set by category and lists its largest, and looking each of
// 400k live stacks up in the categorizer's map took 110 ms.
func (t *Timeline) decisionOf(iv *Interval) int32 {
	k := int(iv.Stack)
	if k == 0 { // no frames
		return t.decisionIndex(t.cat.decideOnce(Stack{}))
	}
	if t.stackDecs == nil {
		t.stackDecs = make([]int32, len(t.stacks))
	}
	if d := t.stackDecs[k-1]; d != 0 {
		return d - 1
	}
	d := t.decisionIndex(t.cat.decideOnce(t.stacks[k-1]))
	t.stackDecs[k-1] = d + 1
	return d
}

// decideLive decides the categories of the stacks of the allocations live
// after event i that have none yet, at once on every core when there are
// decideAllMin or more (else decisionOf decides them one by one): the
// peak of a trace of distinct stacks can hold 400k.
func (t *Timeline) decideLive(i int32) {
	if !t.manyUndecided(i) {
		return
	}
	if t.stackDecs == nil {
		t.stackDecs = make([]int32, len(t.stacks))
	}
	var need []uint32 // each stack to decide, by its index in stackDecs
	for j := range t.starts {
		if t.starts[j] > i || t.ends[j] <= i {
			continue
		}
		k := int(t.Intervals[j].Stack)
		if k == 0 {
			continue
		}
		if d := &t.stackDecs[k-1]; *d == 0 {
			*d = -1 // queued: a stack met again is not queued twice
			need = append(need, uint32(k-1))
		}
	}
	if len(need) < decideAllMin {
		for _, x := range need {
			t.stackDecs[x] = 0
		}
		return
	}
	hits := t.cat.decideAll(len(need), func(n int) Stack { return t.stacks[need[n]] })
	for n, h := range hits {
		t.stackDecs[need[n]] = t.hitIndex(h) + 1
	}
}

// decideSample is the share of a live set (one in decideSample) whose
// stacks manyUndecided looks up.
const decideSample = 16

// manyUndecided says whether the allocations live after event i look to
// have decideAllMin undecided stacks or more, from one in decideSample of
// them: once a live set is decided, a cursor move near it finds its stacks
// decided, and looking all of them up again (400k at random) was a fifth
// of the move.
func (t *Timeline) manyUndecided(i int32) bool {
	live, undecided := 0, 0
	for j := range t.starts {
		if t.starts[j] > i || t.ends[j] <= i {
			continue
		}
		if live++; live%decideSample != 0 {
			continue
		}
		if k := int(t.Intervals[j].Stack); k != 0 && (t.stackDecs == nil || t.stackDecs[k-1] == 0) {
			undecided++
		}
	}
	return undecided*decideSample >= decideAllMin
}

// hitIndex is decisionIndex for the decision h stands for, found by h
// (three integers) rather than by the decision's strings.
func (t *Timeline) hitIndex(h stackHit) int32 {
	if k, ok := t.hitIndices[h]; ok {
		return k
	}
	if t.hitIndices == nil {
		t.hitIndices = map[stackHit]int32{}
	}
	k := t.decisionIndex(t.cat.decision(h))
	t.hitIndices[h] = k
	return k
}

// decisionIndex is d's index in decs, added (with its category's index in
// catNames) when new.
func (t *Timeline) decisionIndex(d Decision) int32 {
	if k, ok := t.decIndex[d]; ok {
		return k
	}
	if t.decIndex == nil {
		t.decIndex = map[Decision]int32{}
	}
	k := int32(len(t.decs))
	t.decs = append(t.decs, d)
	t.decIndex[d] = k
	t.decCat = append(t.decCat, t.categoryIndex(d.Category))
	return k
}

// categoryIndex is name's index in catNames, added when new.
func (t *Timeline) categoryIndex(name string) int32 {
	for k, n := range t.catNames {
		if n == name {
			return int32(k)
		}
	}
	t.catNames = append(t.catNames, name)
	return int32(len(t.catNames) - 1)
}
