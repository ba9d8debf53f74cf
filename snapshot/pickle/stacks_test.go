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
				if !equalIDs(tab.get(id), st) {
					t.Fatalf("%d stacks: id %d holds %v, not %v", n, id, tab.get(id), st)
				}
			}
		}
		if tab.len() != len(ids) {
			t.Errorf("%d stacks: %d ids for %d distinct stacks", n, tab.len(), len(ids))
		}
	}
}

// TestStackTableSlabs: stacks are stored across slab boundaries intact, on
// both sides of each rule: a stack that exactly fills the last slab and one
// that overflows it by one, stacks of a quarter of the first slab (shared)
// and one more (a slab of its own, after which the next stack starts
// another, and the next slab's size is not changed by it), and slabs that
// double from stackSlab up to stackSlabMax, then stay there.
func TestStackTableSlabs(t *testing.T) {
	seq := func(n int, from uint32) []uint32 {
		s := make([]uint32, n)
		for i := range s {
			s[i] = from + uint32(i)
		}
		return s
	}
	const q = stackSlab / 4
	var tab stackTable
	stacks := [][]uint32{
		seq(q, 0), seq(q, 1), seq(q, 2), seq(q-1, 3), // slab 0 (4q), one id left
		seq(1, 4),                                                                      // fills slab 0 exactly
		seq(1, 5),                                                                      // slab 1 (8q)
		seq(q, 6), seq(q, 7), seq(q, 8), seq(q, 9), seq(q, 10), seq(q, 11), seq(q, 12), // slab 1, q-1 left
		seq(q, 13),   // overflows by one: slab 2 (16q)
		seq(q+1, 14), // a slab of its own (3)
		seq(1, 15),   // slab 4 (32q: the big one did not double it)
		seq(q, 16),   // slab 4
	}
	wantSlab := []uint32{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4, 4}
	for i, st := range stacks {
		id := tab.intern(st)
		if id != uint32(i) {
			t.Fatalf("stack %d: id %d", i, id)
		}
		if got := tab.refs[id].slab; got != wantSlab[i] {
			t.Errorf("stack %d (%d ids): slab %d, want %d", i, len(st), got, wantSlab[i])
		}
	}
	// Fill on with stacks of q ids, through slabs of stackSlabMax.
	for i := len(stacks); len(tab.slabs) < 9; i++ {
		st := seq(q, uint32(i))
		if id := tab.intern(st); id != uint32(i) {
			t.Fatalf("stack %d: id %d", i, id)
		}
		stacks = append(stacks, st)
	}
	for i, st := range stacks {
		if !equalIDs(tab.get(uint32(i)), st) {
			t.Errorf("stack %d (%d ids) changed", i, len(st))
		}
		if id := tab.intern(append([]uint32(nil), st...)); id != uint32(i) {
			t.Errorf("stack %d interned again: id %d", i, id)
		}
	}
	if big := tab.slabs[3]; len(big) != q+1 || cap(big) != len(big) {
		t.Errorf("the long stack's slab: len %d cap %d", len(big), cap(big))
	}
	wantCap := []int{4 * q, 8 * q, 16 * q, q + 1, 32 * q, 64 * q, stackSlabMax, stackSlabMax, stackSlabMax}
	if 64*q != stackSlabMax {
		t.Fatalf("stackSlabMax is %d, not the fifth doubling of stackSlab", stackSlabMax)
	}
	for k, want := range wantCap {
		if got := cap(tab.slabs[k]); got != want {
			t.Errorf("slab %d: cap %d, want %d", k, got, want)
		}
	}
}

// TestFindMany: findMany agrees with find, one stack at a time, for
// batches of every size up to findBatch: stacks the table holds (in their
// first slot or further along a probe), stacks it lacks whose hash is
// another's (the first slot matches by hash, not by ids), the empty stack,
// and stacks whose hash leads to an empty slot. Hashes are chosen, so that
// collisions are certain.
func TestFindMany(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tab stackTable
	tab.ready()
	var held [][]uint32
	var hashes []uint64
	for i := range 300 {
		// 300 stacks over 40 hashes: chains of several stacks per hash.
		h := uint64(rng.IntN(40)) * 7919
		ids := []uint32{uint32(i), uint32(rng.IntN(50))}
		if i%50 == 0 {
			ids = nil // the empty stack, once per hash it gets
		}
		tab.internHashed(h, ids)
		held, hashes = append(held, ids), append(hashes, h)
	}
	type query struct {
		h   uint64
		ids []uint32
	}
	var qs []query
	for i, ids := range held {
		qs = append(qs, query{hashes[i], ids})                           // held
		qs = append(qs, query{hashes[i], []uint32{ids0(ids) + 1000, 1}}) // lacked, same hash
		qs = append(qs, query{hashes[i], []uint32{ids0(ids), 999}})      // lacked, same first frame
	}
	for i := range 20 {
		qs = append(qs, query{uint64(1e6 + i), []uint32{uint32(i)}}) // lacked, empty slot
		qs = append(qs, query{uint64(1e6 + i), nil})
	}
	rng.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
	for size := 1; size <= findBatch; size++ {
		for lo := 0; lo < len(qs); lo += size {
			batch := qs[lo:min(lo+size, len(qs))]
			hs := make([]uint64, len(batch))
			idss := make([][]uint32, len(batch))
			for k, q := range batch {
				hs[k], idss[k] = q.h, q.ids
			}
			got := make([]uint32, len(batch))
			found := make([]bool, len(batch))
			tab.findMany(hs, idss, got, found)
			for k, q := range batch {
				want, ok := tab.find(q.h, q.ids)
				if found[k] != ok || (ok && got[k] != want) {
					t.Fatalf("batch of %d, %v (hash %d): findMany %d %v, find %d %v", size, q.ids, q.h, got[k], found[k], want, ok)
				}
			}
		}
	}
}

func ids0(ids []uint32) uint32 {
	if len(ids) == 0 {
		return 0
	}
	return ids[0]
}

// TestReserve: after reserve(n), adding n new stacks does not grow the
// slots, and every stack, old or new, is found; a reserve the slots already
// hold changes nothing (each side of the load bound).
func TestReserve(t *testing.T) {
	stack := func(i int) []uint32 { return []uint32{uint32(i), uint32(i * 7), 3} }
	for _, c := range []struct{ have, add int }{{0, 0}, {0, 1}, {100, 92}, {100, 93}, {1000, 50000}} {
		var tb stackTable
		tb.ready()
		for i := range c.have {
			tb.intern(stack(i))
		}
		before := len(tb.slots)
		tb.reserve(c.add)
		if fits := 4*(c.have+c.add) <= 3*before; fits && len(tb.slots) != before {
			t.Errorf("%d+%d: %d slots held them, reserve made %d", c.have, c.add, before, len(tb.slots))
		}
		reserved := len(tb.slots)
		for i := c.have; i < c.have+c.add; i++ {
			tb.intern(stack(i))
		}
		if len(tb.slots) != reserved {
			t.Errorf("%d+%d: the slots grew from %d to %d after reserve", c.have, c.add, reserved, len(tb.slots))
		}
		for i := range c.have + c.add {
			ids := stack(i)
			if id, ok := tb.find(tb.hash(ids), ids); !ok || id != uint32(i) {
				t.Fatalf("%d+%d: stack %d found as %d, %v", c.have, c.add, i, id, ok)
			}
		}
	}
	// A table never used is made ready first.
	var fresh stackTable
	fresh.reserve(1000)
	n := len(fresh.slots)
	for i := range 1000 {
		fresh.intern(stack(i))
	}
	if n == 0 || len(fresh.slots) != n {
		t.Errorf("a fresh table reserved %d slots for 1000 stacks, then had %d", n, len(fresh.slots))
	}
}

// TestSlabPacker: packing a subsequence of a table's stacks, in order,
// keeps each moved stack's ids, never moves one past where it was, keeps
// each within its slab's room (slabs of every size, from stackSlab to
// stackSlabMax, and slabs of one big stack), and gives up the slabs that
// no moved stack is in.
func TestSlabPacker(t *testing.T) {
	for _, keep := range []int{0, 1, 2, 4, 100} { // keep one stack in keep (0: none)
		rng := rand.New(rand.NewPCG(uint64(keep), 9))
		var tab stackTable
		var want [][]uint32
		for i := 0; len(tab.slabs) < 8; i++ {
			n := 1 + rng.IntN(stackSlab/4)
			if i%37 == 5 {
				n = stackSlab/4 + 1 + rng.IntN(10) // a slab of its own
			}
			st := make([]uint32, n)
			for k := range st {
				st[k] = uint32(i)<<8 | uint32(k&0xff)
			}
			tab.intern(st)
			want = append(want, st)
		}
		orig := append([]stackRef(nil), tab.refs...)
		p := newSlabPacker(&tab)
		moved := map[int]stackRef{}
		for i, r := range orig {
			if keep == 0 || rng.IntN(keep) != 0 {
				continue
			}
			to := p.move(r)
			if to.slab > r.slab || (to.slab == r.slab && to.off > r.off) {
				t.Fatalf("keep 1 in %d: stack %d moved from %v past itself to %v", keep, i, r, to)
			}
			moved[i] = to
		}
		p.finish()
		used := map[uint32]bool{}
		for i, to := range moved {
			used[to.slab] = true
			s := tab.slabs[to.slab]
			if int(to.off+to.n) > len(s) || len(s) > cap(s) {
				t.Fatalf("keep 1 in %d: stack %d at %v, slab len %d cap %d", keep, i, to, len(s), cap(s))
			}
			if !equalIDs(s[to.off:to.off+to.n], want[i]) {
				t.Fatalf("keep 1 in %d: stack %d changed when moved to %v", keep, i, to)
			}
		}
		for k, s := range tab.slabs {
			if !used[uint32(k)] && len(s) > 0 {
				t.Errorf("keep 1 in %d: slab %d holds no moved stack but kept %d ids", keep, k, len(s))
			}
		}
	}
}
