package model

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"memscope/format"
	"memscope/snapshot"
	"memscope/trace"
)

// Detected is what a file holds, by content: one answer for every command
// (report, diff, compare) and the explorer.
type Detected struct {
	// Kind is KindSnapshot, KindEstimate, KindTraceRun or KindUnknown: the
	// source the file makes.
	Kind SourceKind
	// Format is the file's format (format.Unknown when none).
	Format format.Kind
	// What says what the file looks like, for messages ("a Megatron memory
	// trace").
	What string
	// ByName is set when only the file name (.pickle) said what it is.
	ByName bool
}

// Detect sniffs a file (format.SniffFile). A .pickle/.pkl file that is
// nothing memscope knows is a damaged snapshot, so that loading it says
// why.
func Detect(path string) (Detected, error) {
	k, err := format.SniffFile(path)
	if err != nil {
		return Detected{Kind: KindUnknown}, err
	}
	switch {
	case k == format.Snapshot:
		return Detected{Kind: KindSnapshot, Format: k, What: k.What()}, nil
	case k == format.Estimate:
		return Detected{Kind: KindEstimate, Format: k, What: k.What()}, nil
	case k.IsTrace():
		return Detected{Kind: KindTraceRun, Format: k, What: k.What()}, nil
	}
	lower := strings.ToLower(path)
	if strings.HasSuffix(lower, ".pickle") || strings.HasSuffix(lower, ".pkl") || strings.HasSuffix(lower, ".pickle.gz") {
		return Detected{Kind: KindSnapshot, Format: format.Snapshot, What: "a snapshot file (by its name)", ByName: true}, nil
	}
	return Detected{Kind: KindUnknown, What: unknownWhat(path)}, nil
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
	saved := format.SniffTorchSave(head[:n])
	switch {
	case n == 0:
		return "an empty file"
	case saved == format.SavedOther:
		return "a torch.save archive that holds no allocator snapshot (a checkpoint?)"
	case saved == format.OtherZip:
		return "a zip archive that is not a torch.save of an allocator snapshot"
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

// Input is one file a command reads (SnapshotInputs).
type Input struct {
	Path   string
	Format format.Kind // format.Snapshot or format.Estimate
	Label  snapshot.Label
	// Err says why the path gives no input (it is missing, a folder
	// without snapshots, or a file of another kind).
	Err error
}

// SnapshotInputs expands paths into the allocator snapshots and estimates
// that report and diff read: a file must be one (else an error naming
// what it is and the command that reads it), a folder gives every one
// under it, four levels deep (none: an error, which points to compare
// when the folder holds traces).
func SnapshotInputs(paths []string, command string) []Input {
	var out []Input
	for _, p := range paths {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			out = append(out, Input{Path: p, Err: err})
		case st.IsDir():
			found, err := snapshot.Discover(p)
			if err != nil {
				out = append(out, Input{Path: p, Err: err})
				continue
			}
			if len(found) == 0 {
				err := fmt.Errorf("no snapshots found (looked for *.pickle, *.pkl, *.pickle.gz, memory_viz *.html, snapshot *.json and torch.save *.pt, up to 4 levels deep)")
				if traces, _ := trace.FindFiles(p); len(traces) > 0 {
					err = fmt.Errorf("no snapshots found; it holds %d memory trace files: use memscope compare %s", len(traces), p)
				}
				out = append(out, Input{Path: p, Err: err})
			}
			for _, f := range found {
				out = append(out, Input{Path: f.Path, Format: f.Kind, Label: f.Label})
			}
		default:
			d, err := Detect(p)
			switch {
			case err != nil:
				out = append(out, Input{Path: p, Err: err})
			case d.Kind != KindSnapshot && d.Kind != KindEstimate:
				out = append(out, Input{Path: p, Err: d.NotFor(p, command)})
			default:
				out = append(out, Input{Path: p, Format: d.Format, Label: snapshot.ParseLabel(p)})
			}
		}
	}
	return out
}
