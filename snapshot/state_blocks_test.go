package snapshot

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStateBlocksAgreesWithMap: random sets, gets and deletes over a few
// addresses (so entries are freed and reused, and the index grows past its
// first size, or its hint) leave the same blocks as a Go map, listed by
// address.
func TestStateBlocksAgreesWithMap(t *testing.T) {
	for _, c := range []struct{ addrs, hint int }{{1, 0}, {50, 0}, {5000, 0}, {5000, 100}, {5000, 5000}} {
		addrs := c.addrs
		rng := rand.New(rand.NewPCG(uint64(addrs), 3))
		m := newStateBlocks[StateBlock](c.hint)
		ref := map[uint64]StateBlock{}
		for op := range 40000 {
			a := uint64(rng.IntN(addrs)) << 9
			switch rng.IntN(4) {
			case 0, 1:
				b := StateBlock{Addr: a, Size: int64(op), PendingFree: op%3 == 0}
				m.set(a, b)
				ref[a] = b
			case 2:
				m.delete(a)
				delete(ref, a)
			case 3:
				got := m.get(a)
				want, ok := ref[a]
				if (got != nil) != ok || (ok && !sameBlock(*got, want)) {
					t.Fatalf("%d addresses, op %d: get %#x = %v, want %v (%v)", addrs, op, a, got, want, ok)
				}
				if ok {
					got.PendingFree = !got.PendingFree // through the pointer, as StateAt does
					want.PendingFree = !want.PendingFree
					ref[a] = want
				}
			}
		}
		got := m.byAddress() // in order, unsorted here: the test checks it
		var want []StateBlock
		for _, b := range ref {
			want = append(want, b)
		}
		slices.SortFunc(want, func(a, b StateBlock) int { return cmp.Compare(a.Addr, b.Addr) })
		if !slices.EqualFunc(got, want, sameBlock) {
			t.Fatalf("%d addresses: %d blocks, want %d", addrs, len(got), len(want))
		}
	}
}

func sameBlock(a, b StateBlock) bool {
	return a.Addr == b.Addr && a.Size == b.Size && a.PendingFree == b.PendingFree && a.Frames.Len() == b.Frames.Len()
}

// TestSortByAddr: keys one short of the radix sort and past it, with
// addresses aligned or not, close together or across all 64 bits (and
// one equal to the rest's lowest), end in the order a comparison sort
// gives, each with its own place.
func TestSortByAddr(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for _, n := range []int{0, 1, 2, radixMin - 1, radixMin, 5*radixMin + 3} {
		for _, shape := range []struct {
			name string
			addr func(i int) uint64
		}{
			{"aligned", func(int) uint64 { return 0x7f0000000000 + uint64(rng.IntN(1<<30))<<9 }},
			{"unaligned", func(int) uint64 { return rng.Uint64() >> 20 }},
			{"all bits", func(int) uint64 { return rng.Uint64() }},
			{"sequential", func(i int) uint64 { return 1<<63 + uint64(n-i)*512 }},
			{"narrow", func(int) uint64 { return 0x1000 + uint64(rng.IntN(1<<20)) }}, // an odd number of passes
		} {
			seen := map[uint64]bool{}
			keys := make([]addrKey, 0, n)
			for i := 0; len(keys) < n; i++ {
				if a := shape.addr(i); !seen[a] {
					seen[a] = true
					keys = append(keys, addrKey{a, int32(len(keys))})
				}
			}
			want := slices.Clone(keys)
			slices.SortFunc(want, func(a, b addrKey) int { return cmp.Compare(a.addr, b.addr) })
			sortByAddr(keys)
			if !slices.Equal(keys, want) {
				t.Fatalf("%d keys, %s: not in address order", n, shape.name)
			}
		}
	}
}
