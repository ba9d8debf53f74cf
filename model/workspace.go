package model

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"memscope/format"
	"memscope/snapshot"
	"memscope/trace"
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
}

// DefaultKeep is the memory the explorer keeps in allocator snapshot
// analyses beside those on screen (Summary.Footprint's estimate). A
// watched folder where training writes a snapshot every few hundred
// steps, and keeps them all, otherwise grew the explorer by each file's
// analysis for as long as it ran; the bundled samples and most public
// snapshots (under 1 MB each) never reach it.
const DefaultKeep = 256 << 20

// KeepAll, given to SetKeep, keeps every analysis (a text report of all).
const KeepAll = math.MaxInt64

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

// SetKeep sets the memory of the allocator snapshot analyses kept (n <= 0
// restores DefaultKeep). Beyond it the least recently used analyses that
// Use does not name, but the last used, are let go (Unloaded): the Summary
// stays, and Use loads one again.
func (w *Workspace) SetKeep(n int64) {
	if n <= 0 {
		n = DefaultKeep
	}
	w.mu.Lock()
	w.keep = n
	w.mu.Unlock()
	w.evict()
}

// Use says which sources are in view (the snapshot shown, a diff's two):
// they are never unloaded, count as just used, and those Unloaded load
// again. Each call replaces the last one's set.
func (w *Workspace) Use(ids ...int) {
	var load []int
	w.mu.Lock()
	w.inView = map[int]bool{}
	for _, id := range ids {
		if id == 0 || w.inView[id] {
			continue
		}
		w.inView[id] = true
		w.tick++
		w.used[id] = w.tick
		for _, s := range w.sources {
			if s.ID == id && s.State == Unloaded && !w.reloading[id] {
				load = append(load, id)
			}
		}
	}
	w.mu.Unlock()
	for _, id := range load {
		w.startLoad(id)
	}
}

// deferLoad decides a lazy snapshot's first load (once): it waits for a
// use when the analyses held, the lazy loads in flight and this one's
// guess (guessFootprint) would pass keep, unless nothing is held or
// loading. A folder of hundreds of large snapshots otherwise had every one
// of them decoded at start, minutes of every core. A load not deferred
// holds its guess in guessed until it ends.
func (w *Workspace) deferLoad(src *Source) (wait bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lazy[src.ID] {
		return false
	}
	delete(w.lazy, src.ID)
	if w.inView[src.ID] {
		return false
	}
	held := w.guessed
	for _, s := range w.sources {
		if s.Kind == KindSnapshot && s.State == Loaded && s.Analysis != nil {
			held += s.Summary.Footprint
		}
	}
	guess := guessFootprint(src.Paths[0])
	if held > 0 && held+guess > w.keep {
		return true
	}
	w.guessed += guess
	w.guesses[src.ID] += guess
	return false
}

// guessFootprint guesses the memory of a snapshot's analysis before it is
// loaded, from its file: the analyses measured 0.2-0.8 times a trace-heavy
// pickle's size (footprintPerEntry), and a gzip file holds 10-20 times its
// size.
func guessFootprint(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return footprintBase
	}
	n := st.Size()
	if f, err := os.Open(path); err == nil {
		var magic [2]byte
		if _, err := io.ReadFull(f, magic[:]); err == nil && magic == [2]byte{0x1f, 0x8b} {
			n *= 10
		}
		f.Close()
	}
	return max(n, footprintBase)
}

// evict unloads the least recently used allocator snapshots not in view
// (nor loading, nor the last used) while the analyses held take more than
// keep.
func (w *Workspace) evict() {
	w.mu.Lock()
	var resident []int // indices into w.sources
	var held int64
	for i, s := range w.sources {
		if s.Kind == KindSnapshot && s.State == Loaded && s.Analysis != nil {
			resident = append(resident, i)
			held += s.Summary.Footprint
		}
	}
	if held <= w.keep {
		w.mu.Unlock()
		return
	}
	// The last one used stays too: a snapshot whose analysis alone passes
	// keep would otherwise go as soon as it loaded, before the explorer
	// could show it.
	last := -1
	for _, i := range resident {
		if last < 0 || w.used[w.sources[i].ID] > w.used[w.sources[last].ID] {
			last = i
		}
	}
	victims := slices.DeleteFunc(resident, func(i int) bool {
		id := w.sources[i].ID
		return i == last || w.inView[id] || w.reloading[id]
	})
	slices.SortStableFunc(victims, func(a, b int) int { return cmp.Compare(w.used[w.sources[a].ID], w.used[w.sources[b].ID]) })
	n := 0
	for _, i := range victims {
		if held <= w.keep {
			break
		}
		held -= w.sources[i].Summary.Footprint
		c := *w.sources[i]
		c.Analysis, c.State, c.Progress = nil, Unloaded, 0
		w.sources[i] = &c
		n++
	}
	w.mu.Unlock()
	if n > 0 {
		w.poke()
		debug.FreeOSMemory() // the analyses' pages, now garbage
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
	w.mu.Lock()
	w.nextID++
	s := &Source{ID: w.nextID, Kind: kind, Path: path, Paths: paths, Label: labelFor(kind, paths), State: Pending}
	w.sources = append(w.sources, s)
	lazy = lazy && kind == KindSnapshot
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
	mtime := map[int]time.Time{}
	for _, s := range srcs {
		if st, err := os.Stat(s.Paths[0]); err == nil {
			mtime[s.ID] = st.ModTime()
		}
	}
	slices.SortStableFunc(srcs, func(a, b *Source) int { return mtime[b.ID].Compare(mtime[a.ID]) })
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
	w.sources = slices.DeleteFunc(w.sources, func(s *Source) bool { return s.ID == id })
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
		// explorer near one file's footprint instead of three.
		defer debug.FreeOSMemory()
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
			// flame graph), which the analysis leaves to be made when
			// asked: made here, off the UI goroutine (400k allocations
			// take 0.1 s).
			for i := range a.Devices {
				a.PeakLive(&a.Devices[i])
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
		if n := w.openFolder(p); n == 0 {
			w.AddFailed(p, errors.New("no traces or snapshots found (looked for Megatron memory_trace*.json, torchtitan exports, training logs, *.pickle[.gz] snapshots, memory_viz HTML and peak-snapshot JSON)"))
		}
	}
}

// OpenQuiet is Open for paths the user did not name (the current
// directory when memscope runs without PATH): a directory with nothing
// usable adds no source, so a first run in an empty folder is not an
// error.
func (w *Workspace) OpenQuiet(paths ...string) {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			w.openFolder(p)
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
		id := w.add(d.Kind, lazy, p)
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

func (w *Workspace) openDir(dir string, depth int, skip map[string]bool) int {
	// Two run folders become a comparison only when their names say which
	// is simulated (memory_traces_scaling, *sim*, *real*) and they are not
	// both recordings: two unrelated log folders or two recordings side by
	// side are opened each on its own. `memscope compare` still pairs them
	// on request.
	// Two recordings are compared only on request (memscope compare).
	if real, sim, note, err := trace.SplitRuns(dir); err == nil && note == "" && !(trace.IsRecording(real) && trace.IsRecording(sim)) {
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
