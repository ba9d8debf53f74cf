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
	return t.liveBySiteBy(ev, livePerWorker, liveDenseCells)
}

// liveDenseCells bounds a worker's table of sites by boundaries (8 bytes a
// cell: 1 MiB) in liveBySiteBy's one pass for few sites.
const liveDenseCells = 1 << 17

// livePerWorker is the fewest intervals liveBySite gives a goroutine of its
// own: the check ran on one core while the other, done with the blocks,
// waited (10-20 ms of a report of 900k entries).
const livePerWorker = 1 << 17

// liveBySiteBy is liveBySite with perWorker intervals at least per
// goroutine, and tables of at most denseCells (see liveDense).
//
// A site's live bytes change at a boundary by what the intervals starting
// and ending there (in samples) add and take away, and siteLive needs
// only each boundary's whole change, in any order. So the intervals live
// at a boundary are placed by site (counted, then placed: 16 bytes each),
// and each site's changes are summed in one array of the k boundaries,
// which stays in cache. An array per site (sites times k) was hundreds of
// MB for a trace over 70,000 frames; arrays for the sites met first, the
// others' changes kept aside, were still 35 MB on w4 (tens of thousands
// of sites), and their scattered adds a third of its report's analysis.
func (t *Timeline) liveBySiteBy(ev []int, perWorker, denseCells int) []siteLiveOf {
	k := len(ev)
	// sample(e) is the number of samples before event e (sort.SearchInts
	// of ev), read from a table when the samples are in order: two binary
	// searches per interval were half the check (bigtrain: 366k intervals).
	sample := func(e int32) int { return sort.SearchInts(ev, int(e)) }
	n := len(t.Intervals)
	workers := min(runtime.GOMAXPROCS(0), max(1, n/perWorker))
	if slices.IsSorted(ev) {
		events := len(t.Events)
		before := make([]int32, events+2) // before[e+1], for e in [-1, events]
		par.Each(workers, func(w int) {
			lo, hi := -1+w*(events+2)/workers, -1+(w+1)*(events+2)/workers
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
	if k > 0 && len(t.siteName) <= denseCells/k {
		if out, ok := t.liveDense(k, sample, workers, denseCells); ok {
			return out
		}
	}
	// The workers count their intervals live at a boundary by site: a
	// site number, or the worker's number for a name (see siteNumber).
	// Placing them reads each interval's site again, as an array of them
	// would be 4 bytes an interval at the analysis' peak.
	type worker struct {
		sn     *siteNames       // not safe for concurrent use: one each
		local  map[string]int32 // the worker's numbers of its names
		names  []string         // its names, by its numbers
		counts []int32          // by site number
		named  []int32          // by its numbers of names
	}
	ws := make([]worker, workers)
	par.Each(workers, func(w int) {
		wk := &ws[w]
		wk.sn, wk.local, wk.counts = newSiteNames(), map[string]int32{}, make([]int32, len(t.siteName))
		for j := w * n / workers; j < (w+1)*n/workers; j++ {
			iv := &t.Intervals[j]
			if sample(iv.Start) >= sample(iv.End) {
				continue
			}
			id, name := t.siteNumber(iv, wk.sn)
			if id >= 0 {
				wk.counts[id]++
				continue
			}
			m, ok := wk.local[name]
			if !ok {
				m = int32(len(wk.names))
				wk.local[name] = m
				wk.names = append(wk.names, name)
				wk.named = append(wk.named, 0)
			}
			wk.named[m]++
		}
	})
	// Sites by number, then names in the order the workers met them.
	sites := slices.Clone(t.siteName)
	byName := map[string]int32{}
	renumber := make([][]int32, workers) // a worker's names' site numbers
	for w := range workers {
		for _, name := range ws[w].names {
			m, ok := byName[name]
			if !ok {
				m = int32(len(sites))
				byName[name] = m
				sites = append(sites, name)
			}
			renumber[w] = append(renumber[w], m)
		}
	}
	counts := make([][]int32, workers) // by worker and site
	for w := range workers {
		wk := &ws[w]
		counts[w] = append(wk.counts, make([]int32, len(sites)-len(wk.counts))...)
		for m, c := range wk.named {
			counts[w][renumber[w][m]] += c
		}
	}
	from := make([]int, len(sites)+1) // a site's spans: from[s] to from[s+1]
	next := make([][]int, workers)
	for w := range next {
		next[w] = make([]int, len(sites))
	}
	for s := range sites {
		at := from[s]
		for w := range workers {
			next[w][s] = at
			at += int(counts[w][s])
		}
		from[s+1] = at
	}
	counts = nil
	// Placed: a worker's spans of a site follow the earlier workers'.
	bySite := make([]liveSpan, from[len(sites)])
	par.Each(workers, func(w int) {
		at, wk := next[w], &ws[w]
		for j := w * n / workers; j < (w+1)*n/workers; j++ {
			iv := &t.Intervals[j]
			lo, hi := sample(iv.Start), sample(iv.End)
			if lo >= hi {
				continue
			}
			s, name := t.siteNumber(iv, wk.sn)
			if s < 0 {
				s = renumber[w][wk.local[name]]
			}
			bySite[at[s]] = liveSpan{int32(lo), int32(hi), iv.Size}
			at[s]++
		}
	})
	ws, next = nil, nil
	// Each worker sums a run of sites with about as many spans as the
	// others' (the sites past the last span have none).
	live := make([]siteLive, len(sites))
	total := len(bySite)
	par.Each(workers, func(w int) {
		lo, _ := slices.BinarySearch(from, w*total/workers)
		hi, _ := slices.BinarySearch(from, (w+1)*total/workers)
		// A boundary's sum is read at its first change and cleared, so
		// its other changes read zero.
		sum := make([]int64, k)
		for s := lo; s < hi; s++ {
			mine := bySite[from[s]:from[s+1]]
			for _, sp := range mine {
				sum[sp.lo] += sp.size
				if int(sp.hi) < k {
					sum[sp.hi] -= sp.size
				}
			}
			l := &live[s]
			for _, sp := range mine {
				l.add(int(sp.lo), sum[sp.lo])
				sum[sp.lo] = 0
				if int(sp.hi) < k {
					l.add(int(sp.hi), sum[sp.hi])
					sum[sp.hi] = 0
				}
			}
		}
	})
	var out []siteLiveOf
	for s, name := range sites {
		if from[s] < from[s+1] {
			out = append(out, siteLiveOf{name, live[s]})
		}
	}
	return out
}

// liveDense is liveBySiteBy in one pass, each worker adding into a table
// of a row of k boundaries per site (its names' rows after the numbered
// sites'), then the tables added up: for a trace of few sites (a frame
// pool of 500 frames) that was 4 ms less than placing 450k intervals by
// site. False when a worker's table would pass cells.
func (t *Timeline) liveDense(k int, sample func(int32) int, workers, cells int) ([]siteLiveOf, bool) {
	n := len(t.Intervals)
	type part struct {
		rows  []int64  // a site's at row*k
		seen  []bool   // by row: a site live at a boundary (its row may sum to zeros)
		names []string // the worker's names, rows from len(t.siteName) on
		ok    bool
	}
	parts := make([]part, workers)
	par.Each(workers, func(w int) {
		p := part{rows: make([]int64, len(t.siteName)*k), seen: make([]bool, len(t.siteName))}
		sn, local := newSiteNames(), map[string]int32{} // not safe for concurrent use: one each
		for j := w * n / workers; j < (w+1)*n/workers; j++ {
			iv := &t.Intervals[j]
			lo, hi := sample(iv.Start), sample(iv.End)
			if lo >= hi {
				continue
			}
			id, name := t.siteNumber(iv, sn)
			if id < 0 {
				m, ok := local[name]
				if !ok {
					if len(p.rows)+k > cells {
						return // p.ok is false
					}
					m = int32(len(p.seen))
					local[name] = m
					p.names = append(p.names, name)
					p.rows = append(p.rows, make([]int64, k)...)
					p.seen = append(p.seen, false)
				}
				id = m
			}
			row := p.rows[int(id)*k : int(id+1)*k]
			row[lo] += iv.Size
			if hi < k {
				row[hi] -= iv.Size
			}
			p.seen[id] = true
		}
		p.ok = true
		parts[w] = p
	})
	sites := slices.Clone(t.siteName)
	byName := map[string]int{}
	for _, p := range parts {
		if !p.ok {
			return nil, false
		}
		for _, name := range p.names {
			if _, ok := byName[name]; !ok {
				byName[name] = len(sites)
				sites = append(sites, name)
			}
		}
	}
	rows, seen := make([]int64, len(sites)*k), make([]bool, len(sites))
	for _, p := range parts {
		for r, was := range p.seen {
			if !was {
				continue
			}
			s := r
			if r >= len(t.siteName) {
				s = byName[p.names[r-len(t.siteName)]]
			}
			seen[s] = true
			to := rows[s*k : (s+1)*k]
			for i, d := range p.rows[r*k : (r+1)*k] {
				to[i] += d
			}
		}
	}
	var out []siteLiveOf
	for s, name := range sites {
		if !seen[s] {
			continue
		}
		var l siteLive
		for i, d := range rows[s*k : (s+1)*k] {
			l.add(i, d)
		}
		out = append(out, siteLiveOf{name, l})
	}
	return out, true
}

// liveSpan is an interval's samples, [lo, hi), and its bytes.
type liveSpan struct {
	lo, hi int32
	size   int64
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
