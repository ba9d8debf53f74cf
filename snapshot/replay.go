package snapshot

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"

	"memscope/internal/pages"
	"memscope/internal/par"
	"memscope/internal/units"
)

// Interval is the life of one allocation within the trace window, in event
// indices, as memory_viz's Active Memory Timeline counts it: it is live after
// event Start (-1: before the window) until event End (len(events): still
// live at the end). End is the allocation's free_completed; a free_requested
// immediately followed by its completion is one free at the free_requested.
type Interval struct {
	Start, End int32
	// FreeRequested is the free_requested that preceded End (equal to End for
	// an immediate free), or -1 when there was none. FreeRequested < End means
	// the free waited on another stream (record_stream); with End at the end
	// of the trace, that it was still waiting there.
	FreeRequested int32
	// Stack is the number of its frames in the snapshot's stacks
	// (TraceEntry.Stack or, for a block alive before the trace,
	// Block.Stack; 0 for none, and for a number past them: see
	// Timeline.stackNumber), so what is known of each distinct stack is
	// read by index, not hashed per interval.
	Stack uint32
	// Size is the requested size: the trace entry's size, or the block's
	// requested_size for blocks alive before the window.
	Size int64
	Addr uint64
	// FreeStack is the stack number of the free (the event at FreeRequested,
	// or at End without one; 0 when none): the role rules read it for every
	// interval, and looking it up in a million events missed the cache.
	FreeStack uint32
}

// PreWindow reports whether the allocation happened before the trace
// began (a free with no alloc, or an active block with no alloc): its
// Start is -1. A method, not a field: an interval is 40 bytes without it,
// 48 with (the frame pool's 450k intervals, read in every pass of the
// analysis).
func (iv *Interval) PreWindow() bool { return iv.Start < 0 }

// MarkerKind is the kind of a timeline marker.
type MarkerKind uint8

// Marker kinds.
const (
	MarkOOM MarkerKind = iota
	MarkSnapshot
	MarkAnnotation
)

// Marker is a labelled point of the timeline.
type Marker struct {
	Index int // the event it sits at
	Kind  MarkerKind
	Label string
}

// Peak is the highest active memory of a timeline and what was live then.
type Peak struct {
	// Active is the peak of the active series (memory_viz's max_size, or the
	// level at the start of the window when that is higher).
	Active int64
	// EventIndex is the raw trace index of the first event after which the
	// peak is reached; -1 when the peak is the level before the first event.
	EventIndex int
	TimeUS     int64
	// Reserved is the reserved memory right after that event: the final
	// segments with every later segment event undone.
	Reserved int64
	// EfficiencyPct is Active over Reserved at the peak.
	EfficiencyPct float64
}

// Timeline is a device's memory rebuilt from the allocator trace. It is the
// one replay of the program: every view, report, diff and plot reads it.
type Timeline struct {
	Device int
	Events []TraceEntry
	// Active holds memory_viz's active memory after each event: requested
	// sizes, from alloc to free_completed. The reserved bytes after each
	// event are ReservedAt's (or ReservedRange's): they change only at
	// segment events, a few hundred in a million, so they are kept as
	// steps (reserved).
	Active   []int64
	reserved []reservedStep
	// freesBefore counts the frees of allocations made before the trace
	// (intervals from before the window that end inside it).
	freesBefore int
	// stackDecs holds 1 + the index in decs of each stack's category
	// decision, by stack number less one (0: not decided yet); see
	// decisionOf. decCat is each decision's category's index in catNames.
	stackDecs []int32
	decs      []Decision
	decIndex  map[Decision]int32
	// stackTraits, when set, waits for the traits of every stack the
	// replay began reading (see classifyRolesBy).
	stackTraits func() []stackTraits
	// share, when set, holds the stacks' traits and sites for every
	// device of the snapshot (see stackShare).
	share      *stackShare
	hitIndices map[stackHit]int32
	decCat     []int32
	catNames   []string
	// peakLevel and peakAt are the highest active level and its first
	// event, as fillSeries' sums found them (see findPeakLevel).
	peakLevel int64
	peakAt    int
	// treeNames keeps LiveTree's sites between calls (a cursor's moves).
	treeNames *siteNames
	// decMu serializes the queries that decide categories (LiveAt,
	// LiveStats): PeakLive may be asked from another goroutine than the
	// cursor's.
	decMu sync.Mutex
	// peakLive is PeakLive's, made at its first call.
	peakOnce sync.Once
	peakLive []Allocation
	// liveSelectMax overrides liveSelectMax when positive (tests), and
	// liveStepMax liveStepMax when not 0 (-1: always sweep).
	liveSelectMax, liveStepMax int
	// stats are the totals of the last LiveStats query.
	stats liveTotals
	// BaseActive and BaseReserved are the levels before the first event.
	BaseActive   int64
	BaseReserved int64
	Intervals    []Interval
	Markers      []Marker
	Peak         Peak
	// EndActive is the replayed active memory after the last event;
	// SnapshotActive the requested bytes of the snapshot's active blocks that
	// memory_viz counts. They match when the trace and the snapshot agree.
	EndActive      int64
	SnapshotActive int64
	// Complete is set when the trace covers the whole run: no allocation
	// predates the window, and the allocations alive at the end are exactly
	// the snapshot's active blocks.
	Complete bool
	// Note says how far the timeline can be trusted, in words.
	Note string
	// ReservedFromTrace is set when the trace records segment events;
	// otherwise Reserved is flat at the snapshot's reserved memory.
	ReservedFromTrace bool
	cat               *Categorizer
	// stacks are the snapshot's call stacks, which events and blocks
	// refer to.
	stacks []Stack
	// siteID holds the site of each stack (by stack number less one; set
	// with the roles) as a number: siteName and siteIndex turn it into its
	// text and back. Site 0 is noStack.
	siteID    []int32
	siteName  []string
	siteIndex siteLookup
	// roles is the role of each interval (see Role).
	roles []Role
	// bySize orders the intervals by size for LiveAt's large live sets;
	// starts and ends copy their bounds for a cache-friendly scan.
	bySize, starts, ends []int32
	sizeOnce, boundsOnce sync.Once
	// liveSortMax replaces the constant of that name in tests (0: the
	// constant).
	liveSortMax int
	// ordersOnce builds, for every grouping of Bands, the intervals
	// ordered by start and by end event (they do not depend on the
	// grouping; a million intervals take a tenth of a second to sort).
	ordersOnce           sync.Once
	startOrder, endOrder []int32
}

// Replay rebuilds active and reserved memory over the trace of one device,
// with the semantics of memory_viz's process_alloc_data:
//   - an alloc opens an allocation at its address (an alloc at an address
//     already open replaces it in the address map, and the old one stays live
//     to the end, as in memory_viz);
//   - a free_completed, or a free_requested immediately followed by its
//     free_completed, closes the allocation open at its address, or, when
//     none is open, is an allocation made before the window (its size is the
//     free's); a lone free_requested closes nothing;
//   - active_allocated blocks of the final segments whose address is not open
//     at the end were allocated before the window (requested_size).
//
// Reserved memory is anchored on the final segments: every later
// segment_alloc/free/map/unmap is undone. It returns nil when the device has
// no trace.
func Replay(s *Snapshot, dev int, cat *Categorizer) *Timeline { return replay(s, dev, cat, nil, nil) }

// replay is Replay; atPeak, when set, is called as soon as the peak is
// known, while the roles may still be classified on another goroutine and
// before the peak's live set is read: what it starts may read the events
// and the peak, nothing else of the timeline.
// intervalRoom is the capacity replay gives the intervals, and how many of
// them it maps ahead. Every allocation starts one, and so does every free
// of an allocation the trace did not see, and every active block the trace
// did not open. Each allocation the trace leaves open at the end is an
// active block in a consistent snapshot, so at least allocs-active frees
// close the trace's own. That bound (room) also holds where the snapshot's
// blocks leave out what the trace left open. Room for fewer grew and
// copied 16 MB where a snapshot of 200k blocks has a trace that frees 200k
// others (and a collection started in the copy); room for every free
// mapped pages that the usual trace, whose frees close its own
// allocations, never writes (poollive: 8 MiB more RSS).
//
// In a consistent snapshot each interval ends at a free or is an active
// block at the end: frees+active of them (or allocs, where a trace without
// segments never frees). Only those are mapped ahead; pages past them stay
// untouched unless written. A snapshot that breaks both rules (an address
// allocated twice) still replays right, growing.
func intervalRoom(allocs, frees, active int) (room, likely int) {
	room = allocs + min(frees, max(0, frees-allocs+active)) + active + 64
	return room, min(room, max(frees+active, allocs)+64)
}

func replay(s *Snapshot, dev int, cat *Categorizer, share *stackShare, atPeak func(*Timeline)) *Timeline {
	events := s.Trace(dev)
	if len(events) == 0 {
		return nil
	}
	if cat == nil {
		cat = NewCategorizer(nil)
	}
	n := int32(len(events))
	t := &Timeline{Device: dev, Events: events, stacks: s.Stacks, cat: cat, share: share, Active: make([]int64, len(events))}
	// Every alloc starts an interval, and a free of an unseen alloc one
	// more: counting them first spares growing a slice of a million
	// intervals (its copies were a tenth of the replay).
	allocs, frees := countActions(events, runtime.GOMAXPROCS(0))
	// The stacks' traits, which the roles read, depend on the stacks
	// alone: read while the events are replayed on one core (the frame
	// pool's 187k stacks, 20 ms of CPU beside a 25 ms loop).
	var traits par.Group
	var byStack []stackTraits
	traits.Go(func() { byStack = share.traits(t.stacks, cat, rolesPerWorker) })
	t.stackTraits = func() []stackTraits {
		traits.Wait()
		return byStack
	}
	defer traits.Wait() // a panic below must not leave it running
	// Active blocks appended one by one were copied again and again (200k
	// of them), and room made after the loop copies the whole array.
	active := activeBlocks(s, dev)
	room, likely := intervalRoom(allocs, frees, active)
	t.Intervals = make([]Interval, 0, room)
	// The loop below runs on one core and writes the intervals in order,
	// into pages the heap has not touched yet: a fault each 100 intervals
	// was a quarter of its time (d8, 900k events). Another core maps them
	// ahead of it (Populate changes no byte, so the loop's writes may
	// come first), then maps the series fillSeries adds into.
	var mapped par.Group
	ahead, series := t.Intervals[:likely], t.Active
	mapped.Go(func() {
		pages.Populate(ahead)
		if !pages.Populate(series) {
			pages.Prefault(series) // read before written: see pages
		}
	})
	// A panic below must not leave it running.
	defer mapped.Wait()
	open := newAddrMap(1024)    // addr -> interval of its open alloc
	requested := newAddrMap(64) // addr -> index of a lone free_requested
	var netReserved int64
	closeAt := func(addr uint64, i, req int32, e *TraceEntry) {
		free := e
		if req >= 0 {
			free = &events[req]
		}
		if j, ok := open.Take(addr); ok {
			iv := &t.Intervals[j]
			iv.End, iv.FreeRequested, iv.FreeStack = i, req, t.stackNumber(free.Stack)
			return
		}
		t.Intervals = append(t.Intervals, Interval{Start: -1, End: i, FreeRequested: req, Size: e.Size,
			Addr: addr, Stack: t.stackNumber(e.Stack), FreeStack: t.stackNumber(free.Stack)})
		t.freesBefore++
	}
	for i := int32(0); i < n; i++ {
		e := &events[i]
		switch e.Action() {
		case ActionAlloc:
			if requested.Len() > 0 { // nearly always empty: spare the hash
				requested.Delete(e.Addr)
			}
			open.Put(e.Addr, int32(len(t.Intervals)))
			t.Intervals = append(t.Intervals, Interval{Start: i, End: n, FreeRequested: -1, Size: e.Size, Addr: e.Addr, Stack: t.stackNumber(e.Stack)})
		case ActionFreeRequested:
			if i+1 < n && events[i+1].Action() == ActionFreeCompleted && events[i+1].Addr == e.Addr {
				// One free: memory_viz merges the pair at the free_requested.
				if requested.Len() > 0 {
					requested.Delete(e.Addr)
				}
				closeAt(e.Addr, i, i, e)
				i++
				continue
			}
			requested.Put(e.Addr, i)
		case ActionFreeCompleted:
			req, ok := requested.Take(e.Addr)
			if !ok {
				req = -1
			}
			closeAt(e.Addr, i, req, e)
		case ActionSegmentAlloc, ActionSegmentMap:
			netReserved += e.Size
			t.ReservedFromTrace = true
			t.reserved = append(t.reserved, reservedStep{at: i, level: e.Size}) // a change until fillSeries
		case ActionSegmentFree, ActionSegmentUnmap:
			netReserved -= e.Size
			t.ReservedFromTrace = true
			t.reserved = append(t.reserved, reservedStep{at: i, level: -e.Size})
		case ActionOOM:
			t.Markers = append(t.Markers, Marker{Index: int(i), Kind: MarkOOM,
				Label: fmt.Sprintf("OOM: %s requested, %s free", units.Bytes(e.Size), units.Bytes(s.ExtraOf(e).DeviceFree))})
		case ActionSnapshot:
			t.Markers = append(t.Markers, Marker{Index: int(i), Kind: MarkSnapshot, Label: "snapshot"})
		}
	}
	// A free requested but not completed by the end is still pending there.
	requested.Range(func(addr uint64, req int32) {
		if j, ok := open.Get(addr); ok && t.Intervals[j].Start < req {
			t.Intervals[j].FreeRequested, t.Intervals[j].FreeStack = req, t.stackNumber(events[req].Stack)
		}
	})
	var reserved int64
	matched := 0 // active blocks whose allocation is open at the end
	// Room for every active block at once, where the snapshot broke
	// intervalRoom's rules: growing by appends copied the intervals twice
	// over (51 MB of copies, held until a collection at report's pace).
	// Where it keeps them, the room is already there.
	t.Intervals = slices.Grow(t.Intervals, active)
	for si := range s.Segments {
		seg := &s.Segments[si]
		if seg.Device != dev {
			continue
		}
		reserved += seg.TotalSize
		for bi := range seg.Blocks {
			b := &seg.Blocks[bi]
			if !b.State.Active() {
				continue
			}
			t.SnapshotActive += b.RequestedSize
			if _, ok := open.Get(b.Address); ok {
				matched++
				continue
			}
			if b.State != StateActiveAllocated {
				// memory_viz does not count a pending free it never saw
				// allocated.
				t.SnapshotActive -= b.RequestedSize
				continue
			}
			// The block's stack by its number, as an event's: blocks
			// share stacks (a snapshot's live tensors come from a few
			// thousand lines), each decided and read once.
			t.Intervals = append(t.Intervals, Interval{Start: -1, End: n, FreeRequested: -1,
				Size: b.RequestedSize, Addr: b.Address, Stack: t.stackNumber(b.Stack)})
		}
	}
	t.addAnnotations(s)
	// The roles and the series (with the peak's level) both only read the
	// intervals and events, and write fields the other does not read, so
	// they run at once (bigtrain: 16 ms of roles beside 30 ms of series).
	// The peak's live set carries roles: it comes after.
	var wg par.Group
	wg.Go(func() { t.classifyRoles(s.Annotations) })
	mapped.Wait()
	t.fillSeries(netReserved, reserved, matched == open.Len())
	t.findPeakLevel()
	if atPeak != nil {
		atPeak(t)
	}
	wg.Wait()
	return t
}

// PeakLive returns the allocations live at the peak, largest first. They
// are made at the first call, not by the replay: a report reads only the
// largest and the totals (PeakRoles, PeakCategories), and a peak of 400k
// live allocations is 86 MB of them.
func (t *Timeline) PeakLive() []Allocation {
	t.peakOnce.Do(func() { t.peakLive = t.LiveAt(t.Peak.EventIndex, 0) })
	return t.peakLive
}

// PeakTop returns the n largest allocations live at the peak (all of them
// for n <= 0): PeakLive's first n.
func (t *Timeline) PeakTop(n int) []Allocation {
	if n <= 0 {
		return t.PeakLive()
	}
	return t.LiveAt(t.Peak.EventIndex, n)
}

// PeakRoles sums the allocations live at the peak by role, as RoleTotals
// does, without making them.
func (t *Timeline) PeakRoles() []CategoryTotal {
	t.buildBounds()
	var sums [len(roleNames)]CategoryTotal
	i := int32(t.Peak.EventIndex)
	for j := range t.starts {
		if t.starts[j] <= i && i < t.ends[j] {
			s := &sums[t.Role(j)]
			s.Bytes += t.Intervals[j].Size
			s.Blocks++
		}
	}
	return roleTotals(sums)
}

// PeakCategories sums the allocations live at the peak by category, as
// CategoryTotals does, without making them.
func (t *Timeline) PeakCategories() []CategoryTotal {
	_, _, cats := t.LiveStats(t.Peak.EventIndex)
	sortCategoryTotals(cats, t.cat)
	return cats
}

// addAnnotations marks each of the device's timed annotations at the first
// event at or after its time (the last event when none is).
func (t *Timeline) addAnnotations(s *Snapshot) {
	for _, a := range s.Annotations {
		if a.Device != t.Device || a.TimeUS == 0 {
			continue
		}
		i := sort.Search(len(t.Events), func(i int) bool { return t.Events[i].TimeUS >= a.TimeUS })
		if i == len(t.Events) {
			i--
		}
		label := a.Name
		if a.Stage != "" {
			label += " " + a.Stage
		}
		t.Markers = append(t.Markers, Marker{Index: i, Kind: MarkAnnotation, Label: label})
	}
	slices.SortStableFunc(t.Markers, func(a, b Marker) int { return cmp.Compare(a.Index, b.Index) })
}
