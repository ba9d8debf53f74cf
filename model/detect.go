package model

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"memscope/snapshot"
	"memscope/trace"
)

// Detected is what a file holds, by content: one answer for every command
// (report, diff, compare) and the explorer.
type Detected struct {
	// Kind is KindSnapshot, KindEstimate, KindTraceRun or KindUnknown.
	Kind Kind
	// Snapshot and Trace are the finer kinds.
	Snapshot snapshot.Kind
	Trace    trace.Kind
	// What says what the file looks like, for messages ("a Megatron memory
	// trace").
	What string
	// ByName is set when only the file name (.pickle) said what it is.
	ByName bool
}

// Detect sniffs a file. Snapshot forms come first (their sniffing is
// exact), then trace forms; a .pickle/.pkl file that is neither is a
// damaged snapshot, so that loading it says why.
func Detect(path string) (Detected, error) {
	k, err := snapshot.SniffFile(path)
	if err != nil {
		return Detected{Kind: KindUnknown}, err
	}
	switch k {
	case snapshot.KindTorch:
		return Detected{Kind: KindSnapshot, Snapshot: k, What: "an allocator snapshot"}, nil
	case snapshot.KindEstimated:
		return Detected{Kind: KindEstimate, Snapshot: k, What: "a PyTorch-Memory-Profiler estimate"}, nil
	}
	tk, err := trace.SniffFile(path)
	if err != nil {
		return Detected{Kind: KindUnknown}, err
	}
	if tk != "" {
		return Detected{Kind: KindTraceRun, Trace: tk, What: traceWhat[tk]}, nil
	}
	lower := strings.ToLower(path)
	if strings.HasSuffix(lower, ".pickle") || strings.HasSuffix(lower, ".pkl") || strings.HasSuffix(lower, ".pickle.gz") {
		return Detected{Kind: KindSnapshot, Snapshot: snapshot.KindTorch, What: "a snapshot file (by its name)", ByName: true}, nil
	}
	return Detected{Kind: KindUnknown, What: unknownWhat(path)}, nil
}

var traceWhat = map[trace.Kind]string{
	trace.KindMegatron:       "a Megatron memory trace",
	trace.KindTorchtitanJSON: "a torchtitan memory export",
	trace.KindMegatronLog:    "a Megatron training log",
	trace.KindTorchtitanLog:  "a torchtitan training log",
}

// unknownWhat describes a file that is nothing memscope reads.
func unknownWhat(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "an unreadable file"
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	t := bytes.TrimLeft(head[:n], " \t\r\n\xef\xbb\xbf")
	switch {
	case n == 0:
		return "an empty file"
	case len(t) > 0 && (t[0] == '{' || t[0] == '['):
		return "JSON that is neither an allocator snapshot, an estimate nor a memory trace"
	case bytes.IndexByte(head[:n], 0) >= 0:
		return "a binary file that is not a snapshot"
	}
	return "text with no memory lines"
}

// NotFor is the error for a file a command does not read: it names the
// file, what it looks like and the command that reads it.
func (d Detected) NotFor(path, command string) error {
	hint := ""
	switch {
	case d.Kind.IsTrace() && command != "compare":
		hint = ": use memscope compare (or open it in the explorer)"
	case d.Kind.IsSnapshot() && command == "compare":
		hint = ": use memscope report or memscope diff"
	}
	return fmt.Errorf("%s: %s, not what memscope %s reads%s", path, d.What, command, hint)
}
