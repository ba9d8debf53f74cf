package snapshot

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"memscope/internal/units"
)

// Interval is the life of one allocation within the trace window, in event
// indices: it is allocated after event Start (-1: before the window) and
// stops counting as allocated at event End (len(events): still allocated at
// the end). ActiveEnd is when its memory was finally released
// (free_completed), which can be later for cross-stream frees.
type Interval struct {
	Start, End, ActiveEnd int32
	Size                  int64
	Addr                  uint64
	Frames                Stack
	// PreWindow is set when the allocation happened before the trace began
	// (a free with no alloc, or an active block with no alloc).
	PreWindow bool
}

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

// Peak is the highest allocated memory of a timeline and what was live then.
type Peak struct {
	Allocated int64
	// EventIndex is the event after which the peak was reached; -1 when the
	// peak is the level before the first event.
	EventIndex int
	TimeUS     int64
	// Live are the allocations live at the peak, largest first.
	Live []Allocation
}

// Timeline is a device's memory rebuilt from the allocator trace.
type Timeline struct {
	Device int
	Events []TraceEntry
	// Allocated and Reserved hold the bytes after each event.
	Allocated []int64
	Reserved  []int64
	// BaseAllocated and BaseReserved are the levels before the first event.
	BaseAllocated int64
	BaseReserved  int64
	Intervals     []Interval
	Markers       []Marker
	Peak          Peak
	// EndAllocated is the rebuilt allocated memory after the last event;
	// SnapshotAllocated what the snapshot's blocks say. They match when the
	// trace and the snapshot agree.
	EndAllocated      int64
	SnapshotAllocated int64
	// Complete is set when the trace covers the whole run: replaying it from
	// an empty allocator reproduces the snapshot's allocated memory exactly.
	Complete bool
	// Note says how far the timeline can be trusted, in words.
	Note string
	// ReservedFromTrace is set when the trace records segment events;
	// otherwise Reserved is flat at the snapshot's reserved memory.
	ReservedFromTrace bool
	cat               *Categorizer
	// bySize orders the intervals by size for LiveAt; starts and ends copy
	// their bounds for a cache-friendly scan.
	bySize, starts, ends []int32
}

// Replay rebuilds allocated and reserved memory over the trace of one
// device. It pairs alloc with free_requested/free_completed by address (in
// order, so reused addresses pair correctly), treats frees with no alloc as
// allocations made before the window, and anchors the levels on the final
// segment state as PyTorch's viewer does. It returns nil when the device has
// no trace.
func Replay(s *Snapshot, dev int, cat *Categorizer) *Timeline {
	events := s.Trace(dev)
	if len(events) == 0 {
		return nil
	}
	if cat == nil {
		cat = NewCategorizer(nil)
	}
	n := int32(len(events))
	t := &Timeline{Device: dev, Events: events, cat: cat,
		Allocated: make([]int64, len(events)), Reserved: make([]int64, len(events))}
	live := map[uint64]int32{}      // addr -> interval
	preFreeing := map[uint64]bool{} // pre-window allocation between free_requested and free_completed
	var netReserved int64
	for i := range events {
		e := &events[i]
		i32 := int32(i)
		switch e.Action {
		case ActionAlloc:
			if j, ok := live[e.Addr]; ok {
				// Re-allocated without a free in the trace: close the old one.
				iv := &t.Intervals[j]
				if iv.End == n {
					iv.End = i32
				}
				iv.ActiveEnd = i32
			}
			live[e.Addr] = int32(len(t.Intervals))
			t.Intervals = append(t.Intervals, Interval{Start: i32, End: n, ActiveEnd: n, Size: e.Size, Addr: e.Addr, Frames: e.Frames})
		case ActionFreeRequested:
			if j, ok := live[e.Addr]; ok {
				if iv := &t.Intervals[j]; iv.End == n {
					iv.End = i32
				}
			} else if !preFreeing[e.Addr] {
				preFreeing[e.Addr] = true
				t.Intervals = append(t.Intervals, Interval{Start: -1, End: i32, ActiveEnd: n, Size: e.Size, Addr: e.Addr, Frames: e.Frames, PreWindow: true})
			}
		case ActionFreeCompleted:
			if j, ok := live[e.Addr]; ok {
				iv := &t.Intervals[j]
				if iv.End == n {
					iv.End = i32
				}
				iv.ActiveEnd = i32
				delete(live, e.Addr)
			} else if preFreeing[e.Addr] {
				delete(preFreeing, e.Addr)
				// The interval was opened at free_requested; find it from
				// the back (it is recent).
				for j := len(t.Intervals) - 1; j >= 0; j-- {
					if iv := &t.Intervals[j]; iv.PreWindow && iv.Addr == e.Addr && iv.ActiveEnd == n {
						iv.ActiveEnd = i32
						break
					}
				}
			} else {
				t.Intervals = append(t.Intervals, Interval{Start: -1, End: i32, ActiveEnd: i32, Size: e.Size, Addr: e.Addr, Frames: e.Frames, PreWindow: true})
			}
		case ActionSegmentAlloc, ActionSegmentMap:
			netReserved += e.Size
			t.ReservedFromTrace = true
		case ActionSegmentFree, ActionSegmentUnmap:
			netReserved -= e.Size
			t.ReservedFromTrace = true
		case ActionOOM:
			t.Markers = append(t.Markers, Marker{Index: i, Kind: MarkOOM,
				Label: fmt.Sprintf("OOM: %s requested, %s free", units.Bytes(e.Size), units.Bytes(e.DeviceFree))})
		case ActionSnapshot:
			t.Markers = append(t.Markers, Marker{Index: i, Kind: MarkSnapshot, Label: "snapshot"})
		}
	}
	// Active blocks the trace never saw allocated were allocated before it.
	var reserved int64
	for si := range s.Segments {
		seg := &s.Segments[si]
		if seg.Device != dev {
			continue
		}
		reserved += seg.TotalSize
		for bi := range seg.Blocks {
			b := &seg.Blocks[bi]
			if b.State != StateActiveAllocated {
				continue
			}
			t.SnapshotAllocated += b.Size
			if j, ok := live[b.Address]; ok && t.Intervals[j].End == n {
				// The block is the truth for the final state: some PyTorch
				// versions trace the requested size of tiny allocations
				// (4 bytes) where the block holds the rounded 512.
				t.Intervals[j].Size = b.Size
				continue
			}
			t.Intervals = append(t.Intervals, Interval{Start: -1, End: n, ActiveEnd: n, Size: b.Size, Addr: b.Address, Frames: b.Frames, PreWindow: true})
		}
	}
	t.fillSeries(netReserved, reserved)
	t.addAnnotations(s)
	t.findPeak()
	return t
}

func (t *Timeline) fillSeries(netReserved, snapshotReserved int64) {
	n := len(t.Events)
	delta := make([]int64, n+1)
	var zeroBased int64 // level at the end when replayed from nothing
	for _, iv := range t.Intervals {
		if iv.Start < 0 {
			t.BaseAllocated += iv.Size
		} else {
			delta[iv.Start] += iv.Size
		}
		if int(iv.End) < n {
			delta[iv.End] -= iv.Size
		}
		if !iv.PreWindow && int(iv.End) == n {
			zeroBased += iv.Size
		}
	}
	level := t.BaseAllocated
	for i := 0; i < n; i++ {
		level += delta[i]
		t.Allocated[i] = level
	}
	t.EndAllocated = level
	t.BaseReserved = snapshotReserved - netReserved
	r := t.BaseReserved
	for i := range t.Events {
		switch t.Events[i].Action {
		case ActionSegmentAlloc, ActionSegmentMap:
			r += t.Events[i].Size
		case ActionSegmentFree, ActionSegmentUnmap:
			r -= t.Events[i].Size
		}
		t.Reserved[i] = r
	}
	pre := 0
	for _, iv := range t.Intervals {
		if iv.PreWindow {
			pre++
		}
	}
	switch {
	case pre == 0 && zeroBased == t.SnapshotAllocated:
		t.Complete = true
		t.Note = fmt.Sprintf("exact: replaying the whole trace from an empty allocator ends at the snapshot's %s allocated", units.Bytes(t.SnapshotAllocated))
	case t.EndAllocated != t.SnapshotAllocated:
		t.Note = fmt.Sprintf("the trace ends with %s allocated but the snapshot's blocks hold %s: memory changed after recording stopped; levels follow the trace",
			units.Bytes(t.EndAllocated), units.Bytes(t.SnapshotAllocated))
	default:
		t.Note = fmt.Sprintf("partial: the trace starts mid-run (%d allocations made before it, %s live when it starts); levels are anchored on the final segment state",
			pre, units.Bytes(t.BaseAllocated))
	}
	if t.BaseReserved < 0 {
		t.Note += "; reserved memory from segment events does not match the segments"
	}
	if !t.ReservedFromTrace {
		t.Note += "; the trace has no segment events, so reserved memory is shown flat"
	}
}

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

func (t *Timeline) findPeak() {
	best, at := t.BaseAllocated, -1
	for i, v := range t.Allocated {
		if v > best {
			best, at = v, i
		}
	}
	t.Peak = Peak{Allocated: best, EventIndex: at}
	if at >= 0 {
		t.Peak.TimeUS = t.Events[at].TimeUS
	} else if len(t.Events) > 0 {
		t.Peak.TimeUS = t.Events[0].TimeUS
	}
	t.Peak.Live = t.LiveAt(at, 0)
}

// LiveAt returns the allocations live after event i (-1: before the first
// event), largest first; limit 0 means all. The intervals are ordered by
// size once, so moving a cursor costs one linear scan and no sort.
func (t *Timeline) LiveAt(i int, limit int) []Allocation {
	if t.bySize == nil {
		t.bySize = make([]int32, len(t.Intervals))
		t.starts = make([]int32, len(t.Intervals))
		t.ends = make([]int32, len(t.Intervals))
		for j := range t.Intervals {
			t.bySize[j] = int32(j)
			t.starts[j], t.ends[j] = t.Intervals[j].Start, t.Intervals[j].End
		}
		slices.SortFunc(t.bySize, func(a, b int32) int {
			x, y := &t.Intervals[a], &t.Intervals[b]
			if c := cmp.Compare(y.Size, x.Size); c != 0 {
				return c
			}
			return cmp.Compare(x.Addr, y.Addr)
		})
	}
	i32 := int32(i)
	var out []Allocation
	for _, j := range t.bySize {
		if t.starts[j] > i32 || t.ends[j] <= i32 {
			continue
		}
		iv := &t.Intervals[j]
		out = append(out, Allocation{Address: iv.Addr, Size: iv.Size, RequestedSize: iv.Size, State: StateActiveAllocated,
			Category: t.cat.Category(iv.Frames), Frames: iv.Frames, FramesFromTrace: true})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

// LiveStats counts the allocations live after event i, their bytes and
// their bytes by category (largest first), without building them.
func (t *Timeline) LiveStats(i int) (n int, bytes int64, cats []CategoryTotal) {
	if t.bySize == nil {
		t.LiveAt(-2, 1) // builds the index
	}
	i32 := int32(i)
	idx := map[string]int{}
	for j := range t.starts {
		if t.starts[j] > i32 || t.ends[j] <= i32 {
			continue
		}
		iv := &t.Intervals[j]
		n++
		bytes += iv.Size
		c := t.cat.Category(iv.Frames)
		k, ok := idx[c]
		if !ok {
			k = len(cats)
			idx[c] = k
			cats = append(cats, CategoryTotal{Name: c})
		}
		cats[k].Bytes += iv.Size
		cats[k].Blocks++
	}
	slices.SortFunc(cats, func(a, b CategoryTotal) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return n, bytes, cats
}

// LiveByCategory totals live allocations (from LiveAt) by category, largest
// first.
func (t *Timeline) LiveByCategory(live []Allocation) []CategoryTotal {
	return categoryTotals(live, t.cat)
}
