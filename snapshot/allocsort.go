package snapshot

import (
	"cmp"
	"slices"
)

// Allocations are listed largest first. An Allocation is 144 bytes: sorted
// as values, the swaps moved each one about log2(n) times, and a snapshot
// of 300k active blocks spent 110 ms of its analysis in them (a third of
// its report). Here 24-byte keys are sorted, and each allocation is
// written once, at its place.

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

// sortAllocKeys sorts keys, which must come in increasing at (the order
// the allocations came in), by compareAllocKeys: a least significant digit
// first radix sort, a byte of the address at a time, then a byte of the
// size, each pass stable, so that at still decides among equal sizes and
// addresses. A byte that every key has alike is skipped (block sizes are
// multiples of 512, and the addresses of a process share their high
// bytes). 200k keys: 6.2 ms on one core, where a comparison sort on two
// cores, then merged, took 15.0 ms (BenchmarkSortAllocKeys). Keys in any
// other order are sorted by comparison.
func sortAllocKeys(keys []allocKey) {
	if len(keys) < 2 {
		return
	}
	var hist [16][256]int // the address's bytes, then the size's
	inOrder := true
	for i := range keys {
		if i > 0 && keys[i].at <= keys[i-1].at {
			inOrder = false
			break
		}
		a, s := keys[i].addr, sizeDigits(keys[i].size)
		for b := range 8 {
			hist[b][byte(a>>(8*b))]++
			hist[8+b][byte(s>>(8*b))]++
		}
	}
	if !inOrder {
		slices.SortFunc(keys, compareAllocKeys)
		return
	}
	src, dst := keys, make([]allocKey, len(keys))
	first := [2]uint64{keys[0].addr, sizeDigits(keys[0].size)}
	for p := range hist {
		shift := 8 * (p % 8)
		h := &hist[p]
		if h[byte(first[p/8]>>shift)] == len(keys) {
			continue // every key has this byte
		}
		sum := 0
		for v, c := range h {
			h[v] = sum
			sum += c
		}
		if p < 8 {
			for _, k := range src {
				d := byte(k.addr >> shift)
				dst[h[d]] = k
				h[d]++
			}
		} else {
			for _, k := range src {
				d := byte(sizeDigits(k.size) >> shift)
				dst[h[d]] = k
				h[d]++
			}
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// sizeDigits maps a size to digits in the order allocations are listed:
// the largest (the sign flipped, so that negative sizes from a damaged
// file order as compareAllocKeys orders them) first.
func sizeDigits(size int64) uint64 { return ^(uint64(size) ^ 1<<63) }

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
	sortAllocKeys(keys)
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
