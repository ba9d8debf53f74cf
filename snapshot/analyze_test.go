package snapshot

import (
	"cmp"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// TestRating: each rating on both sides of its threshold, and none for an
// efficiency no consistent file gives.
func TestRating(t *testing.T) {
	for _, c := range []struct {
		eff      float64
		reserved int64
		want     string
	}{
		{100, 0, "n/a"}, {0, 0, "n/a"},
		{100.01, 1, "inconsistent"}, {476.8, 1, "inconsistent"}, {100, 1, "excellent"},
		{98.01, 1, "excellent"}, {98, 1, "good"}, {95, 1, "good"}, {94.99, 1, "poor"}, {0, 1, "poor"},
	} {
		if got := Rating(c.eff, c.reserved); got != c.want {
			t.Errorf("Rating(%v, %d) = %q, want %q", c.eff, c.reserved, got, c.want)
		}
	}
}

// TestPeakWithoutTrace: without a trace, PeakLive is the active blocks at
// their requested sizes, largest requested first (ties by address), and
// PeakTop(n) its first n, on blocks in the analysis' order (block size)
// whose requested sizes reorder them: rounding, unsplit blocks, a requested
// size over the block's (hostile input) and none at all.
func TestPeakWithoutTrace(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 28))
	for round := range 200 {
		var d DeviceStats
		for i := range 1 + rng.IntN(60) {
			size := int64(512 * (1 + rng.IntN(8)))
			req := size - int64(rng.IntN(512))
			switch rng.IntN(6) {
			case 0:
				req = size / 2 // a block that was not split
			case 1:
				req = size + int64(rng.IntN(4096)) // requested over the block
			case 2:
				req = 0
			}
			state := StateActiveAllocated
			if rng.IntN(4) == 0 {
				state = StateInactive
			}
			d.Allocations = append(d.Allocations, Allocation{Address: uint64(rng.IntN(40))<<20 | uint64(i), Size: size, RequestedSize: req, State: state})
		}
		slices.SortFunc(d.Allocations, func(x, y Allocation) int { // as analyzeDevice orders them
			if c := cmp.Compare(y.Size, x.Size); c != 0 {
				return c
			}
			return cmp.Compare(x.Address, y.Address)
		})
		var want []Allocation
		for _, al := range d.Allocations {
			if al.State == StateActiveAllocated {
				want = append(want, al)
			}
		}
		sort.SliceStable(want, func(i, j int) bool {
			if want[i].RequestedSize != want[j].RequestedSize {
				return want[i].RequestedSize > want[j].RequestedSize
			}
			return want[i].Address < want[j].Address
		})
		for i := range want {
			want[i].Size = want[i].RequestedSize
		}
		a := &Analysis{Devices: []DeviceStats{d}}
		dev := &a.Devices[0]
		if got := a.PeakLive(dev); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("round %d: PeakLive %v, want %v", round, got, want)
		}
		for _, n := range []int{1, 2, 5, len(want) - 1, len(want), len(want) + 3} {
			if n <= 0 {
				continue
			}
			got := a.PeakTop(dev, n)
			if w := want[:min(n, len(want))]; !reflect.DeepEqual(got, w) && !(len(got) == 0 && len(w) == 0) {
				t.Fatalf("round %d: PeakTop(%d) %v, want %v", round, n, got, w)
			}
		}
	}
}
