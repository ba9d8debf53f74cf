package estimate

import "memscope/snapshot"

// SideOf summarises an analysed estimate (all devices) as one side of a
// snapshot diff.
func SideOf(name string, e *Analysis) snapshot.Side {
	s := snapshot.Side{Name: name}
	var peak, listed, unlisted, tensors int64
	for i := range e.Devices {
		d := &e.Devices[i]
		peak += d.PeakBytes
		listed += d.ListedBytes
		unlisted += d.UnlistedBytes
		tensors += int64(d.Tensors)
		s.Allocs = append(s.Allocs, d.Allocations...)
	}
	s.PeakAllocs = s.Allocs
	// The estimate's peak is what it predicts active memory peaks at: the
	// row a measured snapshot's peak_active_bytes sits on.
	s.Totals = []snapshot.DiffRow{{Name: "peak_active_bytes", A: peak}, {Name: "listed_bytes", A: listed}, {Name: "unlisted_bytes", A: unlisted}, {Name: "tensors", A: tensors}}
	return s
}
