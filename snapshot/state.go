package snapshot

import (
	"cmp"
	"math/bits"
	"slices"
)

// StateSegment is a segment of the allocator state at some event.
type StateSegment struct {
	Addr   uint64
	Size   int64
	Stream uint64
}

// StateBlock is a live block of the allocator state at some event. Size is
// the requested size, as memory_viz draws it; PendingFree marks a block
// freed but waiting on another stream.
type StateBlock struct {
	Addr        uint64
	Size        int64
	PendingFree bool
	Frames      Stack
}

// AllocatorState is the device's segments and live blocks right after one
// event: memory_viz's Allocator State History.
type AllocatorState struct {
	Event    int // -1: before the first event
	Segments []StateSegment
	Blocks   []StateBlock
	// Reserved is the segments' total; Active the blocks' total.
	Reserved, Active int64
	// Free is Reserved minus the live blocks; LargestFree the largest gap
	// between live blocks inside one segment (the largest request that fits
	// without a new segment), and ExternalPct 100 * (1 - LargestFree/Free).
	Free, LargestFree int64
	ExternalPct       float64
}

// StateAt rebuilds the allocator state right after event i (-1: before the
// first) by undoing every later event from the final segments, as
// memory_viz's simulate_memory does: a later alloc removes its block, a later
// free restores it, a later segment_alloc/map removes segment memory and a
// later segment_free/unmap restores it (merging neighbours for expandable
// segments).
func (t *Timeline) StateAt(s *Snapshot, i int) *AllocatorState {
	segs, blocks := undoTo[StateBlock](t, s, i, wholeBlocks{s})
	st := &AllocatorState{Event: i, Segments: segs, Blocks: blocks.byAddress()}
	st.measure()
	return st
}

// FreeAt is StateAt's Free, LargestFree and ExternalPct alone: the same
// walk keeping each block's size only (8 bytes where StateAt keeps 48 and
// its stack). The analysis needs no more at the peak, where a snapshot of
// 200k live blocks had StateAt take 170 MB and 180 ms.
func (t *Timeline) FreeAt(s *Snapshot, i int) (free, largestFree int64, external float64) {
	segs, blocks := undoTo[int64](t, s, i, blockSizes{})
	keys := blocks.sortedKeys()
	free, largestFree = freeGaps(segs, len(keys), func(k int) (uint64, int64) {
		return keys[k].addr, blocks.store[keys[k].j]
	})
	return free, largestFree, externalPct(free, largestFree)
}

// blockKind says what undoing the trace keeps of each live block (V): made
// from a block of the snapshot, or from a free that is undone (pending:
// the free waits on another stream); unpend undoes a free_requested.
type blockKind[V any] interface {
	fromBlock(b *Block) V
	fromFree(e *TraceEntry, pending bool) V
	unpend(v *V)
}

// wholeBlocks keeps StateBlocks, with their stacks.
type wholeBlocks struct{ s *Snapshot }

func (w wholeBlocks) fromBlock(b *Block) StateBlock {
	return StateBlock{Addr: b.Address, Size: b.RequestedSize, PendingFree: b.State == StateActivePendingFree, Frames: w.s.BlockFrames(b)}
}

func (w wholeBlocks) fromFree(e *TraceEntry, pending bool) StateBlock {
	return StateBlock{Addr: e.Addr, Size: e.Size, PendingFree: pending, Frames: w.s.FramesOf(e)}
}

func (wholeBlocks) unpend(b *StateBlock) { b.PendingFree = false }

// blockSizes keeps the requested size alone.
type blockSizes struct{}

func (blockSizes) fromBlock(b *Block) int64             { return b.RequestedSize }
func (blockSizes) fromFree(e *TraceEntry, _ bool) int64 { return e.Size }
func (blockSizes) unpend(*int64)                        {}

// undoTo undoes every event after i from the snapshot's segments and
// active blocks (see StateAt), keeping what kind says of each block, and
// returns the segments, by address, and the blocks.
func undoTo[V any, K blockKind[V]](t *Timeline, s *Snapshot, i int, kind K) ([]StateSegment, *stateBlocks[V]) {
	var segs []StateSegment
	blocks := newStateBlocks[V](activeBlocks(s, t.Device))
	for si := range s.Segments {
		seg := &s.Segments[si]
		if seg.Device != t.Device {
			continue
		}
		segs = append(segs, StateSegment{Addr: seg.Address, Size: seg.TotalSize, Stream: seg.Stream})
		for bi := range seg.Blocks {
			b := &seg.Blocks[bi]
			if b.State.Active() {
				blocks.set(b.Address, kind.fromBlock(b))
			}
		}
	}
	slices.SortFunc(segs, func(a, b StateSegment) int { return cmp.Compare(a.Addr, b.Addr) })
	ev := t.Events
	for j := len(ev) - 1; j > i && j >= 0; j-- {
		e := &ev[j]
		switch e.Action() {
		case ActionFreeCompleted:
			if j > 0 && ev[j-1].Action() == ActionFreeRequested && ev[j-1].Addr == e.Addr {
				if j-1 > i {
					// The pair is one free, and both are undone.
					blocks.set(e.Addr, kind.fromFree(e, false))
					j--
					continue
				}
				// The cursor sits on the free_requested of a merged pair:
				// memory_viz shows the free as done.
				continue
			}
			blocks.set(e.Addr, kind.fromFree(e, true))
		case ActionFreeRequested:
			if b := blocks.get(e.Addr); b != nil {
				kind.unpend(b)
			}
		case ActionAlloc:
			blocks.delete(e.Addr)
		case ActionSegmentFree, ActionSegmentUnmap:
			segs = mapSegment(segs, e.Action() == ActionSegmentUnmap, StateSegment{Addr: e.Addr, Size: e.Size, Stream: s.StreamOf(e)})
		case ActionSegmentAlloc, ActionSegmentMap:
			segs = unmapSegment(segs, e.Action() == ActionSegmentMap, StateSegment{Addr: e.Addr, Size: e.Size, Stream: s.StreamOf(e)})
		}
	}
	return segs, blocks
}

// measure totals the state and finds its free gaps.
func (st *AllocatorState) measure() {
	for _, seg := range st.Segments {
		st.Reserved += seg.Size
	}
	for _, b := range st.Blocks {
		st.Active += b.Size
	}
	st.Free, st.LargestFree = freeGaps(st.Segments, len(st.Blocks), func(k int) (uint64, int64) {
		return st.Blocks[k].Addr, st.Blocks[k].Size
	})
	st.ExternalPct = externalPct(st.Free, st.LargestFree)
}

// freeGaps is the memory of segs (by address) that none of n blocks (by
// address; block(k) is the k-th one's address and size) covers, and the
// largest such gap inside one segment.
func freeGaps(segs []StateSegment, n int, block func(k int) (uint64, int64)) (free, largest int64) {
	bi := 0
	for _, seg := range segs {
		end := seg.Addr + uint64(seg.Size)
		for bi < n {
			if a, _ := block(bi); a >= seg.Addr {
				break
			}
			bi++ // a block outside every segment (inconsistent input)
		}
		addr := seg.Addr
		for bi < n {
			a, size := block(bi)
			if a >= end {
				break
			}
			if a > addr {
				gap := int64(a - addr)
				free += gap
				largest = max(largest, gap)
			}
			addr = max(addr, a+uint64(max(size, 0)))
			bi++
		}
		if addr < end {
			gap := int64(end - addr)
			free += gap
			largest = max(largest, gap)
		}
	}
	return free, largest
}

// externalPct is 100 * (1 - largest/free): how much of the free memory
// lies outside its largest gap; 0 with none free.
func externalPct(free, largest int64) float64 {
	if free <= 0 {
		return 0
	}
	return 100 * (1 - float64(largest)/float64(free))
}

// mapSegment puts a segment back (undoing a segment_free, or a
// segment_unmap when merge is set: then it joins neighbours it touches).
func mapSegment(segs []StateSegment, merge bool, seg StateSegment) []StateSegment {
	idx, _ := slices.BinarySearchFunc(segs, seg.Addr, func(s StateSegment, a uint64) int { return cmp.Compare(s.Addr, a) })
	segs = slices.Insert(segs, idx, seg)
	if !merge {
		return segs
	}
	if idx+1 < len(segs) {
		next := segs[idx+1]
		if seg.Addr+uint64(seg.Size) == next.Addr && seg.Stream == next.Stream {
			segs[idx].Size += next.Size
			segs = slices.Delete(segs, idx+1, idx+2)
		}
	}
	if idx > 0 {
		prev := &segs[idx-1]
		if prev.Addr+uint64(prev.Size) == segs[idx].Addr && prev.Stream == segs[idx].Stream {
			prev.Size += segs[idx].Size
			segs = slices.Delete(segs, idx, idx+1)
		}
	}
	return segs
}

// unmapSegment takes a segment away (undoing a segment_alloc, or a
// segment_map when merge is set: then it may cut a piece out of a larger
// mapped range).
func unmapSegment(segs []StateSegment, merge bool, seg StateSegment) []StateSegment {
	if !merge {
		for k := range segs {
			if segs[k].Addr == seg.Addr {
				return slices.Delete(segs, k, k+1)
			}
		}
		return segs
	}
	end := seg.Addr + uint64(seg.Size)
	for k := range segs {
		ex := &segs[k]
		exEnd := ex.Addr + uint64(ex.Size)
		if ex.Addr > seg.Addr || end > exEnd {
			continue
		}
		switch {
		case ex.Addr == seg.Addr:
			ex.Addr += uint64(seg.Size)
			ex.Size -= seg.Size
			if ex.Size == 0 {
				return slices.Delete(segs, k, k+1)
			}
		case exEnd == end:
			ex.Size -= seg.Size
		default:
			ex.Size = int64(seg.Addr - ex.Addr)
			return slices.Insert(segs, k+1, StateSegment{Addr: end, Size: int64(exEnd - end), Stream: ex.Stream})
		}
		return segs
	}
	return segs
}

// stateBlocks is the set of blocks StateAt keeps by address (V: what it
// keeps of each, see blockKind): an open-addressing index into a slice
// whose freed entries are reused. Undoing a million events through a Go map
// of blocks was the critical path of a report's analysis (45 ms on
// bigtrain).
type stateBlocks[V any] struct {
	index *addrMap
	store []V
	free  []int32 // entries of store no address names
}

// newStateBlocks makes the set for about n blocks: a snapshot's active
// blocks, which undoing the trace mostly trades for others (a snapshot of
// 200k blocks grew its slice and index to 150 MB of copies).
func newStateBlocks[V any](n int) *stateBlocks[V] {
	return &stateBlocks[V]{index: newAddrMap(max(1024, n)), store: make([]V, 0, n)}
}

// set puts v at addr, replacing the block there.
func (m *stateBlocks[V]) set(addr uint64, v V) {
	if j, ok := m.index.Get(addr); ok {
		m.store[j] = v
		return
	}
	var j int32
	if n := len(m.free); n > 0 {
		j, m.free = m.free[n-1], m.free[:n-1]
		m.store[j] = v
	} else {
		j = int32(len(m.store))
		m.store = append(m.store, v)
	}
	m.index.Put(addr, j)
}

// get is the block at addr, or nil.
func (m *stateBlocks[V]) get(addr uint64) *V {
	if j, ok := m.index.Get(addr); ok {
		return &m.store[j]
	}
	return nil
}

func (m *stateBlocks[V]) delete(addr uint64) {
	if j, ok := m.index.Take(addr); ok {
		var zero V
		m.store[j] = zero // drop its frames
		m.free = append(m.free, j)
	}
}

// sortedKeys is every block's address and place in store, by address.
func (m *stateBlocks[V]) sortedKeys() []addrKey {
	keys := make([]addrKey, 0, m.index.Len())
	m.index.Range(func(addr uint64, j int32) { keys = append(keys, addrKey{addr, j}) })
	sortByAddr(keys)
	return keys
}

// byAddress is every block, by address. It sorts the addresses with their
// places in store and then copies the blocks in that order: sorting the
// blocks themselves moved 56 bytes a swap (400k blocks: 150 ms).
func (m *stateBlocks[V]) byAddress() []V {
	keys := m.sortedKeys()
	out := make([]V, len(keys))
	for k, x := range keys {
		out[k] = m.store[x.j]
	}
	return out
}

// addrKey is a block's address and its place in a store.
type addrKey struct {
	addr uint64
	j    int32
}

// radixMin is the fewest keys sortByAddr sorts by radix.
const radixMin = 1 << 12

// sortByAddr orders keys by address (each distinct). From radixMin keys on
// it sorts by the bits in which the addresses differ, a byte at a time
// (least significant first): a comparison sort of 600k keys took 85 ms,
// most of the allocator state at a cursor.
func sortByAddr(keys []addrKey) {
	if len(keys) < radixMin {
		slices.SortFunc(keys, func(a, b addrKey) int { return cmp.Compare(a.addr, b.addr) })
		return
	}
	lo, hi := keys[0].addr, keys[0].addr
	for _, k := range keys {
		lo, hi = min(lo, k.addr), max(hi, k.addr)
	}
	var diff uint64 // the bits set in some address' offset from lo
	for _, k := range keys {
		diff |= k.addr - lo
	}
	if diff == 0 {
		return
	}
	tmp := make([]addrKey, len(keys))
	src, dst := keys, tmp
	// Blocks are aligned: the low bits that no offset sets are skipped.
	for shift := bits.TrailingZeros64(diff); shift < 64-bits.LeadingZeros64(hi-lo); shift += 8 {
		var at [256]int
		for _, k := range src {
			at[byte((k.addr-lo)>>shift)]++
		}
		sum := 0
		for b, c := range at {
			at[b], sum = sum, sum+c
		}
		for _, k := range src {
			b := byte((k.addr - lo) >> shift)
			dst[at[b]] = k
			at[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}
