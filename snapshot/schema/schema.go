// Package schema is the typed form of a PyTorch allocator snapshot
// (torch.cuda.memory._snapshot()): segments and their blocks, the trace
// of allocator events per device, call stacks, annotations and settings.
// Package pickle decodes files into it; package snapshot analyses it.
package schema

import (
	"iter"
	"slices"
	"strconv"
	"strings"
)

// Frame is one entry of a captured call stack. Stacks are stored innermost
// call first, as PyTorch records them.
type Frame struct {
	Filename string
	Name     string
	// Line is the source line; 0 for C++ frames. Values PyTorch wrote that do
	// not fit an int64 (2^64-1 appears in real files) are stored as -1.
	Line int64
}

// String formats the frame as "file:line function".
func (f Frame) String() string {
	// Built by hand, not with fmt: a site is named by this text, and a
	// snapshot of 200k distinct frames names 200k sites.
	var b strings.Builder
	b.Grow(len(f.Filename) + len(f.Name) + 22)
	b.WriteString(f.Filename)
	if f.Line > 0 {
		var n [20]byte
		b.WriteByte(':')
		b.Write(strconv.AppendInt(n[:0], f.Line, 10))
	}
	b.WriteByte(' ')
	b.WriteString(f.Name)
	return b.String()
}

// Stack is a call stack, innermost frame first: indices into a table of
// distinct frames that the snapshot's stacks share. A real trace has a few
// thousand frames in hundreds of thousands of stacks; a stack costs 4 bytes
// a frame and no pointer for the collector to follow, where Python keeps 8-byte
// references. Identical stacks in one snapshot share one array of indices,
// so Key is a cheap identity (categorizers and location caches use it).
// The zero Stack is empty.
type Stack struct {
	ids   []uint32
	table *FrameTable
}

// FrameTable holds the distinct frames that a snapshot's stacks index. It
// may grow while stacks are made (a binder meets new frames as it goes);
// a stack made before sees the frames added after it.
type FrameTable struct {
	Frames []Frame
	// Sources holds, by frame index, each frame's line of code where the
	// stack came with it (estimates; see Stack.Source): nil for snapshots,
	// whose frames carry none. Kept beside the frames, not in them, it
	// costs a snapshot of 1.6M distinct frames nothing, where a field of
	// Frame was 26 MB of it.
	Sources []string
}

// StackKey identifies a stack's array of indices (see Stack.Key).
type StackKey = *uint32

// NewStack returns the stack of table.Frames[ids[0]], [ids[1]], ... It keeps
// ids, which the caller must not change; every id must index the table.
func NewStack(table *FrameTable, ids []uint32) Stack {
	if len(ids) == 0 {
		return Stack{}
	}
	return Stack{ids: ids, table: table}
}

// Len is the number of frames.
func (s Stack) Len() int { return len(s.ids) }

// At returns the i'th frame, innermost first. It points into the shared
// table: frames of different stacks are the same Frame when they are equal
// and the stacks come from one table.
func (s Stack) At(i int) *Frame { return &s.table.Frames[s.ids[i]] }

// Source is the i'th frame's line of code, "" when the stack has none.
func (s Stack) Source(i int) string {
	if id := int(s.ids[i]); id < len(s.table.Sources) {
		return s.table.Sources[id]
	}
	return ""
}

// ID is the i'th frame's index in the stack's table (see Table): a key for
// caches of per-frame results, dense where a map of pointers is not.
func (s Stack) ID(i int) uint32 { return s.ids[i] }

// Table is the table of frames the stack indexes (nil for an empty stack);
// stacks from one snapshot share it.
func (s Stack) Table() *FrameTable { return s.table }

// Key is the address of the stack's array of indices: equal for stacks
// that share it. s must not be empty.
func (s Stack) Key() StackKey { return &s.ids[0] }

// All yields each frame's index and frame, innermost first.
func (s Stack) All() iter.Seq2[int, *Frame] {
	return func(yield func(int, *Frame) bool) {
		for i, id := range s.ids {
			if !yield(i, &s.table.Frames[id]) {
				return
			}
		}
	}
}

// IndexFunc is the index of the first frame for which f is true, or -1.
func (s Stack) IndexFunc(f func(*Frame) bool) int {
	for i, id := range s.ids {
		if f(&s.table.Frames[id]) {
			return i
		}
	}
	return -1
}

// Clone returns the same frames in a new array of indices: an equal stack
// with another Key.
func (s Stack) Clone() Stack {
	if len(s.ids) == 0 {
		return Stack{}
	}
	return Stack{ids: slices.Clone(s.ids), table: s.table}
}

// Equal reports whether s and t hold equal frames.
func (s Stack) Equal(t Stack) bool {
	if s.Len() != t.Len() {
		return false
	}
	for i := range s.ids {
		if *s.At(i) != *t.At(i) {
			return false
		}
	}
	return true
}

// StackOf returns a Stack of copies of frames, for stacks built in code.
func StackOf(frames ...Frame) Stack {
	if len(frames) == 0 {
		return Stack{}
	}
	ids := make([]uint32, len(frames))
	for i := range ids {
		ids[i] = uint32(i)
	}
	return Stack{ids: ids, table: &FrameTable{Frames: slices.Clone(frames)}}
}

// StackWithSources is StackOf for frames whose lines of code are sources
// (by index; see Stack.Source).
func StackWithSources(frames []Frame, sources []string) Stack {
	st := StackOf(frames...)
	if st.table != nil {
		st.table.Sources = slices.Clone(sources)
	}
	return st
}

// BlockState is the allocator state of a block.
type BlockState uint8

// Block states. StateOther keeps blocks whose state string is unknown to
// this version; the snapshot's Warnings name the strings.
const (
	StateInactive BlockState = iota
	StateActiveAllocated
	StateActivePendingFree
	StateOther
)

var stateNames = [...]string{"inactive", "active_allocated", "active_pending_free", "other"}

func (s BlockState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "other"
}

// Active reports whether the block is handed out to a tensor (allocated or
// freed but awaiting stream completion).
func (s BlockState) Active() bool {
	return s == StateActiveAllocated || s == StateActivePendingFree
}

// ParseState maps a snapshot's state string to a BlockState; false for
// strings this version does not know.
func ParseState(s string) (BlockState, bool) {
	switch s {
	case "inactive":
		return StateInactive, true
	case "active_allocated":
		return StateActiveAllocated, true
	case "active_pending_free", "active_awaiting_free":
		return StateActivePendingFree, true
	}
	return StateOther, false
}

// Action is the kind of a trace entry.
type Action uint8

// Trace actions. ActionOther keeps entries with an action unknown to this
// version.
const (
	ActionAlloc Action = iota
	ActionFreeRequested
	ActionFreeCompleted
	ActionSegmentAlloc
	ActionSegmentFree
	ActionSegmentMap
	ActionSegmentUnmap
	ActionSnapshot
	ActionOOM
	ActionOther
)

var actionNames = [...]string{"alloc", "free_requested", "free_completed", "segment_alloc",
	"segment_free", "segment_map", "segment_unmap", "snapshot", "oom", "other"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "other"
}

// ParseAction maps a trace entry's action string to an Action; false for
// strings this version does not know.
func ParseAction(s string) (Action, bool) {
	for i, n := range actionNames[:ActionOther] {
		if n == s {
			return Action(i), true
		}
	}
	return ActionOther, false
}

// Block is a contiguous piece of a segment. Like a TraceEntry it holds no
// pointers and its call stack is an index (see Snapshot.BlockFrames): a
// snapshot can hold hundreds of thousands of blocks, which at 64 bytes
// with a Stack each were a third of the bind's fresh memory.
type Block struct {
	Address       uint64
	Size          int64
	RequestedSize int64
	State         BlockState
	// Stack is where the block was allocated: 0 for a block without
	// frames, else 1 + the index of its call stack in Snapshot.Stacks.
	// When the snapshot has no frames for an active block, analysis
	// borrows those of its last alloc in the trace (see Analysis).
	Stack uint32
}

// Segment is one cudaMalloc'd (or mapped, for expandable segments) region.
type Segment struct {
	Device        int
	Address       uint64
	TotalSize     int64
	AllocatedSize int64
	ActiveSize    int64
	RequestedSize int64
	Stream        uint64
	// Type is "large" or "small" (the allocator pool).
	Type string
	// PoolID is (0,0) for the default pool, anything else for a private pool
	// (CUDA graphs, MemPool).
	PoolID     [2]int64
	Expandable bool
	Frames     Stack
	Blocks     []Block
}

// Private reports whether the segment belongs to a private memory pool.
func (s *Segment) Private() bool { return s.PoolID != [2]int64{} }

// TraceEntry is one event of the allocator's ring buffer. It is kept to 32
// bytes and free of pointers: a real trace holds a million of them, which
// the collector then never scans. Its call stack is an index into
// Snapshot.Stacks (see FramesOf), and the fields that most entries lack or
// share (the stream, device_free, compile_context, user_metadata) are
// interned in Snapshot.TraceExtras (see StreamOf, ExtraOf). The action and
// that index share a word: read them with Action and Extra.
type TraceEntry struct {
	Addr uint64
	Size int64
	// TimeUS is microseconds since the epoch; 0 when absent.
	TimeUS int64
	// Stack is 0 for an entry without frames, else 1 + the index of its
	// call stack in Snapshot.Stacks.
	Stack uint32
	// kind is the action in its low byte, Extra above it.
	kind uint32
}

// MaxTraceExtras is the most distinct TraceExtras a snapshot holds: an
// entry's index into them has 24 bits.
const MaxTraceExtras = 1<<24 - 1

// Action is what the entry records.
func (e TraceEntry) Action() Action { return Action(e.kind) }

// Extra is 0 when the entry has none of TraceExtra's fields, else 1 +
// their index in Snapshot.TraceExtras.
func (e TraceEntry) Extra() uint32 { return e.kind >> 8 }

// SetAction sets the entry's action.
func (e *TraceEntry) SetAction(a Action) { e.kind = e.kind&^0xff | uint32(a) }

// SetExtra sets the entry's Extra, at most MaxTraceExtras.
func (e *TraceEntry) SetExtra(x uint32) { e.kind = e.kind&0xff | x<<8 }

// With is e with action a, for entries written in code:
// TraceEntry{Addr: a, Size: n}.With(ActionAlloc).
func (e TraceEntry) With(a Action) TraceEntry {
	e.SetAction(a)
	return e
}

// WithExtra is e with Extra x (see SetExtra).
func (e TraceEntry) WithExtra(x uint32) TraceEntry {
	e.SetExtra(x)
	return e
}

// TraceExtra holds a trace entry's rarely distinct fields.
type TraceExtra struct {
	// Stream is the CUDA stream (0, the default one, for almost every
	// entry of a real trace: 1.1M of bigtrain's 1.1M).
	Stream uint64
	// DeviceFree is the free device memory reported by an oom entry.
	DeviceFree     int64
	CompileContext string
	UserMetadata   string
}

// Annotation is an external annotation (record_function ranges such as
// "ProfilerStep#3").
type Annotation struct {
	Name   string
	Stage  string // START or END
	Device int
	TimeUS int64
}

// Settings holds the allocator settings PyTorch records. Raw keeps every
// setting as text, in file order, for display.
type Settings struct {
	Present              bool
	AllocConf            string
	MaxSplitSize         int64
	ExpandableSegments   bool
	GCThreshold          float64
	TraceMaxEntries      int64 // 0 when not recorded
	TraceOverflowed      bool
	TraceOverflowedKnown bool
	Raw                  []KV
}

// KV is one displayed setting.
type KV struct{ Key, Value string }

// Snapshot is a decoded allocator snapshot.
type Snapshot struct {
	Segments []Segment
	// Traces holds one trace per device ordinal (often empty).
	Traces [][]TraceEntry
	// TraceExtras holds the distinct TraceExtra values of the entries (see
	// TraceEntry.Extra).
	TraceExtras []TraceExtra
	// Stacks holds the call stacks of the entries (see TraceEntry.Stack).
	Stacks      []Stack
	Settings    Settings
	Annotations []Annotation
	// Warnings lists what was kept but not understood (unknown states,
	// actions and keys), with counts.
	Warnings []string
	// Format says what the file was: "pickle protocol 4", "json", "html", with
	// "+gzip" when compressed.
	Format string
}

// FramesOf returns e's call stack (nil when it has none).
func (s *Snapshot) FramesOf(e *TraceEntry) Stack { return s.StackOf(e.Stack) }

// BlockFrames returns b's call stack (nil when it has none).
func (s *Snapshot) BlockFrames(b *Block) Stack { return s.StackOf(b.Stack) }

// StackOf is the stack a TraceEntry.Stack or Block.Stack names (nil for 0
// or a number past Stacks).
func (s *Snapshot) StackOf(ref uint32) Stack {
	if ref == 0 || int(ref) > len(s.Stacks) {
		return Stack{}
	}
	return s.Stacks[ref-1]
}

// AddStack appends st to Stacks and returns the TraceEntry.Stack or
// Block.Stack that refers to it (0 for an empty stack), for snapshots
// built in code.
func (s *Snapshot) AddStack(st Stack) uint32 {
	if st.Len() == 0 {
		return 0
	}
	s.Stacks = append(s.Stacks, st)
	return uint32(len(s.Stacks))
}

// ExtraOf returns e's stream, device_free, compile_context and user_metadata.
func (s *Snapshot) ExtraOf(e *TraceEntry) TraceExtra {
	x := e.Extra()
	if x == 0 || int(x) > len(s.TraceExtras) {
		return TraceExtra{}
	}
	return s.TraceExtras[x-1]
}

// StreamOf is e's stream.
func (s *Snapshot) StreamOf(e *TraceEntry) uint64 { return s.ExtraOf(e).Stream }

// Devices returns the device ordinals that have segments or trace entries,
// ascending.
func (s *Snapshot) Devices() []int {
	seen := map[int]bool{}
	for i := range s.Segments {
		seen[s.Segments[i].Device] = true
	}
	for d, t := range s.Traces {
		if len(t) > 0 {
			seen[d] = true
		}
	}
	out := make([]int, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// Trace returns the trace of a device, or nil.
func (s *Snapshot) Trace(device int) []TraceEntry {
	if device >= 0 && device < len(s.Traces) {
		return s.Traces[device]
	}
	return nil
}
