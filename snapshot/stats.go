package snapshot

import (
	"math/bits"
)

// Allocation is an active block seen from the analysis: what a user means by
// "an allocation".
type Allocation struct {
	Address       uint64
	Size          int64
	RequestedSize int64
	Category      string
	// CategoryKeyword is the keyword that decided Category ("" for
	// Unknown), and CategoryFrame (with the small fields below) the index
	// in Frames of the frame whose file or function name matched it (-1).
	CategoryKeyword string
	Frames          Stack
	Stream          uint64
	SegmentAddress  uint64
	// The small fields together: apart, each took a word (a peak of 400k
	// live allocations holds 100 MB of them); an int CategoryFrame was 8
	// bytes more of the 128.
	CategoryFrame int32
	State         BlockState
	// Role is what the allocation is (parameter, gradient, …; see Role).
	Role Role
	// FramesFromTrace is set when the block had no frames of its own and
	// Frames came from its last alloc event in the trace.
	FramesFromTrace bool
	PrivatePool     bool
	// Tensor is what an estimate says of the tensor; nil for a snapshot's
	// allocations. Apart, its fields were 80 of an Allocation's 216 bytes,
	// and a snapshot's peak can hold 400k allocations.
	Tensor *Tensor
}

// Tensor is what an estimate knows of a tensor beyond its allocation.
type Tensor struct {
	Shape, Module, Phase string
	// ReleaseFrames is where the tensor is freed.
	ReleaseFrames Stack
}

// Shape is the estimated tensor's shape ("" for a snapshot's allocation).
func (a *Allocation) Shape() string {
	if a.Tensor == nil {
		return ""
	}
	return a.Tensor.Shape
}

// Module is the module that made the estimated tensor ("" for a
// snapshot's allocation).
func (a *Allocation) Module() string {
	if a.Tensor == nil {
		return ""
	}
	return a.Tensor.Module
}

// Phase is the estimated tensor's phase ("" for a snapshot's allocation).
func (a *Allocation) Phase() string {
	if a.Tensor == nil {
		return ""
	}
	return a.Tensor.Phase
}

// ReleaseFrames is where the estimated tensor is freed (none for a
// snapshot's allocation).
func (a *Allocation) ReleaseFrames() Stack {
	if a.Tensor == nil {
		return Stack{}
	}
	return a.Tensor.ReleaseFrames
}

// Location is the allocation's call site (see Location; for estimated
// tensors, which carry a module, EstimateLocation).
func (a *Allocation) Location() string {
	if a.Module() != "" {
		return EstimateLocation(a.Frames)
	}
	return Location(a.Frames)
}

// LocationIndex is the index of the frame Location names, or -1.
func (a *Allocation) LocationIndex() int {
	if a.Module() != "" {
		return EstimateLocationIndex(a.Frames)
	}
	return LocationIndex(a.Frames)
}

// Bucket is one power-of-two bucket of a size histogram: sizes in [Lo, 2*Lo).
type Bucket struct {
	Lo    int64
	Count int
	Bytes int64
}

// Histogram is a power-of-two size histogram, ascending, empty buckets
// omitted.
type Histogram []Bucket

// histBuckets adds sizes into a Histogram's buckets by their index, 0 for
// sizes of 0 or less and k+1 for [2^k, 2^(k+1)): a snapshot of 300k
// blocks spent 8 ms of its analysis inserting each into a sorted
// Histogram by binary search.
type histBuckets [65]Bucket

func (h *histBuckets) add(size int64) {
	k := 0
	if size > 0 {
		k = 64 - bits.LeadingZeros64(uint64(size))
	}
	h[k].Count++
	h[k].Bytes += size
}

// histogram is h's buckets that hold sizes, ascending.
func (h *histBuckets) histogram() Histogram {
	var out Histogram
	for k, b := range h {
		if b.Count == 0 {
			continue
		}
		if k > 0 {
			b.Lo = int64(1) << (k - 1)
		}
		out = append(out, b)
	}
	return out
}

// CategoryTotal is the memory of one category.
type CategoryTotal struct {
	Name   string
	Bytes  int64
	Blocks int
}

// PoolStats is the memory of one allocator pool.
type PoolStats struct {
	Name      string // "large", "small" or "private"
	Segments  int
	Reserved  int64
	Allocated int64
}

// OOMEvent is an out-of-memory event from the trace.
type OOMEvent struct {
	Index      int
	Size       int64
	DeviceFree int64
	TimeUS     int64
	Frames     Stack
}

// Fragmentation describes how the cached free memory is spread.
type Fragmentation struct {
	// FreeInUsedSegments is inactive memory in segments that also hold active
	// blocks: empty_cache() cannot return it.
	FreeInUsedSegments int64
	// FreeInEmptySegments is inactive memory in wholly free segments:
	// empty_cache() would return it.
	FreeInEmptySegments int64
	// SegmentsWithFree counts segments that hold at least one inactive block.
	SegmentsWithFree int
	// SmallFreeBlocks counts inactive blocks under 1 MiB in used segments.
	SmallFreeBlocks int
	// ExternalPct is 100 * (1 - largest free block / all free), the share of
	// free memory unusable for one request as large as all of it.
	ExternalPct float64
}

// PeakStats is a device at the peak of its active memory (see Timeline).
// Without a trace it is the snapshot's own moment.
type PeakStats struct {
	// FromTrace is set when the peak comes from replaying the trace.
	FromTrace bool
	Active    int64
	Reserved  int64
	// EventIndex is the raw trace index after which the peak is reached
	// (-1: before the first event, or no trace).
	EventIndex    int
	TimeUS        int64
	EfficiencyPct float64
	Rating        string
	// Free is reserved memory not covered by live blocks at the peak;
	// LargestFree the largest such gap in one segment; ExternalPct
	// 100 * (1 - LargestFree/Free).
	Free, LargestFree int64
	ExternalPct       float64
	// Roles are the bytes live at the peak by role, largest first.
	Roles []CategoryTotal
}

// DeviceStats is the analysis of one device of a snapshot.
type DeviceStats struct {
	Device            int
	ReservedBytes     int64
	AllocatedBytes    int64
	ActiveBytes       int64
	RequestedBytes    int64
	InactiveBytes     int64
	PendingFreeBytes  int64
	RoundingWaste     int64
	OtherStateBytes   int64
	Segments          int
	Blocks            int
	ActiveBlocks      int
	InactiveBlocks    int
	LargestFreeBlock  int64
	EfficiencyPct     float64
	Rating            string
	Pools             []PoolStats
	ActiveHist        Histogram
	InactiveHist      Histogram
	Fragmentation     Fragmentation
	TraceEntries      int
	OOMs              []OOMEvent
	TraceTruncated    bool
	TruncationReason  string
	FreesBeforeWindow int
	Categories        []CategoryTotal
	// Roles are the active blocks' bytes by role (see Role), largest first.
	Roles []CategoryTotal
	// Peak is the device at its peak; efficiency and advice are judged
	// there as well as at the snapshot.
	Peak PeakStats
	// Allocations are the active blocks, largest first.
	Allocations []Allocation
	// Stages are the annotated ranges of the trace (see Timeline.Stages);
	// Steps the boundaries the leak check samples (HasSteps when the stages
	// mark any), Leaks its suspects, and Pending the frees that waited on
	// another stream.
	Stages          []Stage
	Steps           Steps
	HasSteps        bool
	Leaks           []LeakSuspect
	Pending         PendingFrees
	Recommendations []Recommendation
}

// Analysis is the analysis of a whole snapshot.
type Analysis struct {
	Snapshot  *Snapshot
	Devices   []DeviceStats
	cat       *Categorizer
	timelines map[int]*Timeline
}

// Timeline returns the replayed trace of device d (nil without a trace).
// Timelines are built by Analyze, so an Analysis is safe to read from any
// goroutine.
func (a *Analysis) Timeline(d int) *Timeline {
	return a.timelines[d]
}

// Categorizer is the categorizer the analysis used.
func (a *Analysis) Categorizer() *Categorizer { return a.cat }

// Device returns the stats of device d, or nil.
func (a *Analysis) Device(d int) *DeviceStats {
	for i := range a.Devices {
		if a.Devices[i].Device == d {
			return &a.Devices[i]
		}
	}
	return nil
}

// Rating names an efficiency: >98% excellent, 95-98% good, below poor.
// Over 100% the input contradicts itself (a trace that allocates more than
// its segments reserve, or blocks past their segments' size), which no
// rating describes.
func Rating(effPct float64, reserved int64) string {
	switch {
	case reserved == 0:
		return "n/a"
	case effPct > 100:
		return "inconsistent"
	case effPct > 98:
		return "excellent"
	case effPct >= 95:
		return "good"
	}
	return "poor"
}
