package model

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"memscope/snapshot"
	"memscope/trace"
)

// Debounce is how long a source's files must stay quiet before it is
// reloaded: training writes traces and snapshots in bursts.
const Debounce = 400 * time.Millisecond

// retryAfter is when a source whose reload failed (a half-written file) is
// tried again even without a new file event.
const retryAfter = 2 * time.Second

// Watcher reloads sources when their files change and adds snapshots and
// trace files that appear in watched directories.
type Watcher struct {
	ws      *Workspace
	fw      *fsnotify.Watcher
	mu      sync.Mutex
	dirs    map[string]bool
	pending map[int]*time.Timer
	known   map[string]bool
	retries map[int]int
	done    chan struct{}
}

// maxRetries bounds retries of a source that keeps failing without new
// file events (a file that is simply broken).
const maxRetries = 5

// Watch starts watching the directories of the workspace's sources (and
// of sources added later) until ctx is done.
func Watch(ctx context.Context, ws *Workspace) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &Watcher{ws: ws, fw: fw, dirs: map[string]bool{}, pending: map[int]*time.Timer{}, known: map[string]bool{}, retries: map[int]int{}, done: make(chan struct{})}
	w.sync()
	go w.loop(ctx)
	return w, nil
}

// Wait blocks until the watcher has stopped.
func (w *Watcher) Wait() { <-w.done }

// dirsOf lists the directories whose changes concern a source.
func dirsOf(s *Source) []string {
	var out []string
	for _, p := range s.Paths {
		st, err := os.Stat(p)
		switch {
		case err != nil:
		case st.IsDir():
			out = append(out, p)
			// Traces one level down (FindFiles looks there too).
			if es, err := os.ReadDir(p); err == nil {
				for _, e := range es {
					if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
						out = append(out, filepath.Join(p, e.Name()))
					}
				}
			}
		default:
			out = append(out, filepath.Dir(p))
		}
	}
	return out
}

// sync adds watches for new sources' directories.
func (w *Watcher) sync() {
	for _, s := range w.ws.Sources() {
		for _, p := range s.Paths {
			w.known[filepath.Clean(p)] = true
		}
		if s.Kind == KindLive || s.Kind == KindUnknown {
			continue
		}
		for _, d := range dirsOf(s) {
			d = filepath.Clean(d)
			if !w.dirs[d] {
				if err := w.fw.Add(d); err == nil {
					w.dirs[d] = true
				}
			}
		}
	}
}

func (w *Watcher) loop(ctx context.Context) {
	defer close(w.done)
	defer w.fw.Close()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			w.mu.Lock()
			for _, t := range w.pending {
				t.Stop()
			}
			w.mu.Unlock()
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 {
				w.changed(ev.Name)
			}
		case _, ok := <-w.fw.Errors:
			if !ok {
				return
			}
		case <-tick.C:
			w.sync()
			w.retryFailed()
		}
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
		}
	}
	return nil
}

func (w *Watcher) changed(path string) {
	base := filepath.Base(path)
	if strings.HasPrefix(base, ".") {
		return // temporary files of atomic writers
	}
	// A file a source was opened from.
	for _, s := range w.ws.Sources() {
		for _, p := range s.Paths {
			if filepath.Clean(p) == filepath.Clean(path) {
				w.touch(s.ID)
				return
			}
		}
	}
	// Anything else is looked at once it has settled: a new snapshot
	// becomes a source; a trace file reloads the run of its directory.
	time.AfterFunc(Debounce, func() {
		st, err := os.Stat(path)
		if err != nil || st.IsDir() {
			if s := w.owner(path); s != nil {
				w.touch(s.ID) // a trace file removed or renamed away
			}
			return
		}
		clean := filepath.Clean(path)
		if k, _ := snapshot.SniffFile(path); k != snapshot.KindNone {
			w.mu.Lock()
			seen := w.known[clean]
			w.known[clean] = true
			w.mu.Unlock()
			if !seen {
				w.ws.openFile(path, false)
			}
			return
		}
		if s := w.owner(path); s != nil {
			w.touch(s.ID)
			return
		}
		if k, _ := trace.SniffFile(path); k != "" {
			w.mu.Lock()
			seen := w.known[clean]
			w.known[clean] = true
			w.mu.Unlock()
			if !seen {
				w.ws.Add(KindTraceRun, path)
			}
		}
	})
}

// touch schedules a reload of a source whose files changed.
func (w *Watcher) touch(id int) {
	w.mu.Lock()
	delete(w.retries, id) // new data: retry afresh
	w.mu.Unlock()
	w.schedule(id)
}

// schedule reloads a source once its files have been quiet for Debounce.
func (w *Watcher) schedule(id int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.pending[id]; t != nil {
		t.Reset(Debounce)
		return
	}
	w.pending[id] = time.AfterFunc(Debounce, func() {
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
		w.ws.Reload(id)
	})
}

// retryFailed reloads sources whose last reload failed (their data is the
// previous good one) once the files have had time to be completed.
func (w *Watcher) retryFailed() {
	for _, s := range w.ws.Sources() {
		w.mu.Lock()
		if s.Err == nil {
			delete(w.retries, s.ID)
		}
		n := w.retries[s.ID]
		w.mu.Unlock()
		if s.Err != nil && s.Generation > 0 && n < maxRetries && time.Since(s.ChangedAt) > retryAfter {
			w.mu.Lock()
			w.retries[s.ID]++
			w.mu.Unlock()
			w.schedule(s.ID)
		}
	}
}
