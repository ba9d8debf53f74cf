package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"memscope/snapshot"
)

// Workspace holds the sources. It is safe for concurrent use.
type Workspace struct {
	mu      sync.Mutex
	sources []*Source
	nextID  int
	notify  chan struct{}
	sem     chan struct{} // bounds concurrent loads
	rules   []snapshot.Rule
	ctx     context.Context
	wg      sync.WaitGroup
	// reloading marks sources with a load in flight, so bursts of file
	// events do not queue duplicate loads.
	reloading map[int]bool
	again     map[int]bool
	// rankBudget bounds the memory of a rank folder's parallel loads.
	rankBudget int64
	// keep bounds the memory of the allocator snapshot analyses held
	// (evict, by Summary.Footprint); used is each source's last use (a
	// load or Use) by tick, and inView the sources Use named last.
	keep   int64
	used   map[int]uint64
	tick   uint64
	inView map[int]bool
	// lazy marks snapshots met while walking a folder, whose first load
	// waits for a use once the analyses held or loading would pass keep;
	// guessed is what the lazy loads in flight are expected to hold.
	lazy    map[int]bool
	guessed int64
	guesses map[int]int64 // by source, the part of guessed its load holds
	// walked holds the lazy snapshots a folder walk added, whose loads
	// start when the walk ends, newest file first (startWalked).
	walked []int
	// quiet holds the folders opened without being named (the current
	// folder of a run without PATH) that held nothing usable: no source
	// says so, and the watcher still watches them (see reopenWaiting).
	quiet []string
	// folders holds the folders opened by name (Open), absolute, whose
	// new subfolders the watcher follows (see Folders).
	folders []string
	// replaced says a reload replaced, or Remove dropped, data that a
	// view may still hold, garbage once the view lets go of it
	// (Released).
	replaced bool
}

// New returns an empty workspace. Loads stop when ctx is cancelled. rules
// are the category rules (nil: the defaults).
func New(ctx context.Context, rules []snapshot.Rule) *Workspace {
	return &Workspace{
		notify:     make(chan struct{}, 1),
		sem:        make(chan struct{}, max(1, runtime.GOMAXPROCS(0))),
		rules:      rules,
		ctx:        ctx,
		reloading:  map[int]bool{},
		again:      map[int]bool{},
		rankBudget: DefaultRankBudget,
		keep:       DefaultKeep,
		used:       map[int]uint64{},
		inView:     map[int]bool{},
		lazy:       map[int]bool{},
		guesses:    map[int]int64{},
	}
}

// SetRankBudget sets the bytes that a rank folder's snapshots may take while
// they load in parallel (see SummarizeRanks); n <= 0 restores the default.
// Call it before opening anything.
func (w *Workspace) SetRankBudget(n int64) {
	if n <= 0 {
		n = DefaultRankBudget
	}
	w.mu.Lock()
	w.rankBudget = n
	w.mu.Unlock()
}

// OpenSnapshot returns the source of the snapshot at path, adding it when
// no source holds it yet: a rank of a rank folder opened on its own.
func (w *Workspace) OpenSnapshot(path string) int {
	path = filepath.Clean(path)
	w.mu.Lock()
	for _, s := range w.sources {
		if s.Kind == KindSnapshot && len(s.Paths) == 1 && filepath.Clean(s.Paths[0]) == path {
			w.mu.Unlock()
			return s.ID
		}
	}
	w.mu.Unlock()
	return w.Add(KindSnapshot, path)
}

// Changed delivers a value after any change to the sources (coalesced: one
// pending value at most). Read Sources after receiving.
func (w *Workspace) Changed() <-chan struct{} { return w.notify }

func (w *Workspace) poke() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// Sources returns the current sources in the order they were opened.
func (w *Workspace) Sources() []*Source {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.sources)
}

// Source returns the source with the given ID, or nil.
func (w *Workspace) Source(id int) *Source {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.sources {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// Wait blocks until every load started so far has finished.
func (w *Workspace) Wait() { w.wg.Wait() }

// update replaces source id with f applied to a copy of it.
func (w *Workspace) update(id int, f func(s *Source)) {
	w.mu.Lock()
	for i, s := range w.sources {
		if s.ID == id {
			c := *s
			f(&c)
			w.sources[i] = &c
			break
		}
	}
	w.mu.Unlock()
	w.poke()
}

// Add registers a source and starts loading it; it returns the ID.
func (w *Workspace) Add(kind SourceKind, path string, paths ...string) int {
	return w.add(kind, false, path, paths...)
}

// add is Add; a lazy snapshot's first load may wait for a use (see
// deferLoad).
func (w *Workspace) add(kind SourceKind, lazy bool, path string, paths ...string) int {
	if len(paths) == 0 {
		paths = []string{path}
	}
	lazy = lazy && kind == KindSnapshot
	var mtime time.Time
	if lazy {
		mtime = fileModTime(paths) // the picker says it before a load does
	}
	w.mu.Lock()
	w.nextID++
	s := &Source{ID: w.nextID, Kind: kind, Path: path, Paths: paths, Label: labelFor(kind, paths), State: Pending, ModTime: mtime}
	w.sources = append(w.sources, s)
	if lazy {
		w.lazy[s.ID] = true
		w.walked = append(w.walked, s.ID)
	}
	w.mu.Unlock()
	w.poke()
	if kind != KindUnknown && kind != KindLive && !lazy {
		w.startLoad(s.ID)
	}
	return s.ID
}

// startWalked decides the first loads of the snapshots a folder walk
// added (deferLoad), newest file first, and starts those not deferred: of
// a folder where training writes a snapshot every few hundred steps, the
// ones that fit the bound are the latest, where the walk's name order
// would have loaded the first steps.
func (w *Workspace) startWalked() {
	w.mu.Lock()
	ids := w.walked
	w.walked = nil
	var srcs []*Source
	for _, s := range w.sources {
		if slices.Contains(ids, s.ID) {
			srcs = append(srcs, s)
		}
	}
	w.mu.Unlock()
	// Their files' times were taken when they were added (add).
	slices.SortStableFunc(srcs, func(a, b *Source) int { return b.ModTime.Compare(a.ModTime) })
	for _, s := range srcs {
		if w.deferLoad(s) {
			w.update(s.ID, func(s *Source) { s.State = Unloaded })
			continue
		}
		w.startLoad(s.ID)
	}
}

// Regroup turns a trace run into a real-vs-simulated comparison when its
// folder gains a second side (run/real/ then run/sim/): same source, new
// kind and paths, reloaded. It reports whether a source was regrouped.
func (w *Workspace) Regroup(dir, real, sim string) bool {
	id := 0
	w.mu.Lock()
	for _, s := range w.sources {
		if s.Kind == KindTraceRun && len(s.Paths) > 0 {
			if p := filepath.Clean(s.Paths[0]); p == filepath.Clean(real) || p == filepath.Clean(sim) || p == filepath.Clean(dir) {
				id = s.ID
				break
			}
		}
	}
	w.mu.Unlock()
	if id == 0 {
		return false
	}
	paths := []string{real, sim}
	w.update(id, func(s *Source) {
		s.Kind, s.Path, s.Paths, s.Label = KindTraceCompare, dir, paths, labelFor(KindTraceCompare, paths)
	})
	w.Reload(id)
	return true
}

// Remove drops a source and its data (a watched file that went away). A
// load in flight for it publishes nothing.
func (w *Workspace) Remove(id int) {
	w.mu.Lock()
	w.sources = slices.DeleteFunc(w.sources, func(s *Source) bool {
		if s.ID != id {
			return false
		}
		// A view may still show its data (Released).
		w.replaced = w.replaced || s.Analysis != nil || s.Estimate != nil
		return true
	})
	delete(w.used, id)
	delete(w.lazy, id)
	w.mu.Unlock()
	w.poke()
}

// AddFailed registers a source that could not even be recognised.
func (w *Workspace) AddFailed(path string, err error) int {
	id := w.Add(KindUnknown, path)
	w.update(id, func(s *Source) { s.State = Failed; s.Err = err })
	return id
}

// Released says that the views have let go of the data they showed
// before the sources' last reloads and removals (the explorer calls it
// once its tabs show what is there now): that data is garbage now, and
// its memory goes back to the system on another goroutine. Without it, the analysis a reload
// replaced stayed resident until the next reload: a dense 76 MiB snapshot
// rewritten every second held the explorer at 149 MB between reloads
// (98 MB opened fresh) and 218 MB at a reload's peak.
func (w *Workspace) Released() {
	w.mu.Lock()
	replaced := w.replaced
	w.replaced = false
	w.mu.Unlock()
	if replaced {
		go debug.FreeOSMemory()
	}
}

// reopenWaiting opens again the folder that held nothing usable when it
// was opened (a failed source) and now holds path, which the watcher found
// there: what the folder holds becomes sources, as if opened now (a rank
// folder, a run, snapshots), and its failure goes once it has any. A
// folder opened without being named (Quiet) is opened again only for a
// usable path (a snapshot or a trace): it may be a home or source folder
// where files change all day, and each opening walks it. It returns the
// folder, or "" when path lies in no such folder.
func (w *Workspace) reopenWaiting(path string, usable bool) string {
	path = filepath.Clean(path)
	for _, s := range w.Sources() {
		if s.Kind != KindUnknown || s.State != Failed || len(s.Paths) != 1 {
			continue
		}
		dir := filepath.Clean(s.Paths[0])
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			continue
		}
		if w.openFolder(dir) > 0 {
			w.Remove(s.ID)
		}
		return dir
	}
	for _, dir := range w.Quiet() {
		if !usable || !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			continue
		}
		if w.openFolder(dir) > 0 {
			w.mu.Lock()
			w.quiet = slices.DeleteFunc(w.quiet, func(d string) bool { return d == dir })
			w.mu.Unlock()
		}
		return dir
	}
	return ""
}

// Quiet is the folders opened without being named that held nothing
// usable, and still hold nothing (see OpenQuiet).
func (w *Workspace) Quiet() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.quiet)
}

// Folders is the folders opened by name (Open), absolute.
func (w *Workspace) Folders() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.folders)
}

// MarkDemo labels every source as bundled demo data.
func (w *Workspace) MarkDemo() {
	w.mu.Lock()
	for i, s := range w.sources {
		c := *s
		c.Demo = true
		w.sources[i] = &c
	}
	w.mu.Unlock()
	w.poke()
}

// Reload loads a source again (its files changed). The previous data stays
// until the new load succeeds; a failed reload keeps it and sets Err.
func (w *Workspace) Reload(id int) {
	w.mu.Lock()
	if w.reloading[id] {
		w.again[id] = true
		w.mu.Unlock()
		return
	}
	unloaded := false
	for _, s := range w.sources {
		unloaded = unloaded || s.ID == id && s.State == Unloaded
	}
	w.mu.Unlock()
	w.update(id, func(s *Source) { s.ChangedAt = time.Now() })
	if !unloaded {
		w.startLoad(id) // an Unloaded source reads its files when used
	}
}

func (w *Workspace) startLoad(id int) {
	w.mu.Lock()
	w.reloading[id] = true
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			w.load(id)
			w.mu.Lock()
			if w.again[id] {
				delete(w.again, id)
				w.mu.Unlock()
				continue
			}
			delete(w.reloading, id)
			w.mu.Unlock()
			w.evict() // this source may go now, when it is not in view
			return
		}
	}()
}

// load runs one load of a source, bounded by the semaphore, and publishes
// the result. A panic in a loader becomes that source's error.
func (w *Workspace) load(id int) {
	// Its guess (deferLoad) is held until the load ends, however it ends:
	// a source removed while waiting for its turn too.
	defer func() {
		w.mu.Lock()
		w.guessed -= w.guesses[id]
		delete(w.guesses, id)
		w.mu.Unlock()
	}()
	select {
	case w.sem <- struct{}{}:
	case <-w.ctx.Done():
		return
	}
	defer func() { <-w.sem }()
	src := w.Source(id)
	if src == nil {
		return
	}
	first := src.Generation == 0
	w.update(id, func(s *Source) {
		if first || s.State == Unloaded {
			s.State = Loading
		}
		s.Progress = 0
	})
	progress := func(f float64) {
		w.update(id, func(s *Source) { s.Progress = f })
	}
	var res Source
	mtime := fileModTime(src.Paths)
	err := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("internal error while loading: %v", v)
			}
		}()
		res, err = w.loadData(src, progress)
		return err
	}()
	if !first {
		// A reload leaves the previous data, or a failed attempt's
		// half-built graph, as garbage the size of the file: give it back
		// now, so a snapshot that training rewrites every second keeps the
		// explorer near one file's footprint instead of three. The
		// previous analysis itself is garbage only once the view shown
		// has let go of it (Released).
		defer debug.FreeOSMemory()
		defer func() {
			w.mu.Lock()
			w.replaced = w.replaced || err == nil
			w.mu.Unlock()
		}()
	}
	w.update(id, func(s *Source) {
		s.Progress = 1
		if err != nil {
			s.Err = err
			if s.Generation == 0 || s.State != Loaded {
				s.State = Failed // nothing good to show (an Unloaded source's file went bad)
			}
			return
		}
		s.State = Loaded
		s.Err = nil
		s.Analysis, s.Estimate = res.Analysis, res.Estimate
		if res.Analysis != nil {
			s.Summary = summaryOf(res.Analysis)
		}
		s.Real, s.Sim, s.Comparison = res.Real, res.Sim, res.Comparison
		s.Ranks = res.Ranks
		s.Warnings = res.Warnings
		s.Generation++
		s.LoadedAt = time.Now()
		s.ModTime = mtime
	})
	if err == nil {
		w.mu.Lock()
		w.tick++
		w.used[id] = w.tick
		w.mu.Unlock()
	}
}

// fileModTime is the modification time of a source's one file, taken
// before it is read (a write during the read changes it, and the watcher
// reloads); zero for folders and comparisons.
func fileModTime(paths []string) time.Time {
	if len(paths) != 1 {
		return time.Time{}
	}
	st, err := os.Stat(paths[0])
	if err != nil || !st.Mode().IsRegular() {
		return time.Time{}
	}
	return st.ModTime()
}

func (w *Workspace) loadData(src *Source, progress func(float64)) (Source, error) {
	var out Source
	ctx := w.ctx
	switch src.Kind {
	case KindSnapshot, KindEstimate, KindTraceRun, KindTraceCompare:
		res, err := Load(ctx, src.Kind, src.Paths, snapshot.NewCategorizer(w.rules), func(_ string, f float64) { progress(f) })
		if err != nil {
			return out, err
		}
		if a := res.Analysis; a != nil {
			// The explorer shows the peak's live set (the Top tab, the
			// flame graph), which a timeline leaves to be made when
			// asked and then keeps: made here, off the UI goroutine
			// (400k allocations take 0.1 s). A device without a trace
			// keeps none: its set is made where it is shown.
			for i := range a.Devices {
				if tl := a.Timeline(a.Devices[i].Device); tl != nil {
					tl.PeakLive()
				}
			}
		}
		out.Analysis, out.Estimate = res.Analysis, res.Estimate
		out.Real, out.Sim, out.Comparison = res.Real, res.Sim, res.Comparison
		out.Warnings = res.Warnings
	case KindRanks:
		files := RankFiles(src.Paths[0])
		if files == nil {
			return out, fmt.Errorf("%s: no per-rank snapshots found any more (rankN in the names, two ranks or more)", src.Paths[0])
		}
		w.mu.Lock()
		limit := w.rankBudget
		w.mu.Unlock()
		out.Ranks = snapshot.SortRanks(SummarizeRanks(ctx, files, limit, 0, summarizeSnapshot(w.rules), progress))
		failed := 0
		for _, r := range out.Ranks {
			if r.Err != nil {
				failed++
			}
		}
		if failed == len(out.Ranks) {
			return out, fmt.Errorf("%s: none of the %d rank snapshots could be read: %w", src.Paths[0], failed, out.Ranks[0].Err)
		}
	default:
		return out, fmt.Errorf("nothing to load for a %s source", src.Kind)
	}
	return out, nil
}
