package snapshot

import (
	"cmp"
	"slices"

	"memscope/format"
)

// RankSummary is one rank's snapshot reduced to the figures the rank
// overview compares: small enough to keep for thousands of files once the
// full analysis is dropped.
type RankSummary struct {
	Path  string
	Label Label
	// Err is set when the file could not be read; the figures are then
	// zero.
	Err error
	// Device is the device with the highest peak (a rank drives one GPU;
	// a snapshot may still record others).
	Device int
	// Peak is that device's peak active memory, Reserved its reserved
	// memory then, EfficiencyPct Peak over Reserved.
	Peak, Reserved int64
	EfficiencyPct  float64
	// TopCategory is the largest category live at the peak, with its
	// bytes.
	TopCategory      string
	TopCategoryBytes int64
	// OOMs counts the OOM events of every device.
	OOMs int
	// SnapshotReserved is the reserved memory at the snapshot, all devices.
	SnapshotReserved int64
}

// Summarize reduces an analysis to a rank's row.
func Summarize(path string, a *Analysis) RankSummary {
	r := RankSummary{Path: path, Label: ParseLabel(path), Device: -1}
	var best *DeviceStats
	for i := range a.Devices {
		d := &a.Devices[i]
		r.OOMs += len(d.OOMs)
		r.SnapshotReserved += d.ReservedBytes
		if best == nil || d.Peak.Active > best.Peak.Active {
			best = d
		}
	}
	if best == nil {
		return r
	}
	r.Device, r.Peak, r.Reserved, r.EfficiencyPct = best.Device, best.Peak.Active, best.Peak.Reserved, best.Peak.EfficiencyPct
	if cats := a.PeakCategories(best); len(cats) > 0 {
		r.TopCategory, r.TopCategoryBytes = cats[0].Name, cats[0].Bytes
	}
	return r
}

// Imbalance compares the ranks' peaks: MaxOverMean is the heaviest peak
// over the mean of the ranks read (1 when balanced), Heaviest that rank's
// index in the rows.
type Imbalance struct {
	Ranks       int
	Mean, Max   int64
	MaxOverMean float64
	Heaviest    int // -1 without ranks
}

// ImbalanceOf measures the rows that were read.
func ImbalanceOf(rows []RankSummary) Imbalance {
	im := Imbalance{Heaviest: -1}
	var sum int64
	for i, r := range rows {
		if r.Err != nil {
			continue
		}
		im.Ranks++
		sum += r.Peak
		if im.Heaviest < 0 || r.Peak > im.Max {
			im.Max, im.Heaviest = r.Peak, i
		}
	}
	if im.Ranks > 0 {
		im.Mean = sum / int64(im.Ranks)
		if sum > 0 {
			im.MaxOverMean = float64(im.Max) * float64(im.Ranks) / float64(sum)
		}
	}
	return im
}

// Iterations lists the steps of the rows, ascending (-1: no step in the
// path), OOM exits after the regular dump of the same step.
func Iterations(rows []RankSummary) []IterationKey {
	var out []IterationKey
	for _, r := range rows {
		k := IterationKey{Step: r.Label.Step, Exit: r.Label.Exit}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, compareIterations)
	return out
}

// compareIterations orders dumps by step, the OOM exit after the regular
// dump of the same step.
func compareIterations(a, b IterationKey) int {
	if c := cmp.Compare(a.Step, b.Step); c != 0 {
		return c
	}
	switch {
	case a.Exit == b.Exit:
		return 0
	case a.Exit:
		return 1
	}
	return -1
}

// IterationKey names one dump of the ranks: a step, and whether it is the
// dump taken on an OOM exit.
type IterationKey struct {
	Step int
	Exit bool
}

// Of returns the rows of one iteration, by rank.
func (k IterationKey) Of(rows []RankSummary) []RankSummary {
	var out []RankSummary
	for _, r := range rows {
		if r.Label.Step == k.Step && r.Label.Exit == k.Exit {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b RankSummary) int {
		if c := cmp.Compare(a.Label.Rank, b.Label.Rank); c != 0 {
			return c
		}
		return cmp.Compare(a.Path, b.Path)
	})
	return out
}

// IsRankSet reports whether snapshots found in a folder are per-rank dumps
// of one run: at least two, all allocator snapshots, at least two ranks.
func IsRankSet(found []Found) bool {
	ranks := map[int]bool{}
	for _, f := range found {
		if f.Kind == format.Estimate || f.Label.Rank < 0 {
			return false
		}
		ranks[f.Label.Rank] = true
	}
	return len(ranks) >= 2
}

// SortRanks orders rows by step, then OOM exit, then rank, then path.
func SortRanks(rows []RankSummary) []RankSummary {
	slices.SortStableFunc(rows, func(a, b RankSummary) int {
		if c := compareIterations(IterationKey{a.Label.Step, a.Label.Exit}, IterationKey{b.Label.Step, b.Label.Exit}); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Label.Rank, b.Label.Rank); c != 0 {
			return c
		}
		return cmp.Compare(a.Path, b.Path)
	})
	return rows
}
