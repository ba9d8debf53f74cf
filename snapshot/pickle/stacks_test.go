package pickle

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestStackTableInterns: equal stacks get one id, distinct stacks distinct
// ids, across the growth points of the table (256 slots hold 192 stacks
// before doubling), with the empty stack, stacks that are prefixes of one
// another and stacks interned again from other slices.
func TestStackTableInterns(t *testing.T) {
	for _, n := range []int{1, stackSlotsMin*3/4 - 1, stackSlotsMin * 3 / 4, stackSlotsMin*3/4 + 1, 5000} {
		rng := rand.New(rand.NewPCG(uint64(n), 2))
		var tab stackTable
		ids := map[string]uint32{}
		stacks := make([][]uint32, n)
		for i := range stacks {
			depth := rng.IntN(6)
			if i > 0 && rng.IntN(4) == 0 { // a prefix of an earlier stack
				prev := stacks[rng.IntN(i)]
				stacks[i] = append([]uint32(nil), prev[:rng.IntN(len(prev)+1)]...)
				continue
			}
			for range depth {
				stacks[i] = append(stacks[i], uint32(rng.IntN(20)))
			}
		}
		for round := range 2 {
			for _, st := range stacks {
				key := fmt.Sprint(st)
				id := tab.intern(append([]uint32(nil), st...))
				if want, ok := ids[key]; ok && id != want {
					t.Fatalf("%d stacks, round %d: %v is %d, was %d", n, round, st, id, want)
				}
				ids[key] = id
				if !equalIDs(tab.raws[id], st) {
					t.Fatalf("%d stacks: id %d holds %v, not %v", n, id, tab.raws[id], st)
				}
			}
		}
		if len(tab.raws) != len(ids) {
			t.Errorf("%d stacks: %d ids for %d distinct stacks", n, len(tab.raws), len(ids))
		}
	}
}
