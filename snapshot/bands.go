package snapshot

import (
	"cmp"
	"slices"
	"sort"
)

// Other is the band of everything outside the named bands.
const Other = "other"

// Bands splits a timeline's active memory into bands (categories or call
// sites) for a stacked chart. Names are ordered by bytes live at the peak,
// largest first (the bottom of the stack).
type Bands struct {
	Names []string
	// of maps each interval to its band; byStart and byEnd order the
	// intervals by their bounds for the sweep of Totals.
	of             []uint16
	byStart, byEnd []int32
}

// BandBy is what the bands of a stacked chart group by.
type BandBy uint8

// Band groupings.
const (
	BandCategory BandBy = iota // keyword category (which kind of layer)
	BandRole                   // role (what the memory is: parameter, gradient, …)
	BandSite                   // call site (the user's line)
)

// Bands groups the intervals by category, role or call site, keeping at
// most k named bands: the k-1 largest at the peak and Other.
func (t *Timeline) Bands(by BandBy, k int) *Bands {
	k = max(k, 2)
	// Sites by stack and frame: a million intervals share a few thousand
	// stacks (siteNames).
	names := newSiteNames()
	// A category per distinct stack, in arrays of this call's own: the
	// categorizer is shared (and locked), the timeline's decisions are the
	// UI goroutine's, and Bands may run beside both (an export).
	cats := make([]string, len(t.stacks))
	category := func(iv *Interval) string {
		k := int(iv.Stack)
		if k == 0 {
			return t.cat.Category(Stack{})
		}
		if cats[k-1] == "" {
			cats[k-1] = t.cat.Category(t.stacks[k-1])
		}
		return cats[k-1]
	}
	key := func(i int, iv *Interval) string {
		switch by {
		case BandSite:
			if l := t.siteOf(iv, names); l != noStack {
				return l
			}
			return NoFrames
		case BandRole:
			return t.Role(i).String()
		}
		return category(iv)
	}
	keys := make([]string, len(t.Intervals))
	atPeak, total := map[string]int64{}, map[string]int64{}
	p := int32(t.Peak.EventIndex)
	for i := range t.Intervals {
		iv := &t.Intervals[i]
		keys[i] = key(i, iv)
		total[keys[i]] += iv.Size
		if iv.Start <= p && iv.End > p {
			atPeak[keys[i]] += iv.Size
		}
	}
	order := make([]string, 0, len(total))
	for n := range total {
		order = append(order, n)
	}
	slices.SortFunc(order, func(a, b string) int {
		if c := cmp.Compare(atPeak[b], atPeak[a]); c != 0 {
			return c
		}
		if c := cmp.Compare(total[b], total[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if len(order) > k {
		order = append(order[:k-1], Other)
	}
	index := map[string]uint16{}
	for i, n := range order {
		index[n] = uint16(i)
	}
	b := &Bands{Names: order, of: make([]uint16, len(t.Intervals))}
	for i := range keys {
		j, ok := index[keys[i]]
		if !ok {
			j = index[Other]
		}
		b.of[i] = j
	}
	b.byStart, b.byEnd = t.orders()
	return b
}

// orders is the intervals ordered by start and by end event, built once.
func (t *Timeline) orders() (byStart, byEnd []int32) {
	t.ordersOnce.Do(func() {
		t.startOrder = make([]int32, len(t.Intervals))
		t.endOrder = make([]int32, len(t.Intervals))
		for i := range t.startOrder {
			t.startOrder[i], t.endOrder[i] = int32(i), int32(i)
		}
		slices.SortFunc(t.startOrder, func(x, y int32) int { return cmp.Compare(t.Intervals[x].Start, t.Intervals[y].Start) })
		slices.SortFunc(t.endOrder, func(x, y int32) int { return cmp.Compare(t.Intervals[x].End, t.Intervals[y].End) })
	})
	return t.startOrder, t.endOrder
}

// Totals returns, for each event of events (ascending; -1 is before the
// first), the bytes of each band live right after it: one sweep over the
// intervals, whatever the number of events asked.
func (t *Timeline) Totals(b *Bands, events []int) [][]int64 {
	out := make([][]int64, len(events))
	cur := make([]int64, len(b.Names))
	ps, pe := 0, 0
	for k, e := range events {
		e32 := int32(e)
		for ps < len(b.byStart) && t.Intervals[b.byStart[ps]].Start <= e32 {
			j := b.byStart[ps]
			cur[b.of[j]] += t.Intervals[j].Size
			ps++
		}
		for pe < len(b.byEnd) && t.Intervals[b.byEnd[pe]].End <= e32 {
			j := b.byEnd[pe]
			cur[b.of[j]] -= t.Intervals[j].Size
			pe++
		}
		out[k] = append([]int64(nil), cur...)
	}
	return out
}

// TotalsFrom returns the bytes of each band live right after event to,
// given base, their bytes right after event from (as Totals gives them):
// only the intervals that start or end between the two events are read,
// so a cursor next to a chart column costs a few of them, not a sweep of
// all.
func (t *Timeline) TotalsFrom(b *Bands, base []int64, from, to int) []int64 {
	out := append([]int64(nil), base...)
	lo, hi, sign := int32(from), int32(to), int64(1)
	if lo > hi {
		lo, hi, sign = hi, lo, -1
	}
	// Intervals whose start is in (lo, hi] are live at hi and not at lo;
	// those whose end is in (lo, hi], the other way round.
	startAt := func(k int) int32 { return t.Intervals[b.byStart[k]].Start }
	endAt := func(k int) int32 { return t.Intervals[b.byEnd[k]].End }
	for k := sort.Search(len(b.byStart), func(k int) bool { return startAt(k) > lo }); k < len(b.byStart) && startAt(k) <= hi; k++ {
		j := b.byStart[k]
		out[b.of[j]] += sign * t.Intervals[j].Size
	}
	for k := sort.Search(len(b.byEnd), func(k int) bool { return endAt(k) > lo }); k < len(b.byEnd) && endAt(k) <= hi; k++ {
		j := b.byEnd[k]
		out[b.of[j]] -= sign * t.Intervals[j].Size
	}
	return out
}
