package snapshot

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"memscope/internal/par"
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

// TestSortAllocKeys: the radix sort orders keys as one comparison sort
// does (compareAllocKeys), on sizes and addresses of every spread (a
// byte all keys share is skipped, so both sides of that: one value, two,
// every byte differing), negative and extreme sizes, extreme addresses,
// and keys that do not come in the order of at (sorted by comparison).
func TestSortAllocKeys(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	type gen func(i int) int64
	spreads := map[string]gen{
		"one value":  func(int) int64 { return 512 },
		"two values": func(int) int64 { return 512 << rnd.IntN(2) },
		"few":        func(int) int64 { return int64(rnd.IntN(50)) },
		"wide":       func(int) int64 { return rnd.Int64() },
		"signed":     func(int) int64 { return rnd.Int64N(1<<20) - 1<<19 },
		"extremes": func(int) int64 {
			return []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}[rnd.IntN(7)]
		},
	}
	for _, n := range []int{0, 1, 2, 3, 257, 20000} {
		for sizeName, size := range spreads {
			for addrName, addr := range spreads {
				for _, order := range []string{"in order", "shuffled"} {
					in := make([]allocKey, n)
					for i := range in {
						in[i] = allocKey{size: size(i), addr: uint64(addr(i)), at: uint64(3 * i)}
					}
					if order == "shuffled" {
						rnd.Shuffle(n, func(i, j int) { in[i], in[j] = in[j], in[i] })
					}
					want := slices.Clone(in)
					slices.SortFunc(want, compareAllocKeys)
					got := slices.Clone(in)
					sortAllocKeys(got)
					if !slices.Equal(got, want) {
						t.Fatalf("n %d, sizes %s, addresses %s, %s: differs from a comparison sort", n, sizeName, addrName, order)
					}
				}
			}
		}
	}
}

// BenchmarkSortAllocKeys sorts 200k keys of random sizes (multiples of
// 512) at addresses spread over 32 GiB, as a snapshot of 200k active
// blocks gives them, against a comparison sort on every core, merged
// (what the analysis did before).
func BenchmarkSortAllocKeys(b *testing.B) {
	rnd := rand.New(rand.NewPCG(5, 6))
	in := make([]allocKey, 200000)
	for i := range in {
		in[i] = allocKey{size: 512 * int64(1+rnd.IntN(4096)), addr: 139637976727552 + uint64(rnd.IntN(1<<26))<<9, at: uint64(i)}
	}
	work := make([]allocKey, len(in))
	b.Run("radix", func(b *testing.B) {
		for b.Loop() {
			copy(work, in)
			sortAllocKeys(work)
		}
	})
	b.Run("comparison", func(b *testing.B) {
		for b.Loop() {
			copy(work, in)
			half := len(work) / 2
			par.Each(2, func(p int) { slices.SortFunc(work[p*half:(p+1)*half], compareAllocKeys) })
			merged := make([]allocKey, len(work))
			i, j := 0, half
			for k := range merged {
				if j == len(work) || i < half && compareAllocKeys(work[i], work[j]) <= 0 {
					merged[k], i = work[i], i+1
				} else {
					merged[k], j = work[j], j+1
				}
			}
		}
	})
}

// TestHistBuckets: sizes on both sides of every power of two, the largest
// int64 and sizes of 0 or less land in the bucket whose [Lo, 2*Lo) holds
// them (Lo 0 for the latter), ascending, empty buckets left out.
func TestHistBuckets(t *testing.T) {
	var sizes []int64
	for k := range 63 {
		p := int64(1) << k
		sizes = append(sizes, p-1, p, p+1)
	}
	sizes = append(sizes, math.MaxInt64, 0, -5, math.MinInt64)
	var h histBuckets
	want := map[int64]Bucket{}
	for _, s := range sizes {
		h.add(s)
		lo := int64(0)
		for p := int64(1); s > 0 && p > 0 && p <= s; p <<= 1 {
			lo = p
		}
		b := want[lo]
		b.Lo, b.Count, b.Bytes = lo, b.Count+1, b.Bytes+s
		want[lo] = b
	}
	got := h.histogram()
	if len(got) != len(want) {
		t.Fatalf("%d buckets, want %d", len(got), len(want))
	}
	for i, b := range got {
		if i > 0 && got[i-1].Lo >= b.Lo {
			t.Fatalf("buckets out of order at %d: %v", i, got)
		}
		if w := want[b.Lo]; b != w {
			t.Errorf("bucket %d: %+v, want %+v", b.Lo, b, w)
		}
	}
}

// TestAllocationsInOrder: the analysis lists the active blocks largest
// first, ties by address, each with its segment's facts and its frames or,
// for a block without frames, those of the last alloc at its address in
// the trace; on one goroutine and on several (both sides of
// allocsPerWorker), over segments of many sizes.
func TestAllocationsInOrder(t *testing.T) {
	table := cycledFrames([]string{"/ws/model.py", "/ws/train.py"}, []string{"forward", "step"}, 100)
	for _, n := range []int{1, allocsPerWorker - 1, 3*allocsPerWorker + 5} {
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		s := &Snapshot{}
		var trace []TraceEntry
		type want struct {
			size      int64
			addr      uint64
			seg       uint64
			frame     uint32 // the first frame's id, or 1<<31 for none
			fromTrace bool
		}
		var wants []want
		addr := uint64(1 << 40)
		for len(wants) < n {
			seg := Segment{Address: addr, Stream: uint64(len(s.Segments)), Type: "large"}
			for range 1 + rng.IntN(40) {
				b := Block{Address: addr, Size: 512 * int64(1+rng.IntN(8)), State: StateActiveAllocated}
				if rng.IntN(5) == 0 {
					b.State = StateInactive
				}
				w := want{size: b.Size, addr: b.Address, seg: seg.Stream, frame: 1 << 31}
				switch rng.IntN(3) {
				case 0:
					id := uint32(rng.IntN(100))
					b.Stack, w.frame = s.AddStack(NewStack(table, []uint32{id})), id
				case 1: // none of its own: the trace's last alloc at its address
					for k := range 2 {
						id := uint32(rng.IntN(100))
						st := s.AddStack(NewStack(table, []uint32{id}))
						trace = append(trace, TraceEntry{Addr: b.Address, Size: b.Size, Stack: st}.With(ActionAlloc))
						if k == 1 {
							w.frame, w.fromTrace = id, true
						}
					}
				}
				seg.Blocks = append(seg.Blocks, b)
				seg.TotalSize += b.Size
				addr += uint64(b.Size)
				if b.State == StateActiveAllocated && len(wants) < n {
					wants = append(wants, w)
				} else if b.State == StateActiveAllocated {
					seg.Blocks = seg.Blocks[:len(seg.Blocks)-1] // n exactly
				}
			}
			s.Segments = append(s.Segments, seg)
		}
		s.Traces = [][]TraceEntry{trace}
		slices.SortFunc(wants, func(x, y want) int {
			if x.size != y.size {
				return cmp.Compare(y.size, x.size)
			}
			return cmp.Compare(x.addr, y.addr)
		})
		got := Analyze(s, nil).Devices[0].Allocations
		if len(got) != n {
			t.Fatalf("%d blocks: %d allocations", n, len(got))
		}
		for i, a := range got {
			w := wants[i]
			frame := uint32(1 << 31)
			if a.Frames.Len() > 0 {
				frame = a.Frames.ID(0)
			}
			if a.Size != w.size || a.Address != w.addr || a.Stream != w.seg || frame != w.frame || a.FramesFromTrace != w.fromTrace {
				t.Fatalf("%d blocks, allocation %d: size %d addr %#x stream %d frame %d from trace %v; want %+v",
					n, i, a.Size, a.Address, a.Stream, frame, a.FramesFromTrace, w)
			}
		}
	}
}

// TestLastAllocFrames: read from the trace's end and stopping once every
// address is found, lastAllocFrames gives each wanted address what a
// forward pass gives: the frames of its last alloc that has a stack,
// whatever came after it (frees, allocs without a stack), a stack the
// snapshot lacks deciding as an empty one, and nothing for an address
// never allocated; with every address found early, late in the trace or
// never, and an address the filter passes but that is not wanted.
func TestLastAllocFrames(t *testing.T) {
	table := cycledFrames([]string{"/ws/a.py"}, []string{"f"}, 8)
	actions := []Action{ActionAlloc, ActionAlloc, ActionFreeRequested, ActionFreeCompleted, ActionSegmentAlloc}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		s := &Snapshot{}
		for id := range uint32(4) {
			s.AddStack(NewStack(table, []uint32{id}))
		}
		trace := make([]TraceEntry, rng.IntN(60))
		for i := range trace {
			e := TraceEntry{Addr: uint64(rng.IntN(10)), Stack: uint32(rng.IntN(6))} // 5: not in the snapshot
			trace[i] = e.With(actions[rng.IntN(len(actions))])
		}
		// The forward pass: every alloc with a stack, the last one kept.
		last := map[uint64]Stack{}
		for i := range trace {
			if e := &trace[i]; e.Action() == ActionAlloc && e.Stack != 0 {
				last[e.Addr] = s.FramesOf(e)
			}
		}
		want := map[uint64]lastAlloc{}
		for range rng.IntN(12) {
			want[uint64(rng.IntN(12))] = lastAlloc{} // 10, 11: never allocated
		}
		// An address the filter lets through (its bit is a wanted one's)
		// but not wanted, allocated last: it changes nothing.
		for a := range want {
			for other := a + 1; ; other++ {
				if wantFilterHash(other) == wantFilterHash(a) {
					if _, ok := want[other]; !ok {
						trace = append(trace, TraceEntry{Addr: other, Stack: 1}.With(ActionAlloc))
					}
					break
				}
			}
			break
		}
		lastAllocFrames(trace, want)
		for addr, got := range want {
			w, ok := last[addr]
			if gf := s.StackOf(got.stack); got.found != ok || gf.Len() != w.Len() || w.Len() > 0 && gf.ID(0) != w.ID(0) {
				t.Fatalf("seed %d, address %d: %+v; want %v found %v", seed, addr, got, w, ok)
			}
		}
	}
}

// BenchmarkLastAllocFrames: 1,000 active blocks without frames, half of
// them allocated in a trace of 1M entries over 50k addresses (what a
// caching allocator reuses) and half before it; "forward" is the map of
// every alloc's address the analysis made before, for the ratio.
func BenchmarkLastAllocFrames(b *testing.B) {
	table := cycledFrames([]string{"/ws/a.py"}, []string{"f"}, 64)
	s := &Snapshot{}
	for id := range uint32(64) {
		s.AddStack(NewStack(table, []uint32{id}))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	trace := make([]TraceEntry, 1<<20)
	for i := range trace {
		e := TraceEntry{Addr: uint64(rng.IntN(50000)) << 9, Stack: uint32(1 + rng.IntN(64))}
		trace[i] = e.With([]Action{ActionAlloc, ActionFreeCompleted}[i%2])
	}
	b.Run("backward", func(b *testing.B) {
		for b.Loop() {
			want := make(map[uint64]lastAlloc, 1000)
			for k := range 1000 {
				want[uint64(k*50)<<9|uint64(k%2)] = lastAlloc{} // odd: never allocated
			}
			lastAllocFrames(trace, want)
		}
	})
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			m := map[uint64]Stack{}
			for i := range trace {
				if e := &trace[i]; e.Action() == ActionAlloc && e.Stack != 0 {
					m[e.Addr] = s.FramesOf(e)
				}
			}
		}
	})
}
