package estimate

import (
	"cmp"
	"slices"

	"memscope/snapshot"
)

// VersusMeasured is one category of an estimate set beside a measured
// allocator snapshot.
type VersusMeasured struct {
	Category            string
	Estimated, Measured int64
}

// CompareByCategory puts an estimate's device beside what a measured
// device held at its peak (live, from Analysis.PeakLive), category by
// category, largest difference first. Both sides are peaks: an estimate
// describes the peak, and a snapshot's final state can be far below it.
func CompareByCategory(est *DeviceStats, live []snapshot.Allocation) []VersusMeasured {
	idx := map[string]int{}
	var out []VersusMeasured
	get := func(name string) *VersusMeasured {
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, VersusMeasured{Category: name})
		}
		return &out[i]
	}
	for _, c := range est.Categories {
		get(c.Name).Estimated += c.Bytes
	}
	for i := range live {
		get(live[i].Category).Measured += live[i].Size
	}
	if est.UnlistedBytes > 0 {
		get("(unlisted in estimate)").Estimated += est.UnlistedBytes
	}
	slices.SortStableFunc(out, func(x, y VersusMeasured) int {
		return cmp.Compare(absInt(y.Measured-y.Estimated), absInt(x.Measured-x.Estimated))
	})
	return out
}

func absInt(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
