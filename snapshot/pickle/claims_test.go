package pickle

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestClaims: a list claims the stack whose slot has its hash without
// comparing it, and settleClaims finds every claim whose stack is not the
// list: other ids, another length, a first frame apart, a wrong claim last
// of a batch and first of the next. The hash is chosen, so that distinct
// stacks share it.
func TestClaims(t *testing.T) {
	const h = 0xdead_beef_0000_0042
	stored := []uint32{4, 5, 6, 7}
	cases := []struct {
		name   string
		list   []uint32
		before int // right claims first
		wrong  bool
	}{
		{"the same ids", []uint32{4, 5, 6, 7}, 0, false},
		{"the last id apart", []uint32{4, 5, 6, 8}, 0, true},
		{"the first id apart", []uint32{9, 5, 6, 7}, 0, true},
		{"longer", []uint32{4, 5, 6, 7, 8}, 0, true},
		{"shorter", []uint32{4, 5, 6}, 0, true},
		{"right, the batch full", []uint32{4, 5, 6, 7}, claimBatch - 1, false},
		{"wrong, last of a batch", []uint32{4, 5, 6, 8}, claimBatch - 1, true},
		{"wrong, first of the next batch", []uint32{4, 5, 6, 8}, claimBatch, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tab stackTable
			tab.ready()
			id := tab.internHashed(h, stored)
			for range c.before {
				if got := tab.claim(h, stored); got != id {
					t.Fatalf("a right claim gave stack %d, want %d", got, id)
				}
			}
			if c.before == claimBatch && len(tab.claims.at) != 0 {
				t.Fatalf("%d claims logged after a full batch", len(tab.claims.at))
			}
			if got := tab.claim(h, c.list); got != id {
				t.Fatalf("claim gave stack %d, want the one its slot names, %d", got, id)
			}
			if ok := tab.settleClaims(); ok == c.wrong {
				t.Errorf("settleClaims says %v, want %v", ok, !c.wrong)
			}
			if len(tab.claims.at) != 0 || len(tab.claims.ids) != 0 {
				t.Errorf("the log holds %d claims after settling", len(tab.claims.at))
			}
		})
	}
}

// TestClaimNew: a list whose hash no slot holds is a new stack, even where
// its probe passes other stacks; nothing is logged for it.
func TestClaimNew(t *testing.T) {
	var tab stackTable
	tab.ready()
	mask := uint64(len(tab.slots) - 1)
	// Three stacks starting their probes at one slot: the third list
	// passes two stacks whose hashes are not its own.
	for k, ids := range [][]uint32{{1}, {2, 3}, {4, 5, 6}} {
		h := uint64(k+1)<<40 | 7&mask
		if got := tab.claim(h, ids); got != uint32(k) {
			t.Fatalf("list %d: stack %d, want a new one, %d", k, got, k)
		}
		if !slices.Equal(tab.get(uint32(k)), ids) {
			t.Fatalf("stack %d holds %v, want %v", k, tab.get(uint32(k)), ids)
		}
	}
	if len(tab.claims.at) != 0 || !tab.settleClaims() {
		t.Errorf("new stacks logged %d claims", len(tab.claims.at))
	}
}

// TestClaimLogIDs: the log compares its claims once it holds claimIDsMax
// frame ids, not only once it holds claimBatch claims: two claims of a
// stack just over half of that are compared at the second, two just under
// are kept.
func TestClaimLogIDs(t *testing.T) {
	for _, n := range []int{claimIDsMax/2 - 1, claimIDsMax/2 + 1} {
		var tab stackTable
		tab.ready()
		ids := make([]uint32, n)
		for i := range ids {
			ids[i] = uint32(i)
		}
		tab.intern(ids)
		h := tab.hash(ids)
		tab.claim(h, ids)
		tab.claim(h, ids)
		kept := len(tab.claims.ids)
		if over := 2*n >= claimIDsMax; over && kept != 0 || !over && kept != 2*n {
			t.Errorf("stacks of %d frames: the log keeps %d ids after two claims", n, kept)
		}
		if !tab.settleClaims() {
			t.Errorf("stacks of %d frames: a right claim found wrong", n)
		}
	}
}

// TestWeakHashesDecodeAgain: with hashes of 20 bits, thousands of distinct
// stacks share them and claims go wrong. A decode that claimed wrong says
// so (on one machine and with a helper), decodeWith then decodes again
// comparing every stack and gives what a decode with full hashes gives, and
// a stream, whose input is gone, returns ErrStacksAlike.
func TestWeakHashesDecodeAgain(t *testing.T) {
	data := genPickle(t, "shared", 20000)
	weak := func(d *decoder) { d.g.stacks.weak = true }
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		split splitFunc
	}{{"one machine", nil}, {"with a helper", splitAt(1.0/32, 0.5)}} {
		t.Run(c.name, func(t *testing.T) {
			want, wroot, err := decodeWith(ctx, data, nil, c.split, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want.exact {
				t.Fatal("full hashes: a claim went wrong")
			}
			if _, _, err := decodeOnce(ctx, data, nil, c.split, nil, nil, weak); !errors.Is(err, errClaims) {
				t.Fatalf("weak hashes, one decode: %v, want a wrong claim", err)
			}
			got, root, err := decodeWith(ctx, data, nil, c.split, nil, nil, weak)
			if err != nil {
				t.Fatal(err)
			}
			if !got.exact {
				t.Fatal("weak hashes: decodeWith did not decode again")
			}
			if canonical(got.g, root) != canonical(want.g, wroot) {
				t.Fatal("the decode again differs from the decode with full hashes")
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		s, _, drop := newFakeStream(data, 3, 1<<16, 1<<20)
		if _, err := s.Wait(streamHead); err != nil {
			t.Fatal(err)
		}
		_, _, err := decodeWith(ctx, s.Buf[:2], nil, nil, drop, &offHeapPool{}, s.machine, weak)
		if !errors.Is(err, ErrStacksAlike) {
			t.Fatalf("weak hashes: %v, want ErrStacksAlike", err)
		}
	})
}
