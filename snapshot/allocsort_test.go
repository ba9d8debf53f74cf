package snapshot

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortBySize compares SortBySize with a stable sort of the values by
// the same order, on inputs with many equal sizes and addresses (so that
// the order they came in decides), fixed points and long cycles.
func TestSortBySize(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 17, 1000, 20000} {
		for _, spread := range []int{1, 3, 1 << 20} {
			for _, byAddr := range []bool{true, false} {
				t.Run(fmt.Sprintf("n%d/spread%d/byAddr%v", n, spread, byAddr), func(t *testing.T) {
					in := make([]Allocation, n)
					for i := range in {
						in[i] = Allocation{Size: int64(rnd.IntN(spread)), Address: uint64(rnd.IntN(spread)), RequestedSize: int64(i)}
					}
					if n > 3 {
						// Already in place: every slot a fixed point.
						slices.SortStableFunc(in[:n/2], func(x, y Allocation) int { return cmp.Compare(y.Size, x.Size) })
					}
					want := slices.Clone(in)
					slices.SortStableFunc(want, func(x, y Allocation) int {
						if c := cmp.Compare(y.Size, x.Size); c != 0 || !byAddr {
							return c
						}
						return cmp.Compare(x.Address, y.Address)
					})
					got := slices.Clone(in)
					SortBySize(got, byAddr)
					for i := range want {
						// RequestedSize holds the input position.
						if g, w := got[i], want[i]; g.Size != w.Size || g.Address != w.Address || g.RequestedSize != w.RequestedSize {
							t.Fatalf("at %d: got size %d addr %d (input %d), want size %d addr %d (input %d)",
								i, got[i].Size, got[i].Address, got[i].RequestedSize, want[i].Size, want[i].Address, want[i].RequestedSize)
						}
					}
				})
			}
		}
	}
}

// BenchmarkSortBySize sorts 300k allocations of random sizes (a snapshot
// of 300k active blocks), against sorting the values themselves.
func BenchmarkSortBySize(b *testing.B) {
	rnd := rand.New(rand.NewPCG(3, 4))
	in := make([]Allocation, 300000)
	for i := range in {
		in[i] = Allocation{Size: 512 * int64(1+rnd.IntN(4096)), Address: uint64(i) << 9}
	}
	work := make([]Allocation, len(in))
	for _, by := range []string{"keys", "values"} {
		b.Run(by, func(b *testing.B) {
			for b.Loop() {
				copy(work, in)
				if by == "keys" {
					SortBySize(work, true)
					continue
				}
				slices.SortFunc(work, func(x, y Allocation) int {
					if c := cmp.Compare(y.Size, x.Size); c != 0 {
						return c
					}
					return cmp.Compare(x.Address, y.Address)
				})
			}
		})
	}
}

// TestSortAllocKeysInRuns sorts keys on 1 to 5 goroutines, on both sides
// of sortKeysMin per run, merged two by two (sortAllocKeys, odd runs out
// included) and as the analysis merges them (runMerger); both must equal
// one sort of the whole.
func TestSortAllocKeysInRuns(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, sortKeysMin - 1, sortKeysMin, 2*sortKeysMin - 1, 2 * sortKeysMin, 5*sortKeysMin + 3} {
		for procs := 1; procs <= 5; procs++ {
			in := make([]allocKey, n)
			for i := range in {
				in[i] = allocKey{size: int64(rnd.IntN(50)), addr: uint64(rnd.IntN(50)), at: uint64(i)}
			}
			want := slices.Clone(in)
			slices.SortFunc(want, compareAllocKeys)

			merged := slices.Clone(in)
			sortAllocKeys(merged, procs)
			if !slices.Equal(merged, want) {
				t.Errorf("n %d, procs %d: sortAllocKeys differs from one sort", n, procs)
			}

			keys := slices.Clone(in)
			bounds := sortAllocRuns(keys, procs)
			if runs, most := len(bounds)-1, max(1, min(procs, n/sortKeysMin)); runs != most {
				t.Errorf("n %d, procs %d: %d runs, want %d", n, procs, runs, most)
			}
			m := newRunMerger(keys, bounds)
			var got []allocKey
			for k, ok := m.pop(); ok; k, ok = m.pop() {
				got = append(got, k)
			}
			if !slices.Equal(got, want) {
				t.Errorf("n %d, procs %d: runMerger yields %d keys, not one sort's %d in order", n, procs, len(got), len(want))
			}
		}
	}
}
