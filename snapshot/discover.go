package snapshot

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"memscope/format"
)

// Label identifies where a snapshot sits in a run, from torchtitan's
// layouts: memory_snapshot/iteration_N[_exit]/rankR_memory_snapshot.pickle
// and profiling/memory_snapshot/step_N[_exit]/RRRRRR_step_N.pickle.
type Label struct {
	Rank int // -1 when unknown
	Step int // -1 when unknown
	// Exit is set for snapshots dumped on OOM (the _exit directories).
	Exit bool
}

var (
	reStepDir  = regexp.MustCompile(`^(?:iteration|step)_0*(\d+)(_exit)?$`)
	reRankFile = regexp.MustCompile(`rank_?(\d+)`)
	reNumStep  = regexp.MustCompile(`^0*(\d+)_step_\d+`)
)

// ParseLabel extracts rank and step from a path: the rank from rankN in
// the file name (or, failing that, in its folder's name) or torchtitan's
// RRRRRR_step_N, the step from an iteration_N or step_N folder.
func ParseLabel(path string) Label {
	l := Label{Rank: -1, Step: -1}
	base := filepath.Base(path)
	if m := reRankFile.FindStringSubmatch(base); m != nil {
		l.Rank, _ = strconv.Atoi(m[1])
	} else if m := reNumStep.FindStringSubmatch(base); m != nil {
		l.Rank, _ = strconv.Atoi(m[1])
	} else if m := reRankFile.FindStringSubmatch(filepath.Base(filepath.Dir(path))); m != nil {
		// rank3/snapshot.pickle
		l.Rank, _ = strconv.Atoi(m[1])
	}
	if m := reStepDir.FindStringSubmatch(filepath.Base(filepath.Dir(path))); m != nil {
		l.Step, _ = strconv.Atoi(m[1])
		l.Exit = m[2] != ""
	}
	return l
}

// String renders the label, e.g. "rank 3 · step 10 (OOM exit)"; empty when
// nothing is known.
func (l Label) String() string {
	var parts []string
	if l.Rank >= 0 {
		parts = append(parts, "rank "+strconv.Itoa(l.Rank))
	}
	if l.Step >= 0 {
		parts = append(parts, "step "+strconv.Itoa(l.Step))
	}
	s := strings.Join(parts, " · ")
	if l.Exit {
		s += " (OOM exit)"
	}
	return strings.TrimSpace(s)
}

// Found is a snapshot file found in a directory.
type Found struct {
	Path  string
	Kind  format.Kind // format.Snapshot or format.Estimate
	Label Label
}

// maxDiscoverDepth bounds the directory walk: torchtitan puts snapshots two
// levels below the dump folder.
const maxDiscoverDepth = 4

// Discover finds snapshot files under dir (by content, for files whose name
// suggests a snapshot or JSON), sorted by rank, step and path.
func Discover(dir string) ([]Found, error) {
	var out []Found
	root := filepath.Clean(dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // unreadable subdirectory: skip it, keep the rest
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || strings.Count(p[len(root):], string(filepath.Separator)) >= maxDiscoverDepth) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !candidateName(d.Name()) {
			return nil
		}
		k, err := format.SniffHead(p)
		if err != nil || !k.IsSnapshot() {
			return nil
		}
		out = append(out, Found{Path: p, Kind: k, Label: ParseLabel(p)})
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Label, out[j].Label
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		return out[i].Path < out[j].Path
	})
	return out, err
}

func candidateName(name string) bool {
	n := strings.ToLower(name)
	// .pt and .pth: torch.save's archives, of snapshots or, more often,
	// of checkpoints, which the sniff tells apart from the archive's head.
	for _, ext := range []string{".pickle", ".pkl", ".pickle.gz", ".pkl.gz", ".snapshot", ".snap", ".json", ".json.gz", ".html", ".pt", ".pth"} {
		if strings.HasSuffix(n, ext) {
			return true
		}
	}
	return false
}
