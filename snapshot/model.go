// Package snapshot analyses PyTorch allocator snapshots
// (torch.cuda.memory._dump_snapshot pickles and their gzip, JSON and HTML
// forms) and PyTorch-Memory-Profiler peak estimates: categories, call
// sites, the replay of the allocator trace, fragmentation, peaks, diffs
// and recommendations.
//
// The typed snapshot lives in package schema and is decoded by package
// pickle (a purpose-built reader that accepts only the plain-data opcodes
// a snapshot uses and never runs code); the names below are that schema,
// so callers need only this package.
package snapshot

import "memscope/snapshot/schema"

// The allocator snapshot's types (see package schema).
type (
	Frame      = schema.Frame
	Stack      = schema.Stack
	StackKey   = schema.StackKey
	FrameTable = schema.FrameTable
	BlockState = schema.BlockState
	Action     = schema.Action
	Block      = schema.Block
	Segment    = schema.Segment
	TraceEntry = schema.TraceEntry
	Annotation = schema.Annotation
	Settings   = schema.Settings
	KV         = schema.KV
	Snapshot   = schema.Snapshot
	TraceExtra = schema.TraceExtra
)

// Block states.
const (
	StateInactive          = schema.StateInactive
	StateActiveAllocated   = schema.StateActiveAllocated
	StateActivePendingFree = schema.StateActivePendingFree
	StateOther             = schema.StateOther
)

// Trace actions.
const (
	ActionAlloc         = schema.ActionAlloc
	ActionFreeRequested = schema.ActionFreeRequested
	ActionFreeCompleted = schema.ActionFreeCompleted
	ActionSegmentAlloc  = schema.ActionSegmentAlloc
	ActionSegmentFree   = schema.ActionSegmentFree
	ActionSegmentMap    = schema.ActionSegmentMap
	ActionSegmentUnmap  = schema.ActionSegmentUnmap
	ActionSnapshot      = schema.ActionSnapshot
	ActionOOM           = schema.ActionOOM
	ActionOther         = schema.ActionOther
)

// StackOf returns a Stack of copies of frames, for stacks built in code.
func StackOf(frames ...Frame) Stack { return schema.StackOf(frames...) }

// StackWithSources is StackOf with each frame's line of code (see
// schema.StackWithSources).
func StackWithSources(frames []Frame, sources []string) Stack {
	return schema.StackWithSources(frames, sources)
}

// NewStack returns the stack of table's frames ids (see schema.NewStack).
func NewStack(table *FrameTable, ids []uint32) Stack { return schema.NewStack(table, ids) }
