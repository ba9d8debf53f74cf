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
		m := newStateBlocks(c.hint)
		ref := map[uint64]StateBlock{}
		for op := range 40000 {
			a := uint64(rng.IntN(addrs)) << 9
			switch rng.IntN(4) {
			case 0, 1:
				b := StateBlock{Addr: a, Size: int64(op), PendingFree: op%3 == 0}
				m.set(b)
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
