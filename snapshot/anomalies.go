package snapshot

import (
	"cmp"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"sort"

	"memscope/internal/par"
)

// Steps are the moments, one per training step, at which the leak check
// compares live memory: the start of each ProfilerStep#N, or else of each
// occurrence of the most frequent top-level stage (an iteration runs its
// optimizer step once). Name says which stage marks them.
type Steps struct {
	Name   string
	Events []int // the event before each step's start (-1: before the trace)
}

// Thresholds of the anomaly checks.
const (
	// leakMinSteps is the fewest step boundaries a leak needs: growth over
	// one step is what the first step's optimizer state looks like.
	leakMinSteps = 3
	// leakMaxSamples bounds the step boundaries sampled (evenly) so the
	// check stays linear in the trace on runs of thousands of steps.
	leakMaxSamples = 256
	// leakTop is how many suspects are kept.
	leakTop = 10
	// pendingLongUS is how long a free may wait on another stream before it
	// counts as long; pendingLongEvents the same in events, for traces
	// without timestamps.
	pendingLongUS     = 1000
	pendingLongEvents = 64
	pendingTopSites   = 5
)

var profilerStep = regexp.MustCompile(`^ProfilerStep#\d+$`)

// StepsOf picks the step boundaries from the stages (see Steps); ok is
// false when no stage repeats often enough to mark steps.
func StepsOf(stages []Stage) (Steps, bool) {
	var ps []int
	count := map[string]int{}
	for i, s := range stages {
		if profilerStep.MatchString(s.Name) {
			ps = append(ps, i)
		}
		if s.Depth == 0 && !s.OpenStart {
			count[s.Name]++
		}
	}
	name := "ProfilerStep#N"
	if len(ps) < leakMinSteps {
		ps, name = nil, ""
		best := 0
		for n, c := range count {
			if c > best || (c == best && n < name) {
				best, name = c, n
			}
		}
		if best < leakMinSteps {
			return Steps{}, false
		}
		for i, s := range stages {
			if s.Name == name && s.Depth == 0 && !s.OpenStart {
				ps = append(ps, i)
			}
		}
	}
	st := Steps{Name: name}
	for _, i := range ps {
		st.Events = append(st.Events, stages[i].First-1)
	}
	return st, true
}

// LeakSuspect is a call site whose live memory, sampled at each step's
// start, never fell and grew in most steps.
type LeakSuspect struct {
	Site string
	// First and Last are its live bytes at the first and last step sampled;
	// Grew counts the steps in which it grew, of Steps.
	First, Last int64
	Grew, Steps int
}

// Growth is the bytes the site gained over the steps sampled.
func (l *LeakSuspect) Growth() int64 { return l.Last - l.First }

// LeakSuspects samples each call site's live bytes at the step boundaries
// and keeps those that never shrank and grew in more than half the steps,
// largest growth first.
func (t *Timeline) LeakSuspects(steps Steps) []LeakSuspect {
	ev := steps.Events
	if len(ev) < leakMinSteps {
		return nil
	}
	if len(ev) > leakMaxSamples {
		sub := make([]int, leakMaxSamples)
		for i := range sub {
			sub[i] = ev[i*(len(ev)-1)/(leakMaxSamples-1)]
		}
		ev = sub
	}
	k := len(ev)
	var out []LeakSuspect
	for _, l := range t.liveBySite(ev) {
		if !l.Shrank && 2*l.Grew > k-1 {
			out = append(out, LeakSuspect{Site: l.Site, First: l.First, Last: l.Last, Grew: l.Grew, Steps: k - 1})
		}
	}
	slices.SortFunc(out, func(a, b LeakSuspect) int {
		if c := cmp.Compare(b.Growth(), a.Growth()); c != 0 {
			return c
		}
		return cmp.Compare(a.Site, b.Site)
	})
	if len(out) > leakTop {
		out = out[:leakTop]
	}
	return out
}

// PendingFrees describes frees that waited on another stream: a
// free_requested whose free_completed came later (record_stream), during
// which memory_viz, like the allocator, still counts the block as active.
type PendingFrees struct {
	// Deferred counts every such free; Long those that waited at least
	// pendingLongUS (pendingLongEvents events when the trace has no times),
	// LongBytes their bytes.
	Deferred, Long int
	LongBytes      int64
	// ByTime is set when waits are in microseconds, else in events.
	ByTime bool
	// MaxWait and MedianWait are the longest and median wait of the long
	// ones; MaxSite and MaxSize the call site and size of the longest.
	MaxWait, MedianWait int64
	MaxSite             string
	MaxSize             int64
	// AtPeak is the bytes requested freed but not yet freed at the peak:
	// active only because another stream still held them.
	AtPeak int64
	// StillPending counts frees requested but never completed in the trace.
	StillPending int
	Top          []SiteBytes
}

// PendingFrees finds the frees that waited on another stream.
func (t *Timeline) PendingFrees() PendingFrees {
	n := len(t.Events)
	p := PendingFrees{ByTime: n > 0 && t.Events[0].TimeUS != 0 && t.Events[n-1].TimeUS != 0}
	names := newSiteNames()
	tally := newSiteTally(t, names)
	var waits []int64
	peak := int32(t.Peak.EventIndex)
	for j := range t.Intervals {
		iv := &t.Intervals[j]
		if iv.FreeRequested < 0 || iv.FreeRequested >= iv.End {
			continue
		}
		if iv.FreeRequested <= peak && peak < iv.End {
			p.AtPeak += iv.Size
		}
		if int(iv.End) >= n {
			p.StillPending++
			continue
		}
		p.Deferred++
		wait := int64(iv.End - iv.FreeRequested)
		long := wait >= pendingLongEvents
		if p.ByTime {
			wait = t.Events[iv.End].TimeUS - t.Events[iv.FreeRequested].TimeUS
			long = wait >= pendingLongUS
		}
		if !long {
			continue
		}
		p.Long++
		p.LongBytes += iv.Size
		waits = append(waits, wait)
		name := t.siteOf(iv, names)
		if wait > p.MaxWait || (wait == p.MaxWait && iv.Size > p.MaxSize) {
			p.MaxWait, p.MaxSite, p.MaxSize = wait, name, iv.Size
		}
		tally.add(iv)
	}
	if len(waits) > 0 {
		slices.Sort(waits)
		p.MedianWait = waits[len(waits)/2]
	}
	p.Top = tally.top(pendingTopSites)
	return p
}

func (p *PendingFrees) longThreshold() int64 {
	if p.ByTime {
		return pendingLongUS
	}
	return pendingLongEvents
}

// waitStr formats a wait: milliseconds (or µs under one) with times, events
// without.
func (p *PendingFrees) waitStr(w int64) string {
	switch {
	case !p.ByTime:
		return fmt.Sprintf("%d events", w)
	case w < 1000:
		return fmt.Sprintf("%d µs", w)
	}
	return fmt.Sprintf("%.1f ms", float64(w)/1000)
}

// WaitString formats a wait of these frees (see MaxWait).
func (p *PendingFrees) WaitString(w int64) string { return p.waitStr(w) }

// siteLive is what the leak check reads of a site's live bytes at the k
// step boundaries it samples (live[0..k-1]).
type siteLive struct {
	First, Last int64 // live[0] and live[k-1]
	Grew        int   // the i >= 1 where live[i] > live[i-1]
	Shrank      bool  // whether live[i] < live[i-1] for some i >= 1
}

// siteLiveOf is a site's siteLive.
type siteLiveOf struct {
	Site string
	siteLive
}

// liveBySite is each call site's live bytes at the events ev (an interval
// is live at e when Start <= e < End), as siteLive, for the sites live at
// one of them at least, each once. A slice, not a map by site: its one
// reader goes through it once, and a map of w4's tens of thousands of
// sites allocated 8 MB.
func (t *Timeline) liveBySite(ev []int) []siteLiveOf {
	return t.liveBySiteBy(ev, livePerWorker, liveArrayCells)
}

// livePerWorker is the fewest intervals liveBySite gives a goroutine of its
// own: the check ran on one core while the other, done with the blocks,
// waited (10-20 ms of a report of 900k entries).
const livePerWorker = 1 << 17

// liveArrayCells bounds the boundaries of the arrays a worker of liveBySite
// gives sites (8 bytes each): 8 MiB.
const liveArrayCells = 1 << 20

// liveBySiteBy is liveBySite with perWorker intervals at least per
// goroutine, each of which gives sites arrays of cells boundaries in all.
//
// A site's live bytes change at a boundary by what the intervals starting
// and ending there (in samples) add and take away: an interval live at a
// boundary is two changes (one when it outlives the last). A site sums
// its changes in an array of the k boundaries, each worker's own, added up
// after; that was sites times k, and a trace over 70,000 frames had tens
// of thousands of sites (240 MB, and half of its report's time, at k =
// 256). So a worker gives arrays to the sites it meets first, within
// cells, and keeps the changes of the others, and of sites that are names
// (see siteNumber), 16 bytes each, summed by site after.
func (t *Timeline) liveBySiteBy(ev []int, perWorker, cells int) []siteLiveOf {
	k := len(ev)
	// sample(e) is the number of samples before event e (sort.SearchInts
	// of ev), read from a table when the samples are in order: two binary
	// searches per interval were half the check (bigtrain: 366k intervals).
	sample := func(e int32) int { return sort.SearchInts(ev, int(e)) }
	workers := min(runtime.GOMAXPROCS(0), max(1, len(t.Intervals)/perWorker))
	if slices.IsSorted(ev) {
		n := len(t.Events)
		before := make([]int32, n+2) // before[e+1], for e in [-1, n]
		par.Each(workers, func(w int) {
			lo, hi := -1+w*(n+2)/workers, -1+(w+1)*(n+2)/workers
			s := sort.SearchInts(ev, lo)
			for e := lo; e < hi; e++ {
				for s < k && ev[s] < e {
					s++
				}
				before[e+1] = int32(s)
			}
		})
		sample = func(e int32) int { return int(before[e+1]) }
	}
	parts := make([]livePart, workers)
	par.Each(workers, func(w int) {
		p := livePart{arrays: make([][]int64, len(t.siteName))}
		names, local := newSiteNames(), map[string]int32{} // not safe for concurrent use: one each
		left := cells
		for j := w * len(t.Intervals) / workers; j < (w+1)*len(t.Intervals)/workers; j++ {
			iv := &t.Intervals[j]
			lo, hi := sample(iv.Start), sample(iv.End)
			if lo >= hi {
				continue
			}
			id, name := t.siteNumber(iv, names)
			if id >= 0 {
				a := p.arrays[id]
				if a == nil && left >= k {
					a = make([]int64, k)
					p.arrays[id] = a
					left -= k
				}
				if a != nil {
					a[lo] += iv.Size
					if hi < k {
						a[hi] -= iv.Size
					}
					continue
				}
			} else {
				n, ok := local[name]
				if !ok {
					n = int32(len(p.names))
					local[name] = n
					p.names = append(p.names, name)
				}
				id = -2 - n
			}
			p.keep(change{id, int32(lo), iv.Size})
			if hi < k {
				p.keep(change{id, int32(hi), -iv.Size})
			}
		}
		parts[w] = p
	})
	// Sites by number, then names: the arrays added up, and the changes
	// kept, sorted by site (counted, then placed).
	sites := slices.Clone(t.siteName)
	byName := map[string]int32{}
	renumber := make([][]int32, workers) // a worker's names' site numbers
	for w, p := range parts {
		for _, name := range p.names {
			n, ok := byName[name]
			if !ok {
				n = int32(len(sites))
				byName[name] = n
				sites = append(sites, name)
			}
			renumber[w] = append(renumber[w], n)
		}
	}
	arrays := make([][]int64, len(sites))
	from := make([]int, len(sites)+1) // a site's changes: from[s] to from[s+1]
	for w, p := range parts {
		for s, a := range p.arrays {
			if a != nil {
				arrays[s] = addInto(arrays[s], a)
			}
		}
		for _, b := range p.changes {
			for i, c := range b {
				if c.site < 0 {
					c.site = renumber[w][-2-c.site]
					b[i].site = c.site
				}
				from[c.site+1]++
			}
		}
	}
	for s := range sites {
		from[s+1] += from[s]
	}
	at, by := make([]int32, from[len(sites)]), make([]int64, from[len(sites)])
	next := slices.Clone(from[:len(sites)])
	for _, p := range parts {
		for _, b := range p.changes {
			for _, c := range b {
				at[next[c.site]], by[next[c.site]] = c.at, c.by
				next[c.site]++
			}
		}
	}
	parts = nil // the changes, placed
	live := make([]siteLive, len(sites))
	par.Each(workers, func(w int) {
		sum := make([]int64, k)
		for s := w * len(sites) / workers; s < (w+1)*len(sites)/workers; s++ {
			if a := arrays[s]; a != nil {
				for c := from[s]; c < from[s+1]; c++ {
					a[at[c]] += by[c]
				}
				for i, d := range a {
					live[s].add(i, d)
				}
				continue
			}
			// A boundary's sum is read at its first change and
			// cleared, so its other changes read zero.
			for c := from[s]; c < from[s+1]; c++ {
				sum[at[c]] += by[c]
			}
			for c := from[s]; c < from[s+1]; c++ {
				i := at[c]
				live[s].add(int(i), sum[i])
				sum[i] = 0
			}
		}
	})
	var out []siteLiveOf
	for s, name := range sites {
		if arrays[s] != nil || from[s] < from[s+1] {
			out = append(out, siteLiveOf{name, live[s]})
		}
	}
	return out
}

// change is one that liveBySiteBy keeps: its site (a site number, or -2
// less a worker's number for a name), its boundary and its bytes.
type change struct {
	site, at int32
	by       int64
}

// livePart is a worker's share of liveBySiteBy.
type livePart struct {
	arrays  [][]int64  // by site number
	changes [][]change // in blocks of changeBlock: no copies as they grow
	names   []string   // the worker's names, by its numbers for them
}

// changeBlock is how many changes a block of livePart holds (256 KiB).
const changeBlock = 1 << 14

// keep adds c to the changes.
func (p *livePart) keep(c change) {
	if n := len(p.changes); n == 0 || len(p.changes[n-1]) == changeBlock {
		p.changes = append(p.changes, make([]change, 0, changeBlock))
	}
	b := &p.changes[len(p.changes)-1]
	*b = append(*b, c)
}

// add takes in the change d of a site's live bytes at boundary i (all of
// the change there: live[i] - live[i-1], or live[0]).
func (l *siteLive) add(i int, d int64) {
	l.Last += d
	switch {
	case i == 0:
		l.First += d
	case d > 0:
		l.Grew++
	case d < 0:
		l.Shrank = true
	}
}

// addInto adds d into sum, element by element, and returns sum (d itself
// when sum is nil).
func addInto(sum, d []int64) []int64 {
	if sum == nil {
		return d
	}
	for i := range d {
		sum[i] += d[i]
	}
	return sum
}
