package snapshot

import (
	"cmp"
	"runtime"
	"slices"

	"memscope/internal/pages"
	"memscope/internal/par"
)

// Analyze computes per-device statistics. cat may be nil for the default
// rules.
func Analyze(s *Snapshot, cat *Categorizer) *Analysis {
	if cat == nil {
		cat = NewCategorizer(nil)
	}
	a := &Analysis{Snapshot: s, cat: cat, timelines: map[int]*Timeline{}}
	var share *stackShare
	if tracedDevices(s) > 1 {
		share = &stackShare{}
	}
	for _, d := range s.Devices() {
		// The free memory at the peak undoes every event after it (18
		// ms on bigtrain): measured on another core from the moment the
		// peak is known, while the replay reads the peak's live set and
		// the device's figures are measured.
		var bg par.Group
		var state peakFree
		tl := replay(s, d, cat, share, func(tl *Timeline) {
			at := tl.Peak.EventIndex
			bg.Go(func() { state.free, state.largest, state.externalPct = tl.FreeAt(s, at) })
		})
		a.timelines[d] = tl
		a.Devices = append(a.Devices, analyzeDevice(s, d, cat, tl, func() peakFree {
			bg.Wait()
			return state
		}))
	}
	return a
}

// tracedDevices is the number of s's devices with trace entries.
func tracedDevices(s *Snapshot) int {
	n := 0
	for _, d := range s.Devices() {
		if len(s.Trace(d)) > 0 {
			n++
		}
	}
	return n
}

// peakFree is the free memory at a timeline's peak (see Timeline.FreeAt).
type peakFree struct {
	free, largest int64
	externalPct   float64
}

// analyzeDevice measures device dev; peakState waits for the free memory
// at tl's peak (zero without a timeline).
func analyzeDevice(s *Snapshot, dev int, cat *Categorizer, tl *Timeline, peakState func() peakFree) DeviceStats {
	st := DeviceStats{Device: dev}
	// The stages, the leak check and the frees that waited only read the
	// timeline (25 ms on bigtrain): on another core while the blocks are
	// measured.
	var bg par.Group
	if tl != nil {
		bg.Go(func() {
			st.Stages = tl.Stages(s.Annotations)
			st.Steps, st.HasSteps = StepsOf(st.Stages)
			st.Leaks = tl.LeakSuspects(st.Steps)
			st.Pending = tl.PendingFrees()
		})
	}
	trace := s.Trace(dev)
	// The active blocks, by their keys: the allocations are made once the
	// keys are sorted, each at its place (see allocsort.go).
	keys := make([]allocKey, 0, activeBlocks(s, dev))
	// The addresses of active blocks without frames of its own: each
	// takes those of the last alloc at it in the trace.
	var frameless map[uint64]lastAlloc
	pools := map[string]*PoolStats{}
	var allFree int64
	var activeHist, inactiveHist histBuckets
	for si := range s.Segments {
		seg := &s.Segments[si]
		if seg.Device != dev {
			continue
		}
		st.Segments++
		st.ReservedBytes += seg.TotalSize
		pool := seg.Type
		if seg.Private() {
			pool = "private"
		}
		if pool == "" {
			pool = "large"
		}
		p := pools[pool]
		if p == nil {
			p = &PoolStats{Name: pool}
			pools[pool] = p
		}
		p.Segments++
		p.Reserved += seg.TotalSize
		segActive := false
		var segFree int64
		segFreeBlocks, segSmallFree := 0, 0
		for bi := range seg.Blocks {
			b := &seg.Blocks[bi]
			st.Blocks++
			switch b.State {
			case StateActiveAllocated:
				st.AllocatedBytes += b.Size
				st.RequestedBytes += b.RequestedSize
				st.RoundingWaste += b.Size - b.RequestedSize
				p.Allocated += b.Size
			case StateActivePendingFree:
				st.PendingFreeBytes += b.Size
			case StateInactive:
				st.InactiveBytes += b.Size
				st.InactiveBlocks++
				inactiveHist.add(b.Size)
				segFree += b.Size
				segFreeBlocks++
				if b.Size < 1<<20 {
					segSmallFree++
				}
				if b.Size > st.LargestFreeBlock {
					st.LargestFreeBlock = b.Size
				}
				continue
			default:
				st.OtherStateBytes += b.Size
				continue
			}
			segActive = true
			st.ActiveBlocks++
			activeHist.add(b.Size)
			keys = append(keys, allocKey{size: b.Size, addr: b.Address, at: uint64(si)<<32 | uint64(bi)})
			if b.Stack == 0 && len(trace) > 0 {
				if frameless == nil {
					frameless = map[uint64]lastAlloc{}
				}
				frameless[b.Address] = lastAlloc{}
			}
		}
		if segFreeBlocks > 0 {
			st.Fragmentation.SegmentsWithFree++
		}
		if segActive {
			st.Fragmentation.FreeInUsedSegments += segFree
			st.Fragmentation.SmallFreeBlocks += segSmallFree
		} else {
			st.Fragmentation.FreeInEmptySegments += segFree
		}
		allFree += segFree
	}
	st.ActiveHist, st.InactiveHist = activeHist.histogram(), inactiveHist.histogram()
	st.ActiveBytes = st.AllocatedBytes + st.PendingFreeBytes
	if st.ReservedBytes > 0 {
		st.EfficiencyPct = 100 * float64(st.AllocatedBytes) / float64(st.ReservedBytes)
	}
	st.Rating = Rating(st.EfficiencyPct, st.ReservedBytes)
	if allFree > 0 {
		st.Fragmentation.ExternalPct = 100 * (1 - float64(st.LargestFreeBlock)/float64(allFree))
	}
	for _, name := range []string{"large", "small", "private"} {
		if p := pools[name]; p != nil {
			st.Pools = append(st.Pools, *p)
			delete(pools, name)
		}
	}
	// Other segment types after the known ones, by name: map order must
	// never decide the output.
	rest := make([]string, 0, len(pools))
	for name := range pools {
		rest = append(rest, name)
	}
	slices.Sort(rest)
	for _, name := range rest {
		st.Pools = append(st.Pools, *pools[name])
	}

	var refs []uint32
	st.Allocations, refs = allocationsOf(s, trace, keys, frameless)
	g := groupStacks(refs, len(s.Stacks))
	categorize(st.Allocations, cat, g)
	assignRoles(st.Allocations, tl, cat, g)
	st.Categories = CategoryTotals(st.Allocations, cat)
	st.Roles = RoleTotals(st.Allocations)

	st.TraceEntries = len(trace)
	analyzeTrace(s, trace, tl, &st)
	peakRoles := st.Roles
	if tl != nil {
		// While the stages and the leak check may still run: this
		// goroutine only waited for them (3-4 ms on the 217 MiB pool).
		peakRoles = tl.PeakRoles()
	}
	bg.Wait()
	st.Peak = peakStats(&st, tl, peakState())
	st.Peak.Roles = peakRoles
	st.Recommendations = recommend(s, &st)
	return st
}

// CategoryTotals sums allocations by category, largest first, in the
// categorizer's order on ties.
func CategoryTotals(allocs []Allocation, cat *Categorizer) []CategoryTotal {
	idx := map[string]int{}
	var out []CategoryTotal
	for _, a := range allocs {
		i, ok := idx[a.Category]
		if !ok {
			i = len(out)
			idx[a.Category] = i
			out = append(out, CategoryTotal{Name: a.Category})
		}
		out[i].Bytes += a.Size
		out[i].Blocks++
	}
	sortCategoryTotals(out, cat)
	return out
}

// sortCategoryTotals orders totals as CategoryTotals does: largest first,
// in the categorizer's order on ties.
func sortCategoryTotals(out []CategoryTotal, cat *Categorizer) {
	order := map[string]int{}
	for i, n := range cat.Names() {
		order[n] = i
	}
	slices.SortFunc(out, func(x, y CategoryTotal) int {
		if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(order[x.Name], order[y.Name])
	})
}

// allocationsOf makes the allocation of each active block keys name (by
// segment and block index in at), largest first, ties by address so the
// order is stable across runs. A block without frames of its own (its
// address in frameless) takes those of the last alloc at its address in
// trace. refs holds each allocation's stack as a TraceEntry.Stack or
// Block.Stack names it (0: none), for groupStacks.
func allocationsOf(s *Snapshot, trace []TraceEntry, keys []allocKey, frameless map[uint64]lastAlloc) (out []Allocation, refs []uint32) {
	procs := runtime.GOMAXPROCS(0)
	// The allocations are made on every core, each reading its block
	// where it lies, in the order of sizes: on one core those scattered
	// reads were 29 ms of a snapshot of 300k blocks.
	sortAllocKeys(keys)
	lastAllocFrames(trace, frameless)
	out = make([]Allocation, len(keys))
	refs = make([]uint32, len(keys))
	pages.Populate(out)
	workers := min(procs, max(1, len(out)/allocsPerWorker))
	par.Each(workers, func(w int) {
		for i := w * len(out) / workers; i < (w+1)*len(out)/workers; i++ {
			at := keys[i].at
			seg := &s.Segments[at>>32]
			b := &seg.Blocks[uint32(at)]
			ref, fromTrace := b.Stack, false
			if ref == 0 && frameless != nil {
				ref = frameless[b.Address].stack
				fromTrace = ref != 0
			}
			frames := s.StackOf(ref)
			if frames.Len() == 0 {
				ref, fromTrace = 0, false
			}
			refs[i] = ref
			out[i] = Allocation{
				Address: b.Address, Size: b.Size, RequestedSize: b.RequestedSize, State: b.State,
				Frames: frames, FramesFromTrace: fromTrace,
				Stream: seg.Stream, SegmentAddress: seg.Address, PrivatePool: seg.Private(),
			}
		}
	})
	return out, refs
}

// allocsPerWorker is the fewest allocations worth a goroutine of their own.
const allocsPerWorker = 1 << 14

// wantFilterBits is the size of lastAllocFrames' filter: 2 KiB, about one
// false match in 16 allocs for 1,000 blocks without frames.
const (
	wantFilterLog  = 14
	wantFilterBits = 1 << wantFilterLog
)

func wantFilterHash(addr uint64) uint64 { return addr * 0x9E3779B97F4A7C15 >> (64 - wantFilterLog) }

// lastAlloc is what lastAllocFrames found at an address: the stack of
// its last alloc event that has one, as TraceEntry.Stack names it (found
// set, stack maybe 0).
type lastAlloc struct {
	stack uint32
	found bool
}

// lastAllocFrames finds, for each address of want, the stack of the last
// alloc event at it that has a stack. The trace is read from its end and
// only as far as the last address found. A map of every alloc's address,
// as this was, took 23 ms of a 1M-entry trace for the few blocks that
// need one; this takes 3 ms with half of 1,000 never found
// (BenchmarkLastAllocFrames).
func lastAllocFrames(trace []TraceEntry, want map[uint64]lastAlloc) {
	// A bit per hash of the wanted addresses spares most allocs the map:
	// a block allocated before the trace is never found, and the whole
	// trace is read for it.
	var filter [wantFilterBits / 64]uint64
	for addr := range want {
		h := wantFilterHash(addr)
		filter[h/64] |= 1 << (h % 64)
	}
	left := len(want)
	for i := len(trace) - 1; i >= 0 && left > 0; i-- {
		e := &trace[i]
		if e.Action() != ActionAlloc || e.Stack == 0 {
			continue
		}
		if h := wantFilterHash(e.Addr); filter[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		if a, ok := want[e.Addr]; ok && !a.found {
			want[e.Addr] = lastAlloc{stack: e.Stack, found: true}
			left--
		}
	}
}

func analyzeTrace(s *Snapshot, trace []TraceEntry, tl *Timeline, st *DeviceStats) {
	oom := func(i int) {
		e := &trace[i]
		st.OOMs = append(st.OOMs, OOMEvent{Index: i, Size: e.Size, DeviceFree: s.ExtraOf(e).DeviceFree, TimeUS: e.TimeUS, Frames: s.FramesOf(e)})
	}
	if tl != nil {
		// The replay marked them, in order (a pass over the trace fewer).
		for _, m := range tl.Markers {
			if m.Kind == MarkOOM {
				oom(m.Index)
			}
		}
	} else {
		for i := range trace {
			if trace[i].Action() == ActionOOM {
				oom(i)
			}
		}
	}
	if tl != nil {
		// Frees of allocations the trace never saw, as the replay counted
		// them.
		st.FreesBeforeWindow = tl.freesBefore
	}
	set := &s.Settings
	switch {
	case set.TraceOverflowedKnown && set.TraceOverflowed:
		st.TraceTruncated = true
		st.TruncationReason = "the allocator reports that the trace ring buffer overflowed"
	case set.TraceMaxEntries > 0 && int64(len(trace)) >= set.TraceMaxEntries:
		st.TraceTruncated = true
		st.TruncationReason = "the trace holds exactly trace_alloc_max_entries entries: the ring buffer is full and older events were dropped"
	case !set.TraceOverflowedKnown && st.FreesBeforeWindow > 0 && len(trace) > 0:
		st.TraceTruncated = true
		st.TruncationReason = "the trace frees memory it never saw allocated: recording started late or the ring buffer dropped older events"
	}
}

// peakStats describes the device at the peak of the timeline, or at the
// snapshot when there is no trace (memory_viz then draws a flat line at the
// active blocks' requested bytes).
// peakStats measures the peak; state is the allocator state there (nil
// without a trace).
func peakStats(st *DeviceStats, tl *Timeline, state peakFree) PeakStats {
	var p PeakStats
	if tl == nil {
		p = PeakStats{Active: st.RequestedBytes, Reserved: st.ReservedBytes, EventIndex: -1,
			Free: st.InactiveBytes, LargestFree: st.LargestFreeBlock, ExternalPct: st.Fragmentation.ExternalPct}
	} else {
		p = PeakStats{FromTrace: true, Active: tl.Peak.Active, Reserved: tl.Peak.Reserved,
			EventIndex: tl.Peak.EventIndex, TimeUS: tl.Peak.TimeUS}
		p.Free, p.LargestFree, p.ExternalPct = state.free, state.largest, state.externalPct
	}
	if p.Reserved > 0 {
		p.EfficiencyPct = 100 * float64(p.Active) / float64(p.Reserved)
	}
	p.Rating = Rating(p.EfficiencyPct, p.Reserved)
	return p
}

// PeakTop returns PeakLive's n largest (all for n <= 0) without making the
// rest.
func (a *Analysis) PeakTop(d *DeviceStats, n int) []Allocation {
	if tl := a.Timeline(d.Device); tl != nil {
		return tl.PeakTop(n)
	}
	if n <= 0 {
		return a.PeakLive(d)
	}
	// Without a trace: the n largest requested sizes among the active
	// blocks, kept in order as they are met. A snapshot of 200k of them
	// copied every one to show ten (135 MB allocated as append grew the
	// copy).
	top := make([]Allocation, 0, min(n, len(d.Allocations)))
	for _, al := range d.Allocations {
		if al.State != StateActiveAllocated || len(top) == n && peakOrder(al, top[n-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, al, peakOrder)
		if len(top) == n {
			top = top[:n-1]
		}
		top = slices.Insert(top, i, al)
	}
	for i := range top {
		top[i].Size = top[i].RequestedSize
	}
	return top
}

// peakOrder is PeakLive's order without a trace: largest requested size
// first, then by address (as the active blocks are ordered on equal size).
func peakOrder(x, y Allocation) int {
	if c := cmp.Compare(y.RequestedSize, x.RequestedSize); c != 0 {
		return c
	}
	return cmp.Compare(x.Address, y.Address)
}

// PeakCategories sums PeakLive by category (CategoryTotals) without making
// it.
func (a *Analysis) PeakCategories(d *DeviceStats) []CategoryTotal {
	if tl := a.Timeline(d.Device); tl != nil {
		return tl.PeakCategories()
	}
	return CategoryTotals(a.PeakLive(d), a.cat)
}

// PeakLive returns what was live on device d at its peak: the trace's live
// set where there is a trace, else the active blocks at their requested
// size (memory_viz draws a snapshot without a trace as a flat line at
// those). The slice is shared; callers must not modify it.
func (a *Analysis) PeakLive(d *DeviceStats) []Allocation {
	if tl := a.Timeline(d.Device); tl != nil {
		return tl.PeakLive()
	}
	n := 0
	for i := range d.Allocations {
		if d.Allocations[i].State == StateActiveAllocated {
			n++
		}
	}
	out := make([]Allocation, 0, n) // sized at once: see LiveAt
	for _, al := range d.Allocations {
		if al.State == StateActiveAllocated {
			out = append(out, al)
		}
	}
	// Largest first by the size shown, the requested one: the blocks are
	// in order of block size, which rounding and unsplit blocks reorder.
	slices.SortFunc(out, peakOrder)
	for i := range out {
		out[i].Size = out[i].RequestedSize
	}
	return out
}

// Categorized returns a with the category the rules decide for its frames.
func (c *Categorizer) Categorized(a Allocation) Allocation {
	d := c.Decide(a.Frames)
	a.Category, a.CategoryFrame, a.CategoryKeyword = d.Category, int32(d.Frame), d.Keyword
	return a
}

// stackGroups says which allocations share a stack: which[i] is
// allocation i's group (-1: no frames), first[g] group g's first
// allocation.
type stackGroups struct{ which, first []int32 }

// groupStacks groups allocations by stack, once for both categorize and
// assignRoles: refs[i] is allocation i's stack as a TraceEntry.Stack or
// Block.Stack names it (0: none), below n+1. The binder interns stacks, so
// one number is one stack. Keyed by the stacks' ids in a hash table, 200k
// blocks on distinct stacks took 16 ms and 13 MB of tables grown by
// doubling; by number it is an array of n.
func groupStacks(refs []uint32, n int) stackGroups {
	groupOf := make([]int32, n+1) // 1 + the group, by stack number
	g := stackGroups{which: make([]int32, len(refs))}
	for i, r := range refs {
		if r == 0 || int(r) > n {
			g.which[i] = -1
			continue
		}
		j := groupOf[r]
		if j == 0 {
			g.first = append(g.first, int32(i))
			j = int32(len(g.first))
			groupOf[r] = j
		}
		g.which[i] = j - 1
	}
	return g
}

// categorize sets each allocation's category, as Categorized does, on
// every core for many (see decideAll): a snapshot of 200k active blocks on
// distinct stacks spent 80 ms deciding them one by one. Each group of g
// is decided once: a real snapshot's blocks share the stacks of a few
// thousand call sites, and a generated one of 300k live blocks over 5,000
// stacks spent 140 ms of CPU deciding each block's stack again.
func categorize(allocs []Allocation, cat *Categorizer, g stackGroups) {
	hits := cat.decideAll(len(g.first), func(i int) Stack { return allocs[g.first[i]].Frames })
	none := cat.decision(stackHit{rule: -1, frame: -1})
	for i := range allocs {
		d := none
		if j := g.which[i]; j >= 0 {
			d = cat.decision(hits[j])
		}
		allocs[i].Category, allocs[i].CategoryFrame, allocs[i].CategoryKeyword = d.Category, int32(d.Frame), d.Keyword
	}
}

// assignRoles sets the role of the snapshot's active blocks: the role the
// timeline gave the allocation still open at each block's address, or,
// without a trace (or for a block the trace never saw), the role its stack
// gives an allocation alive at the dump, decided once for each group of g
// with the frames' facts in arrays by frame id, as the timeline's roles
// are: without a trace, 200k blocks on distinct stacks spent 90 ms here
// in a Go map by stack.
func assignRoles(allocs []Allocation, tl *Timeline, cat *Categorizer, g stackGroups) {
	var open *addrMap
	if tl != nil {
		// The open intervals by address, in the replay's open-addressing
		// table: a Go map of 400k was 60 ms of a snapshot's analysis.
		open = newAddrMap(len(allocs))
		n := int32(len(tl.Events))
		for j := range tl.Intervals {
			if iv := &tl.Intervals[j]; iv.End == n {
				open.Put(iv.Addr, int32(j)) // the last open at an address, as the map kept
			}
		}
	}
	c := newRoleClassifier(cat)
	if len(g.first) > 0 {
		c.useTable(allocs[g.first[0]].Frames.Table())
	}
	roles := make([]Role, len(g.first)) // by group; RoleUnknown until decided
	decided := make([]bool, len(g.first))
	for i := range allocs {
		a := &allocs[i]
		if open != nil {
			if j, ok := open.Get(a.Address); ok {
				a.Role = tl.Role(int(j))
				continue
			}
		}
		j := g.which[i]
		if j < 0 {
			a.Role = c.decide(&c.empty, lifetime{alive: true})
			continue
		}
		if !decided[j] {
			var t stackTraits
			c.read(allocs[g.first[j]].Frames, &t)
			roles[j], decided[j] = c.decide(&t, lifetime{alive: true}), true
		}
		a.Role = roles[j]
	}
}

// activeBlocks counts device dev's active blocks (allocated or pending
// free): what the analysis keeps one record of each for.
func activeBlocks(s *Snapshot, dev int) int {
	n := 0
	for si := range s.Segments {
		if seg := &s.Segments[si]; seg.Device == dev {
			for bi := range seg.Blocks {
				if seg.Blocks[bi].State.Active() {
					n++
				}
			}
		}
	}
	return n
}
