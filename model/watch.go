package model

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"memscope/format"
)

// Debounce is how long a source's files must stay quiet before it is
// reloaded: training writes traces and snapshots in bursts.
const Debounce = 400 * time.Millisecond

// retryAfter is when a source whose reload failed (a half-written file) is
// tried again even without a new file event.
const retryAfter = 2 * time.Second

// Watcher reloads sources when their files change and adds snapshots and
// trace files that appear in watched directories.
//
// One goroutine (loop) owns all of its state: fsnotify events, debounce
// deadlines, the ticker and the rescans all arrive there, so nothing is
// shared and nothing runs after it returns.
type Watcher struct {
	ws   *Workspace
	fw   *fsnotify.Watcher
	done chan struct{}
	// The fields below belong to loop.
	// dirs holds the watched directories, each with how many levels of
	// folders made inside it after are watched too (see followSource).
	dirs  map[string]int
	known map[string]bool
	// stamps records each file's size and modification time as last listed,
	// so a rescan notices only what changed; stampsIn holds their paths by
	// directory, so a listing finds what left its directory without going
	// through every stamp (50 folders of 100 traces: 255k path splits a
	// rescan, half of an idle explorer's CPU).
	stamps   map[string]stamp
	stampsIn map[string]map[string]bool
	// nextRescan is when the ticker lists the watched directories again
	// (see rescanShare).
	nextRescan time.Time
	retries    map[int]int
	// due holds each changed path's debounce deadline; one timer fires at
	// the earliest.
	due   map[string]time.Time
	timer *time.Timer
	// reloads counts reloads the watcher asked for (read by tests).
	reloads atomic.Int64
}

// maxRetries bounds retries of a source that keeps failing without new
// file events (a file that is simply broken).
const maxRetries = 5

// rescanEvery is how often watched directories are listed even without
// events: a backstop for events the kernel dropped. Failed reloads are
// retried at this pace too.
const rescanEvery = 2 * time.Second

// rescanShare bounds the backstop's cost: after a rescan that took d, the
// next one waits d*rescanShare if that is longer than rescanEvery, so that
// listing a large folder (5000 rank traces: 6000 stats) stays under a
// thousandth of a core while nothing changes. Changes are still seen at
// once: they come as events.
const rescanShare = 1000

// rescanAfter is the wait before the next rescan, after one that took d.
func rescanAfter(d time.Duration) time.Duration { return max(rescanEvery, d*rescanShare) }

// Watch starts watching the directories of the workspace's sources (and
// of sources added later) until ctx is done.
func Watch(ctx context.Context, ws *Workspace) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &Watcher{ws: ws, fw: fw, dirs: map[string]int{}, known: map[string]bool{}, retries: map[int]int{},
		stamps: map[string]stamp{}, stampsIn: map[string]map[string]bool{},
		due: map[string]time.Time{}, done: make(chan struct{})}
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
	w.sync()
	go w.loop(ctx)
	return w, nil
}

// Wait blocks until the watcher has stopped.
func (w *Watcher) Wait() { <-w.done }

// The levels of folders made after inside a watched directory that are
// watched too: under a folder opened by name, or a run's, two (a dump
// folder's memory_snapshot/iteration_N/; a run's sibling sim/ and what it
// holds), one fewer a level down; under the current folder of a run
// without PATH, which may be a home or source folder, one; under the
// folder of a file opened alone, none (new files beside it are still
// seen). Without a bound, a tree unpacked or checked out beside an opened
// snapshot (a git worktree in /tmp) was watched to its leaves and each of
// its files sniffed, and its sources stayed as errors once it was deleted.
const (
	followSource = 2
	followQuiet  = 1
	followFile   = 0
)

// followIn is how many levels of new folders are followed in dir, the
// folder of a file a source holds: followSource less dir's depth below the
// nearest folder opened by name that holds it (folders, absolute), else
// followFile. It runs for every file source at each rescan.
func followIn(dir string, folders []string) int {
	if len(folders) == 0 {
		return followFile
	}
	if a, err := filepath.Abs(dir); err == nil {
		dir = a
	}
	follow := followFile
	for _, f := range folders {
		rel, err := filepath.Rel(f, dir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue
		}
		depth := 0
		if rel != "." {
			depth = strings.Count(rel, string(filepath.Separator)) + 1
		}
		follow = max(follow, followSource-depth)
	}
	return follow
}

// watchedDir is a directory whose changes concern a source, and the
// levels of new folders inside it that do (see followSource).
type watchedDir struct {
	path   string
	follow int
}

// dirsOf lists the directories whose changes concern a source; folders
// are those opened by name.
func dirsOf(s *Source, folders []string) []watchedDir {
	var out []watchedDir
	for _, p := range s.Paths {
		st, err := os.Stat(p)
		switch {
		case err != nil:
		case st.IsDir():
			out = append(out, watchedDir{p, followSource})
			// Traces one level down (FindFiles looks there too).
			if es, err := os.ReadDir(p); err == nil {
				for _, e := range es {
					if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
						out = append(out, watchedDir{filepath.Join(p, e.Name()), followSource - 1})
					}
				}
			}
		default:
			d := filepath.Dir(p)
			out = append(out, watchedDir{d, followIn(filepath.Clean(d), folders)})
		}
	}
	return out
}

// sync adds watches for new sources' directories (and new subfolders of
// watched source folders).
func (w *Watcher) sync() {
	for _, d := range w.ws.Quiet() {
		w.watchDir(d, followQuiet) // the current folder, empty when opened: see OpenQuiet
	}
	folders := w.ws.Folders()
	for _, s := range w.ws.Sources() {
		for _, p := range s.Paths {
			w.known[filepath.Clean(p)] = true
		}
		if s.Kind == KindLive {
			continue
		}
		if s.Kind == KindUnknown {
			// A folder opened before anything was written to it (the
			// explorer started on a dump folder before training's first
			// snapshot) is watched, so that what arrives becomes sources.
			if s.State == Failed && len(s.Paths) == 1 {
				if st, err := os.Stat(s.Paths[0]); err == nil && st.IsDir() {
					w.watchDir(filepath.Clean(s.Paths[0]), followSource)
				}
			}
			continue
		}
		for _, d := range dirsOf(s, folders) {
			w.watchDir(filepath.Clean(d.path), d.follow)
		}
		if s.Kind == KindTraceRun && len(s.Paths) > 0 {
			// Its parent: a sibling run (sim/ beside real/) makes a
			// comparison.
			if st, err := os.Stat(s.Paths[0]); err == nil && st.IsDir() {
				w.watchDir(filepath.Dir(filepath.Clean(s.Paths[0])), followSource)
			}
		}
	}
}

type stamp struct {
	size int64
	mod  time.Time
}

// watchDir watches d, and follow levels of folders made inside it after.
func (w *Watcher) watchDir(d string, follow int) bool {
	return w.watchDirNews(d, follow, func(string) {})
}

// watchDirNews is watchDir, calling news for each entry already there: a
// folder that appears in a watched one (torchtitan's iteration_N) has its
// files written before its watch starts, and they are new data. Where d
// was there when its source was opened (watchDir), what it holds is not.
// A directory watched already keeps the deeper of its two follows.
func (w *Watcher) watchDirNews(d string, follow int, news func(path string)) bool {
	if old, ok := w.dirs[d]; ok {
		w.dirs[d] = max(old, follow)
		return false
	}
	if err := w.fw.Add(d); err != nil {
		return false
	}
	w.dirs[d] = follow
	w.list(d, news)
	return true
}

// list records the stamps of a directory's entries and calls news for each
// entry that is new or changed since the last listing.
func (w *Watcher) list(d string, news func(path string)) {
	es, err := os.ReadDir(d)
	if err != nil {
		return
	}
	seen := make(map[string]bool, len(es))
	defer func() {
		// Entries gone since the last listing are news too (a rotated
		// snapshot whose Remove event was lost).
		for p := range w.stampsIn[d] {
			if !seen[p] {
				w.dropStamp(p)
				news(p)
			}
		}
	}()
	for _, e := range es {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		p := filepath.Join(d, e.Name())
		seen[p] = true
		st := stamp{info.Size(), info.ModTime()}
		if e.IsDir() {
			st = stamp{} // a folder's news is what appears inside it
		}
		if old, ok := w.stamps[p]; !ok || old != st {
			w.setStamp(p, st)
			news(p)
		}
	}
}

// setStamp records path's stamp.
func (w *Watcher) setStamp(path string, st stamp) {
	w.stamps[path] = st
	d := filepath.Dir(path)
	in := w.stampsIn[d]
	if in == nil {
		in = map[string]bool{}
		w.stampsIn[d] = in
	}
	in[path] = true
}

// dropStamp forgets path's stamp.
func (w *Watcher) dropStamp(path string) {
	delete(w.stamps, path)
	d := filepath.Dir(path)
	if in := w.stampsIn[d]; in != nil {
		delete(in, path)
		if len(in) == 0 {
			delete(w.stampsIn, d)
		}
	}
}

// rescan lists every watched directory and treats files it has not seen as
// changed: after an fsnotify error (a queue overflow drops events) and on
// the ticker.
func (w *Watcher) rescan(now time.Time) {
	for _, d := range slices.Sorted(maps.Keys(w.dirs)) {
		w.list(d, func(p string) { w.changed(p, now) })
	}
}

func (w *Watcher) loop(ctx context.Context) {
	defer close(w.done)
	defer w.fw.Close()
	defer w.timer.Stop()
	tick := time.NewTicker(rescanEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 {
				w.changed(ev.Name, time.Now())
			}
		case _, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			// Events were lost (overflow, or a watch failed): look again.
			w.sync()
			w.rescan(time.Now())
		case now := <-w.timer.C:
			w.settle(now)
		case now := <-tick.C:
			if !now.Before(w.nextRescan) {
				w.sync()
				w.rescan(now)
				w.nextRescan = now.Add(rescanAfter(time.Since(now)))
			}
			w.retryFailed(now)
		}
		w.arm()
	}
}

// arm sets the timer to the earliest debounce deadline.
func (w *Watcher) arm() {
	var first time.Time
	for _, t := range w.due {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	w.timer.Stop()
	if !first.IsZero() {
		w.timer.Reset(max(0, time.Until(first)))
	}
}

// owner finds the source a changed path belongs to.
func (w *Watcher) owner(path string) *Source {
	path = filepath.Clean(path)
	for _, s := range w.ws.Sources() {
		for _, p := range s.Paths {
			p = filepath.Clean(p)
			if p == path {
				return s
			}
			if s.Kind.IsTrace() && (filepath.Dir(path) == p || filepath.Dir(filepath.Dir(path)) == p) {
				return s
			}
			if s.Kind == KindRanks && strings.HasPrefix(path, p+string(filepath.Separator)) {
				return s
			}
		}
	}
	return nil
}

// changed (re)starts a path's debounce: it is looked at once it has been
// quiet for Debounce.
func (w *Watcher) changed(path string, now time.Time) {
	if strings.HasPrefix(filepath.Base(path), ".") {
		return // temporary files of atomic writers
	}
	w.due[filepath.Clean(path)] = now.Add(Debounce)
}

// settle handles the paths whose debounce has run out: a file a source was
// opened from reloads it; a new snapshot becomes a source; a trace file
// reloads the run of its folder (or becomes a run); a new subfolder of a
// run is watched. Each source reloads at most once per settle.
func (w *Watcher) settle(now time.Time) {
	reload := map[int]bool{}
	for path, t := range w.due {
		if t.After(now) {
			continue
		}
		delete(w.due, path)
		info, statErr := os.Stat(path)
		if statErr == nil && !info.IsDir() {
			w.setStamp(path, stamp{info.Size(), info.ModTime()}) // seen: not news to the next rescan
		}
		if s := w.sourceOf(path); s != nil {
			if _, folder := w.dirs[path]; os.IsNotExist(statErr) && !s.Pinned && len(s.Paths) == 1 && s.Kind != KindLive && !folder {
				// A snapshot rotated away (training keeps only the
				// latest), a trace file deleted: drop it and its data.
				// If the name comes back it is a new source. A folder
				// keeps its source (an error until it comes back: a run
				// that clears its dump folder and makes it again).
				delete(w.known, path)
				w.dropStamp(path)
				delete(w.retries, s.ID)
				delete(reload, s.ID)
				w.ws.Remove(s.ID)
				continue
			}
			reload[s.ID] = true
			continue
		}
		st, err := os.Stat(path)
		if err != nil {
			if s := w.owner(path); s != nil {
				reload[s.ID] = true // a trace file removed or renamed away
			}
			continue
		}
		if st.IsDir() {
			// A new folder beside a run (sim/ next to real/), or inside one.
			if follow, ok := w.dirs[filepath.Dir(path)]; ok && follow > 0 {
				w.watchDirNews(path, follow-1, func(p string) { w.changed(p, now) })
			}
			if w.regroup(filepath.Dir(path)) {
				continue
			}
			if s := w.owner(path); s != nil {
				reload[s.ID] = true
			}
			continue
		}
		k, _ := format.SniffFile(path)
		if dir := w.ws.reopenWaiting(path, k.IsSnapshot() || k.IsTrace()); dir != "" {
			// The walk read every file of the folder: their news, due
			// now or later, would only reload the sources just made.
			for p := range w.due {
				if strings.HasPrefix(p, dir+string(filepath.Separator)) {
					delete(w.due, p)
				}
			}
			w.sync()
			continue
		}
		if k.IsSnapshot() {
			if s := w.owner(path); s != nil && s.Kind == KindRanks {
				reload[s.ID] = true // a new rank or iteration
				continue
			}
			if !w.known[path] {
				w.known[path] = true
				w.ws.openFile(path, false, false) // new data: loaded, older analyses let go
			}
			continue
		}
		if s := w.owner(path); s != nil && s.Kind == KindTraceCompare {
			reload[s.ID] = true
			continue
		}
		if k.IsTrace() && w.regroup(filepath.Dir(filepath.Dir(path))) {
			w.known[path] = true
			continue
		}
		if s := w.owner(path); s != nil {
			reload[s.ID] = true
			continue
		}
		if k.IsTrace() && !w.known[path] {
			w.known[path] = true
			w.ws.Add(KindTraceRun, path)
		}
	}
	ids := make([]int, 0, len(reload))
	for id := range reload {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		delete(w.retries, id) // new data: retry afresh
		w.reloads.Add(1)
		w.ws.Reload(id)
	}
}

// regroup makes a comparison of dir when it now holds real and simulated
// runs and one of them is a run source.
func (w *Watcher) regroup(dir string) bool {
	// As opening would pair them: a run beside an unrelated one (a
	// folder in /tmp beside another) stays a run.
	real, sim, ok := namedRuns(dir)
	if !ok {
		return false
	}
	if w.ws.Regroup(dir, real, sim) {
		w.watchDir(dir, followSource)
		w.watchDir(real, followSource)
		w.watchDir(sim, followSource)
		return true
	}
	return false
}

// sourceOf is the source opened from exactly this path.
func (w *Watcher) sourceOf(path string) *Source {
	for _, s := range w.ws.Sources() {
		for _, p := range s.Paths {
			if filepath.Clean(p) == path {
				return s
			}
		}
	}
	return nil
}

// retryFailed reloads sources whose last reload failed (their data is the
// previous good one) once the files have had time to be completed.
func (w *Watcher) retryFailed(now time.Time) {
	for _, s := range w.ws.Sources() {
		if s.Err == nil {
			delete(w.retries, s.ID)
			continue
		}
		if s.Generation > 0 && w.retries[s.ID] < maxRetries && now.Sub(s.ChangedAt) > retryAfter {
			w.retries[s.ID]++
			w.reloads.Add(1)
			w.ws.Reload(s.ID)
		}
	}
}
