package snapshot

import (
	"cmp"
	"runtime"
	"slices"

	"memscope/internal/par"
)

// Allocations are listed largest first. An Allocation is 144 bytes: sorted
// as values, the swaps moved each one about log2(n) times, and a snapshot
// of 300k active blocks spent 110 ms of its analysis in them (a third of
// its report). Here 24-byte keys are sorted, on every core, and each
// allocation is written once, at its place.

// allocKey is what an allocation is ordered by: size (larger first), then
// address when ordered by address, then the order it came in (at).
type allocKey struct {
	size int64
	addr uint64
	at   uint64
}

func compareAllocKeys(x, y allocKey) int {
	if x.size != y.size {
		return cmp.Compare(y.size, x.size)
	}
	if x.addr != y.addr {
		return cmp.Compare(x.addr, y.addr)
	}
	return cmp.Compare(x.at, y.at)
}

// sortKeysMin is the fewest keys worth sorting in parts, on several cores;
// maxSortRuns bounds the parts, which runMerger scans at each key.
const (
	sortKeysMin = 1 << 14
	maxSortRuns = 8
)

// sortAllocRuns sorts keys in runs, one per goroutine on up to procs
// goroutines: run k is keys[bounds[k]:bounds[k+1]].
func sortAllocRuns(keys []allocKey, procs int) (bounds []int) {
	parts := max(1, min(procs, maxSortRuns, len(keys)/sortKeysMin))
	bounds = make([]int, parts+1)
	for p := range bounds {
		bounds[p] = p * len(keys) / parts
	}
	par.Each(parts, func(p int) { slices.SortFunc(keys[bounds[p]:bounds[p+1]], compareAllocKeys) })
	return bounds
}

// sortAllocKeys sorts keys on up to procs goroutines: runs sorted each on
// its own, then merged two by two.
func sortAllocKeys(keys []allocKey, procs int) {
	bounds := sortAllocRuns(keys, procs)
	if len(bounds) <= 2 {
		return
	}
	src, dst := keys, make([]allocKey, len(keys))
	for len(bounds) > 2 {
		// Runs k and k+1 merge into one; an odd run out is copied.
		next := []int{0}
		for k := 0; k+1 < len(bounds); k += 2 {
			next = append(next, bounds[min(k+2, len(bounds)-1)])
		}
		par.Each(len(next)-1, func(m int) {
			lo, mid, hi := bounds[2*m], bounds[min(2*m+1, len(bounds)-1)], next[m+1]
			mergeAllocKeys(dst[lo:hi], src[lo:mid], src[mid:hi])
		})
		src, dst, bounds = dst, src, next
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// runMerger yields sorted runs' keys in order, without a merged copy.
type runMerger struct {
	keys []allocKey
	next []int // each run's next key; a run is done at its end
	end  []int
}

func newRunMerger(keys []allocKey, bounds []int) *runMerger {
	return &runMerger{keys: keys, next: slices.Clone(bounds[:len(bounds)-1]), end: bounds[1:]}
}

// pop returns the least key left; false when none is.
func (m *runMerger) pop() (allocKey, bool) {
	best := -1
	for r, i := range m.next {
		if i < m.end[r] && (best < 0 || compareAllocKeys(m.keys[i], m.keys[m.next[best]]) < 0) {
			best = r
		}
	}
	if best < 0 {
		return allocKey{}, false
	}
	k := m.keys[m.next[best]]
	m.next[best]++
	return k, true
}

// mergeAllocKeys merges sorted a and b into dst (len(a)+len(b) long); on
// equal keys a's first, which keeps a merge of sorted parts stable.
func mergeAllocKeys(dst, a, b []allocKey) {
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if compareAllocKeys(b[j], a[i]) < 0 {
			dst[k] = b[j]
			j++
		} else {
			dst[k] = a[i]
			i++
		}
		k++
	}
	k += copy(dst[k:], a[i:])
	copy(dst[k:], b[j:])
}

// SortBySize orders allocs largest first; allocations of one size by
// address when byAddr is set, and otherwise (and at equal addresses) in the
// order they came.
func SortBySize(allocs []Allocation, byAddr bool) {
	keys := make([]allocKey, len(allocs))
	for i := range allocs {
		keys[i] = allocKey{size: allocs[i].Size, at: uint64(i)}
		if byAddr {
			keys[i].addr = allocs[i].Address
		}
	}
	sortAllocKeys(keys, runtime.GOMAXPROCS(0))
	// Place each allocation along the cycles of the permutation: slot p
	// takes the allocation keys[p].at names, whose slot takes the next,
	// until the cycle comes back to p. Moved once each, with no second
	// array of allocations.
	const done = ^uint64(0)
	for p := range keys {
		if keys[p].at == done || keys[p].at == uint64(p) {
			continue
		}
		first := allocs[p]
		q := p
		for {
			from := int(keys[q].at)
			keys[q].at = done
			if from == p {
				allocs[q] = first
				break
			}
			allocs[q] = allocs[from]
			q = from
		}
	}
}
