package snapshot

import (
	"fmt"
	"runtime"
	"sort"

	"memscope/internal/par"
	"memscope/internal/units"
)

// The timeline's series: active and reserved memory after each event,
// summed on every core, and the peak found from them.

// prefixPerWorker is the fewest events worth a goroutine of their own when
// summing the series.
const prefixPerWorker = 1 << 17

// prefixPeak turns delta, each event's change, into the levels after each
// event from base, in place, and returns the last level and the peak: the
// highest level above base and its first event (base and -1 when none is
// above it). Long series are summed in parts on up to procs goroutines:
// each part's total, then each part's levels from the totals before it.
func prefixPeak(delta []int64, base int64, procs int) (end, best int64, at int) {
	parts := max(1, min(procs, len(delta)/prefixPerWorker))
	bound := func(p int) int { return p * len(delta) / parts }
	sums := make([]int64, parts)
	if parts > 1 {
		par.Each(parts, func(p int) {
			for _, d := range delta[bound(p):bound(p+1)] {
				sums[p] += d
			}
		})
	}
	starts := make([]int64, parts) // the level before each part
	level := base
	for p := range parts {
		starts[p] = level
		level += sums[p]
	}
	bests, ats := make([]int64, parts), make([]int, parts)
	run := func(p int) {
		level, best, at := starts[p], base, -1
		for i := bound(p); i < bound(p+1); i++ {
			level += delta[i]
			delta[i] = level
			if level > best {
				best, at = level, i
			}
		}
		bests[p], ats[p] = best, at
	}
	par.Each(parts, run)
	best, at = base, -1
	for p := range parts { // the first part reaching the highest level
		if bests[p] > best {
			best, at = bests[p], ats[p]
		}
	}
	if len(delta) > 0 {
		end = delta[len(delta)-1]
	} else {
		end = base
	}
	return end, best, at
}

// countPerWorker is the fewest events worth a goroutine of their own when
// counting.
const countPerWorker = 1 << 17

// countActions counts the allocs and the free_completeds of events, on up
// to procs goroutines: the pass reads every entry (53 MB for a million),
// 7 ms on one core.
func countActions(events []TraceEntry, procs int) (allocs, frees int) {
	workers := min(procs, max(1, len(events)/countPerWorker))
	a, f := make([]int, workers), make([]int, workers)
	count := func(w int) {
		for i := w * len(events) / workers; i < (w+1)*len(events)/workers; i++ {
			switch events[i].Action() {
			case ActionAlloc:
				a[w]++
			case ActionFreeCompleted:
				f[w]++
			}
		}
	}
	par.Each(workers, count)
	for w := range workers {
		allocs, frees = allocs+a[w], frees+f[w]
	}
	return allocs, frees
}

func (t *Timeline) fillSeries(netReserved, snapshotReserved int64, openAreBlocks bool) {
	n := len(t.Events)
	// Active holds each event's change first, then (summed) the levels.
	delta := t.Active
	pre := 0
	var openAtEnd int64 // allocations made in the window and alive at the end
	for _, iv := range t.Intervals {
		if iv.Start < 0 {
			t.BaseActive += iv.Size
			pre++
		} else {
			delta[iv.Start] += iv.Size
		}
		if int(iv.End) < n {
			delta[iv.End] -= iv.Size
		} else if !iv.PreWindow() {
			openAtEnd += iv.Size
		}
	}
	t.EndActive, t.peakLevel, t.peakAt = prefixPeak(delta, t.BaseActive, runtime.GOMAXPROCS(0)/2)
	t.BaseReserved = snapshotReserved - netReserved
	// The replay noted each segment event's change (a pass over the
	// events fewer: bigtrain's are 53 MB); the levels follow from the base.
	r := t.BaseReserved
	for k := range t.reserved {
		r += t.reserved[k].level
		t.reserved[k].level = r
	}
	switch {
	case pre == 0 && openAreBlocks && openAtEnd == t.SnapshotActive:
		t.Complete = true
		t.Note = fmt.Sprintf("exact: the trace covers the whole run and ends at the snapshot's %s active", units.Bytes(t.SnapshotActive))
	case !openAreBlocks:
		t.Note = fmt.Sprintf("allocations the trace leaves open are not in the snapshot's blocks (memory changed after recording stopped); they stay live to the end, as in memory_viz, and the trace ends with %s active where the snapshot's blocks hold %s",
			units.Bytes(t.EndActive), units.Bytes(t.SnapshotActive))
	default:
		t.Note = fmt.Sprintf("partial: the trace starts mid-run (%d allocations made before it, %s live when it starts)",
			pre, units.Bytes(t.BaseActive))
	}
	if t.BaseReserved < 0 {
		t.Note += "; reserved memory from segment events does not match the segments"
	}
	if !t.ReservedFromTrace {
		t.Note += "; the trace has no segment events, so reserved memory is shown flat"
	}
}

// findPeakLevel finds the peak's event and its active and reserved memory;
// the allocations live there (Peak.Live) are read once the roles are.
func (t *Timeline) findPeakLevel() {
	best, at := t.peakLevel, t.peakAt // found by fillSeries' sums
	t.Peak = Peak{Active: best, EventIndex: at, Reserved: t.BaseReserved}
	if at >= 0 {
		t.Peak.TimeUS = t.Events[at].TimeUS
		t.Peak.Reserved = t.ReservedAt(at)
	} else if len(t.Events) > 0 {
		t.Peak.TimeUS = t.Events[0].TimeUS
	}
	if t.Peak.Reserved > 0 {
		t.Peak.EfficiencyPct = 100 * float64(best) / float64(t.Peak.Reserved)
	}
}

// PeakWhen says when a peak reached after event i was: "at trace entry
// i", or "before the first trace entry" for the level the trace started at
// (i = -1).
func PeakWhen(i int) string {
	if i < 0 {
		return "before the first trace entry"
	}
	return fmt.Sprintf("at trace entry %d", i)
}

// ActiveAt is the active memory after event i (-1: before the first event).
func (t *Timeline) ActiveAt(i int) int64 {
	if i < 0 || len(t.Active) == 0 {
		return t.BaseActive
	}
	return t.Active[min(i, len(t.Active)-1)]
}

// ReservedAt is the reserved memory after event i (-1: before the first
// event).
func (t *Timeline) ReservedAt(i int) int64 {
	// The last step at or before i.
	k := sort.Search(len(t.reserved), func(k int) bool { return int(t.reserved[k].at) > i })
	if k == 0 {
		return t.BaseReserved
	}
	return t.reserved[k-1].level
}

// ReservedRange returns the reserved memory after each of events
// [from, to), in one pass over the steps.
func (t *Timeline) ReservedRange(from, to int) []int64 {
	if to <= from {
		return nil
	}
	out := make([]int64, to-from)
	k := sort.Search(len(t.reserved), func(k int) bool { return int(t.reserved[k].at) > from })
	level := t.BaseReserved
	if k > 0 {
		level = t.reserved[k-1].level
	}
	for i := range out {
		for k < len(t.reserved) && int(t.reserved[k].at) <= from+i {
			level = t.reserved[k].level
			k++
		}
		out[i] = level
	}
	return out
}

// reservedStep is the reserved memory after event at, until the next step.
type reservedStep struct {
	at    int32
	level int64
}
