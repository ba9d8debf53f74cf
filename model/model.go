// Package model is memscope's shared workspace: every source the user
// opened (allocator snapshots, estimates, trace runs and comparisons, live
// GPUs), its load state and its data. Loading runs off the caller's
// goroutine, a failing source never affects the others, and reloads keep
// the last good data. The TUI and the command-line reports read it; it
// imports no UI code.
package model

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"memscope/snapshot"
	"memscope/snapshot/estimate"
	"memscope/trace"
)

// SourceKind is what a source holds: one file (a snapshot, an estimate),
// several (a run of traces, a real-vs-simulated pair, a rank folder) or the
// GPUs. What each file is, is its format.Kind.
type SourceKind string

// Source kinds.
const (
	KindSnapshot     SourceKind = "snapshot"
	KindEstimate     SourceKind = "estimate"
	KindTraceRun     SourceKind = "traces"
	KindTraceCompare SourceKind = "real vs sim"
	KindLive         SourceKind = "live"
	// KindRanks is a folder of per-rank snapshots shown as one table.
	KindRanks   SourceKind = "ranks"
	KindUnknown SourceKind = "unknown"
)

// IsSnapshot reports whether the kind feeds the snapshot tabs.
func (k SourceKind) IsSnapshot() bool {
	return k == KindSnapshot || k == KindEstimate || k == KindRanks
}

// IsTrace reports whether the kind feeds the Traces tab.
func (k SourceKind) IsTrace() bool { return k == KindTraceRun || k == KindTraceCompare }

// State is a source's load state.
type State int

// Load states.
const (
	Pending State = iota
	Loading
	Loaded
	Failed
	// Unloaded is an allocator snapshot that was loaded and whose
	// analysis the workspace let go to bound its memory (see
	// Workspace.SetKeep): its Summary stays, and Use loads it again.
	Unloaded
)

func (s State) String() string {
	return [...]string{"pending", "loading", "loaded", "failed", "not in memory"}[s]
}

// Source is one input of the workspace. Sources are published as
// immutable values: the workspace replaces a source with an updated copy,
// so a *Source obtained from Sources never changes under the reader.
type Source struct {
	ID   int
	Kind SourceKind
	// Path is what the user opened (for a comparison: the parent directory,
	// or "REAL ↔ SIM").
	Path string
	// Paths are the directories or files read: one, or real and sim.
	Paths []string
	Label string
	State State
	// Progress is 0..1 while loading.
	Progress float64
	// Err is the load error. With State Loaded it is the error of a failed
	// reload: the data shown is the last good one.
	Err      error
	Warnings []string

	Analysis *snapshot.Analysis
	// Summary is what the last good load of an allocator snapshot found:
	// it outlives the analysis when the source is Unloaded.
	Summary  Summary
	Estimate *estimate.Analysis
	// Real is the run of a KindTraceRun, the real side of a comparison;
	// Sim the simulated side.
	Real, Sim  *trace.Set
	Comparison *trace.Comparison
	// Ranks are the per-rank summaries of a KindRanks folder (see
	// snapshot.RankSummary), in discovery order; files that failed carry
	// their error.
	Ranks []snapshot.RankSummary

	// Generation counts successful loads: views rebuild when it changes.
	Generation int
	LoadedAt   time.Time
	// ModTime is the modification time of the file the data was read
	// from (zero for a folder): which snapshot is the newest. A snapshot
	// met in a folder has its file's from the start, before any load.
	ModTime time.Time
	// ChangedAt is when the files last changed on disk (watched sources).
	ChangedAt time.Time
	// Demo marks bundled sample data.
	Demo bool
	// Pinned marks a file the user named: it stays when its file goes
	// away (with the error), where a file met in a watched folder is
	// dropped, so a folder whose snapshots rotate keeps memory bounded.
	Pinned bool
}

// Summary describes an allocator snapshot in a line's worth of facts.
type Summary struct {
	Format   string // "pickle protocol 4", "JSON", ...
	Devices  int
	Reserved int64 // bytes over all devices
	// Footprint estimates the memory its analysis holds (footprintOf).
	Footprint int64
}

func summaryOf(a *snapshot.Analysis) Summary {
	if a == nil {
		return Summary{}
	}
	s := Summary{Devices: len(a.Devices)}
	if a.Snapshot != nil {
		s.Format = a.Snapshot.Format
		s.Footprint = footprintOf(a.Snapshot)
	}
	for _, d := range a.Devices {
		s.Reserved += d.ReservedBytes
	}
	return s
}

// The memory an analysis holds, by what it was made from: the live heap
// after loading (peak live sets made) was 57-129 bytes a trace entry on
// eight large generated and real snapshots, about 500 a block where blocks
// dominate (300k blocks: 151 MB), and 0.3-0.9 MB for the smallest files.
const (
	footprintPerEntry = 100
	footprintPerBlock = 500
	footprintBase     = 256 << 10
)

// footprintOf estimates the memory of s's analysis.
func footprintOf(s *snapshot.Snapshot) int64 {
	n := int64(footprintBase)
	for _, t := range s.Traces {
		n += footprintPerEntry * int64(len(t))
	}
	for _, sg := range s.Segments {
		n += footprintPerBlock * int64(len(sg.Blocks))
	}
	return n
}

// Name is a short display name.
func (s *Source) Name() string {
	if s.Label != "" {
		return s.Label
	}
	return filepath.Base(s.Path)
}

// ErrorCount counts the problems of a source: its own error and the files
// of a trace set that failed.
func (s *Source) ErrorCount() int {
	n := 0
	if s.Err != nil {
		n++
	}
	for _, r := range s.Ranks {
		if r.Err != nil {
			n++
		}
	}
	for _, set := range []*trace.Set{s.Real, s.Sim} {
		if set != nil {
			n += len(set.Errors)
		}
	}
	return n
}

// Problems lists the errors of a source as text, one per line.
func (s *Source) Problems() []string {
	var out []string
	if s.Err != nil {
		out = append(out, s.Err.Error())
	}
	for _, r := range s.Ranks {
		if r.Err != nil {
			out = append(out, r.Err.Error())
		}
	}
	for _, set := range []*trace.Set{s.Real, s.Sim} {
		if set == nil {
			continue
		}
		for _, e := range set.Errors {
			out = append(out, e.Err.Error())
		}
	}
	return out
}

func (s *Source) String() string {
	return fmt.Sprintf("#%d %s %s [%s]", s.ID, s.Kind, s.Path, s.State)
}

func labelFor(kind SourceKind, paths []string) string {
	switch kind {
	case KindTraceCompare:
		if len(paths) == 2 {
			return fmt.Sprintf("%s ↔ %s", shortDir(paths[0]), shortDir(paths[1]))
		}
	case KindRanks:
		return "ranks · " + shortDir(paths[0])
	case KindSnapshot, KindEstimate:
		if l := snapshot.ParseLabel(paths[0]).String(); l != "" {
			return l + " · " + filepath.Base(paths[0])
		}
	}
	return shortDir(paths[0])
}

// shortDir is the last two elements of a path.
func shortDir(p string) string {
	p = filepath.Clean(p)
	parent := filepath.Base(filepath.Dir(p))
	if parent == "." || parent == string(filepath.Separator) {
		return filepath.Base(p)
	}
	return strings.Join([]string{parent, filepath.Base(p)}, string(filepath.Separator))
}
