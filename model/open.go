package model

import (
	"errors"
	"fmt"
	"memscope/format"
	"memscope/snapshot"
	"memscope/trace"
	"os"
	"path/filepath"
	"strings"
)

// maxOpenDepth bounds how deep Open looks into directories.
const maxOpenDepth = 4

// Open adds the sources found in paths: files by content (snapshot,
// estimate, trace file), directories recursively (a directory holding a
// real and a simulated run becomes one comparison; a directory holding
// trace files one run; each snapshot one source). Paths that hold nothing
// usable become failed sources saying what was looked for.
func (w *Workspace) Open(paths ...string) {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			w.AddFailed(p, err)
			continue
		}
		if !st.IsDir() {
			w.openFile(p, true, false)
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			abs = filepath.Clean(p)
		}
		w.mu.Lock()
		w.folders = append(w.folders, abs)
		w.mu.Unlock()
		if n := w.openFolder(p); n == 0 {
			w.AddFailed(p, errors.New("no traces or snapshots found (looked for Megatron memory_trace*.json, torchtitan exports, training logs, *.pickle[.gz] snapshots, memory_viz HTML and peak-snapshot JSON)"))
		}
	}
}

// OpenQuiet is Open for paths the user did not name (the current
// directory when memscope runs without PATH): a directory with nothing
// usable adds no source, so a first run in an empty folder is not an
// error. It is kept (Quiet) for a watcher, which opens it again once a
// snapshot or a trace is written there.
func (w *Workspace) OpenQuiet(paths ...string) {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			if w.openFolder(p) == 0 {
				w.mu.Lock()
				w.quiet = append(w.quiet, filepath.Clean(p))
				w.mu.Unlock()
			}
			continue
		}
		w.Open(p)
	}
}

// openFile adds a file by content; explicit files that are nothing known
// become failed sources, files met while walking a directory are skipped.
// A lazy snapshot's first load may wait for a use (deferLoad).
func (w *Workspace) openFile(p string, explicit, lazy bool) int {
	d, err := Detect(p)
	if err == nil && !explicit && d.ByName {
		return 0 // met while walking: only files that look like snapshots
	}
	switch {
	case err != nil:
		if explicit {
			w.AddFailed(p, err)
			return 1
		}
		return 0
	case d.Kind == KindSnapshot || d.Kind == KindEstimate || d.Kind == KindTraceRun:
		id, ok := w.sourceOf(d.Kind, p)
		if !ok {
			id = w.add(d.Kind, lazy, p)
		}
		if explicit {
			w.update(id, func(s *Source) { s.Pinned = true })
		}
		return 1
	case explicit:
		w.AddFailed(p, fmt.Errorf("%s: %s: not a snapshot, estimate or memory trace", p, d.What))
		return 1
	}
	return 0
}

// sourceOf is the source of kind that holds the file at p alone, by its
// absolute path: a file named and met again in a folder named beside it
// (memscope snap.pickle .) is one source, not two.
func (w *Workspace) sourceOf(kind SourceKind, p string) (int, bool) {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	p = abs(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.sources {
		if s.Kind == kind && len(s.Paths) == 1 && abs(s.Paths[0]) == p {
			return s.ID, true
		}
	}
	return 0, false
}

// openFolder opens a directory: a folder of per-rank snapshots becomes one
// rank overview (its snapshots load only when a rank is opened), and the
// rest of the folder opens as usual.
func (w *Workspace) openFolder(dir string) int {
	skip := map[string]bool{}
	n := 0
	if files := RankFiles(dir); files != nil {
		w.Add(KindRanks, dir)
		n++
		for _, f := range files {
			skip[f] = true
		}
	}
	defer w.startWalked()
	return n + w.openDir(dir, 0, skip)
}

// namedRuns finds the real and simulated runs of a comparison in dir:
// two run folders whose names say which is simulated (memory_traces and
// memory_traces_scaling, *sim*, *real*), not both recordings. Two
// unrelated log folders, or two recordings side by side, are no
// comparison by themselves (`memscope compare` still pairs them on
// request).
func namedRuns(dir string) (real, sim string, ok bool) {
	real, sim, note, err := trace.SplitRuns(dir)
	if err != nil || note != "" || trace.IsRecording(real) && trace.IsRecording(sim) {
		return "", "", false
	}
	return real, sim, true
}

func (w *Workspace) openDir(dir string, depth int, skip map[string]bool) int {
	if real, sim, ok := namedRuns(dir); ok {
		w.Add(KindTraceCompare, dir, real, sim)
		return 1 + w.openSnapshotsOnly(dir)
	}
	n := 0
	entries, err := os.ReadDir(dir)
	if err != nil {
		w.AddFailed(dir, err)
		return 1
	}
	traces, _ := trace.DirectFiles(dir)
	if len(traces) > 0 {
		w.Add(KindTraceRun, dir)
		n++
	}
	isTrace := map[string]bool{}
	for _, t := range traces {
		isTrace[t] = true
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), "."):
		case e.IsDir():
			if depth+1 < maxOpenDepth {
				n += w.openDir(p, depth+1, skip)
			}
		case e.Type().IsRegular() && !isTrace[p] && !skip[filepath.Clean(p)]:
			if k, err := format.SniffHead(p); err == nil && k.IsSnapshot() {
				n += w.openFile(p, false, true)
			}
		}
	}
	return n
}

// openSnapshotsOnly adds the snapshots of a directory whose traces were
// taken as a comparison.
func (w *Workspace) openSnapshotsOnly(dir string) int {
	found, err := snapshot.Discover(dir)
	if err != nil {
		return 0
	}
	for _, f := range found {
		if f.Kind == format.Estimate {
			w.Add(KindEstimate, f.Path)
		} else {
			w.add(KindSnapshot, true, f.Path)
		}
	}
	return len(found)
}
