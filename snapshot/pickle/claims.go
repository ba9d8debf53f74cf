package pickle

// Claims: interning a frame list without comparing it on the spot.
//
// A trace of many distinct stacks (300k stacks of 40 frames over a pool
// of 2,000 frame dicts) finds most of its lists in a table of tens of MiB
// of ids: a found list is three dependent cache misses (its slot, its
// ref, its ids), one list after another, and interning was a third of
// its decode. claim settles a list by its slot alone, whose 64-bit hash
// equals the list's, and keeps the list to compare with the
// stack it claimed later, in batches whose misses overlap. Distinct
// stacks hash alike one time in 2^64 for each pair probed: when it
// happens, the decode is wrong from there on, settleClaims says so, and
// the input is decoded again with every list compared (decoder.exact).

// claimBatch is how many claims are compared together; claimIDsMax is how
// many of their frame ids the log keeps before it compares them sooner
// (long stacks).
const (
	claimBatch  = 32
	claimIDsMax = 1 << 13
)

// claimLog holds claims not compared yet: each list's ids, copied, and the
// stack it claimed.
type claimLog struct {
	ids   []uint32
	at    []claimed
	wrong bool // a claimed stack was not the list
}

type claimed struct{ id, off, n uint32 }

// claim is intern for a list whose hash is h, in a ready table, without
// comparing it with the stack it finds: see Claims above.
func (t *stackTable) claim(h uint64, ids []uint32) uint32 {
	mask := len(t.slots) - 1
	i := int(h) & mask
	for ; t.slots[i].id != 0; i = (i + 1) & mask {
		if s := t.slots[i]; s.is(h) {
			c := &t.claims
			c.at = append(c.at, claimed{id: s.id - 1, off: uint32(len(c.ids)), n: uint32(len(ids))})
			c.ids = append(c.ids, ids...)
			if len(c.at) == claimBatch || len(c.ids) >= claimIDsMax {
				t.checkClaims()
			}
			return s.id - 1
		}
	}
	// No slot of the probe holds a stack of this hash: the list is new.
	return t.add(i, h, t.store(ids), hasPlaceholders(ids))
}

// checkClaims compares the logged claims (claim keeps at most claimBatch),
// each level of them (ref, first id, all ids) for all before the next, and
// empties the log.
func (t *stackTable) checkClaims() {
	c := &t.claims
	var refs [claimBatch]stackRef
	var first [claimBatch]uint32
	for k, a := range c.at {
		refs[k] = t.refs[a.id]
	}
	for k, r := range refs[:len(c.at)] {
		if r.n > 0 {
			first[k] = t.slabs[r.slab][r.off]
		}
	}
	for k, a := range c.at {
		r, list := refs[k], c.ids[a.off:a.off+a.n]
		if r.n != a.n || a.n > 0 && first[k] != list[0] || !equalIDs(t.slabs[r.slab][r.off:r.off+r.n], list) {
			c.wrong = true
		}
	}
	c.ids, c.at = c.ids[:0], c.at[:0]
}

// settleClaims compares the claims left and says whether every claim was
// right.
func (t *stackTable) settleClaims() bool {
	t.checkClaims()
	return !t.claims.wrong
}
