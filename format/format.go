// Package format says what an input file is, by its content: the one Kind
// and the one sniffer every command, the workspace and the decoders share.
// It reads only a file's first bytes (a log's first memory line may come
// later: SniffFile reads on until one turns up) and validates nothing.
package format

// Kind is what a file holds. The values are the names `report --json`
// writes in "kind" for snapshots and estimates.
type Kind string

// The formats memscope reads.
const (
	// Unknown is a file that is none of the others.
	Unknown Kind = ""
	// Snapshot is a PyTorch allocator snapshot (pickle, .gz, JSON or
	// memory_viz HTML).
	Snapshot Kind = "torch-snapshot"
	// Estimate is a PyTorch-Memory-Profiler peak snapshot.
	Estimate Kind = "estimated-snapshot"
	// MegatronTrace is a Megatron memory_trace_rank*.json.
	MegatronTrace Kind = "megatron-trace"
	// TitanExport is torchtitan's structured memory export.
	TitanExport Kind = "torchtitan-memory-export"
	// MegatronLog and TitanLog are training logs with memory lines.
	MegatronLog Kind = "megatron-log"
	TitanLog    Kind = "torchtitan-log"
)

// IsSnapshot reports whether k is an allocator snapshot or an estimate
// (what report and diff read).
func (k Kind) IsSnapshot() bool { return k == Snapshot || k == Estimate }

// IsTrace reports whether k is a per-rank memory trace (what compare reads).
func (k Kind) IsTrace() bool {
	return k == MegatronTrace || k == TitanExport || k == MegatronLog || k == TitanLog
}

// IsLog reports whether k is a training log.
func (k Kind) IsLog() bool { return k == MegatronLog || k == TitanLog }

// What says what a file of kind k is, for messages ("a Megatron memory
// trace").
func (k Kind) What() string {
	switch k {
	case Snapshot:
		return "an allocator snapshot"
	case Estimate:
		return "a PyTorch-Memory-Profiler estimate"
	case MegatronTrace:
		return "a Megatron memory trace"
	case TitanExport:
		return "a torchtitan memory export"
	case MegatronLog:
		return "a Megatron training log"
	case TitanLog:
		return "a torchtitan training log"
	}
	return "nothing memscope reads"
}
