package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"memscope/snapshot"
	"memscope/trace"
)

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func byKind(ws *Workspace) map[SourceKind][]*Source {
	out := map[SourceKind][]*Source{}
	for _, s := range ws.Sources() {
		out[s.Kind] = append(out[s.Kind], s)
	}
	return out
}

// TestFailingSourceLeavesOthersUsable opens good and bad inputs together.
func TestFailingSourceLeavesOthersUsable(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle", filepath.Join(dir, "good.pickle"))
	if err := os.WriteFile(filepath.Join(dir, "bad.pickle"), []byte("\x80\x04cos\nsystem\n."), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := New(context.Background(), nil)
	ws.Open(filepath.Join(dir, "bad.pickle"), filepath.Join(dir, "good.pickle"), "../testdata/traces/megatron_trace_memory",
		filepath.Join(dir, "missing.pickle"), "../testdata/estimates/SYNTHETIC_peak_snapshot.json")
	ws.Wait()
	srcs := ws.Sources()
	if len(srcs) != 5 {
		t.Fatalf("%d sources: %v", len(srcs), srcs)
	}
	states := map[string]State{}
	for _, s := range srcs {
		states[filepath.Base(s.Path)] = s.State
	}
	if states["bad.pickle"] != Failed || states["missing.pickle"] != Failed {
		t.Errorf("bad inputs should fail: %v", states)
	}
	for _, s := range srcs {
		if s.State == Failed {
			if s.Err == nil || !strings.Contains(s.Err.Error(), filepath.Base(s.Path)) {
				t.Errorf("error should name the file: %v", s.Err)
			}
			continue
		}
		if s.State != Loaded || s.Generation != 1 {
			t.Errorf("%s: %s gen %d err %v", s.Path, s.State, s.Generation, s.Err)
		}
	}
	k := byKind(ws)
	if len(k[KindSnapshot]) != 2 || k[KindSnapshot][1].Analysis == nil || len(k[KindTraceCompare]) != 1 ||
		k[KindTraceCompare][0].Comparison == nil || len(k[KindEstimate]) != 1 || k[KindEstimate][0].Estimate == nil {
		t.Errorf("kinds: %v", k)
	}
}

func TestOpenSamplesDirectory(t *testing.T) {
	ws := New(context.Background(), nil)
	ws.Open("../testdata")
	ws.Wait()
	k := byKind(ws)
	// testdata holds the Megatron pair, the generated pair, snapshots,
	// synthetic snapshots, the four estimates (one hostile), and the log and export
	// fixtures (each folder a run of its own, not a comparison).
	if len(k[KindTraceCompare]) != 2 {
		t.Errorf("comparisons: %d", len(k[KindTraceCompare]))
	}
	if len(k[KindTraceRun]) < 2 {
		t.Errorf("the log and export folders open as runs: %d", len(k[KindTraceRun]))
	}
	if len(k[KindSnapshot]) < 7 || len(k[KindEstimate]) != 4 {
		t.Errorf("snapshots %d estimates %d", len(k[KindSnapshot]), len(k[KindEstimate]))
	}
	for _, s := range ws.Sources() {
		// Small files are never let go (DefaultKeep).
		if s.State != Loaded {
			t.Errorf("%s: %s %v", s.Path, s.State, s.Err)
		}
	}
}

func TestReloadKeepsLastGoodData(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "snap.pickle")
	copyFile(t, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle", p)
	ws := New(context.Background(), nil)
	id := ws.Add(KindSnapshot, p)
	ws.Wait()
	good := ws.Source(id)
	if good.State != Loaded {
		t.Fatal(good.Err)
	}
	// A half-written file: the reload fails, the data stays.
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	ws.Reload(id)
	ws.Wait()
	s := ws.Source(id)
	if s.State != Loaded || s.Analysis != good.Analysis || s.Err == nil || s.Generation != 1 {
		t.Errorf("failed reload: state %s err %v gen %d, data kept %v", s.State, s.Err, s.Generation, s.Analysis == good.Analysis)
	}
	// What a view may hold is replaced only by a good reload: only then
	// has Released memory to give back.
	replaced := func() bool {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		return ws.replaced
	}
	if replaced() {
		t.Error("a first load and a failed reload replaced nothing, yet Released would free memory")
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ws.Reload(id)
	ws.Wait()
	if s := ws.Source(id); s.Err != nil || s.Generation != 2 {
		t.Errorf("good reload: err %v gen %d", s.Err, s.Generation)
	}
	if !replaced() {
		t.Error("a good reload replaced the analysis, yet Released would free nothing")
	}
	ws.Released()
	if replaced() {
		t.Error("Released left the replaced data pending")
	}
	// A source removed (its file rotated away) leaves its data to give
	// back too; one that never loaded leaves nothing.
	ws.Remove(ws.AddFailed(filepath.Join(dir, "gone.pickle"), os.ErrNotExist))
	if replaced() {
		t.Error("removing a source without data left memory to give back")
	}
	ws.Remove(id)
	if !replaced() {
		t.Error("removing a loaded source left nothing for Released")
	}
	ws.Released()
	if replaced() {
		t.Error("Released left the removed data pending")
	}
}

const iterTmpl = `"%d": {"samples": [{"timestamp_s": 0.0, "reserved_memory_MB": 100.0, "allocated_memory_MB": %d.0}, {"timestamp_s": 1.0, "reserved_memory_MB": 100.0, "allocated_memory_MB": %d.0}], "peak_allocated_MB": -1}`

func traceJSON(iters int) string {
	var parts []string
	for i := 0; i < iters; i++ {
		s := strings.Replace(iterTmpl, "%d", itoa(i), 1)
		s = strings.Replace(s, "%d", itoa(10*(i+1)), 1)
		s = strings.Replace(s, "%d", itoa(10*(i+1)+5), 1)
		parts = append(parts, s)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func itoa(i int) string { return strconv.Itoa(i) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestWatchAppendsAndTruncatedWrite writes a trace in steps, with a
// truncated write in between, and sees the model follow.
func TestWatchAppendsAndTruncatedWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "memory_trace_rank0.json")
	if err := os.WriteFile(p, []byte(traceJSON(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := New(ctx, nil)
	ws.Open(dir)
	ws.Wait()
	srcs := ws.Sources()
	if len(srcs) != 1 || srcs[0].Kind != KindTraceRun || srcs[0].State != Loaded {
		t.Fatalf("sources: %v", srcs)
	}
	id := srcs[0].ID
	iters := func() int {
		s := ws.Source(id)
		if s.Real == nil || len(s.Real.Ranks) == 0 {
			return 0
		}
		return len(s.Real.Ranks[0].Iterations)
	}
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()

	if err := os.WriteFile(p, []byte(traceJSON(2)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "2 iterations", func() bool { return iters() == 2 })

	full := traceJSON(3)
	if err := os.WriteFile(p, []byte(full[:len(full)-40]), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed reload", func() bool { return ws.Source(id).Err != nil })
	if iters() != 2 {
		t.Errorf("a truncated write must keep the previous data: %d iterations", iters())
	}
	if err := os.WriteFile(p, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 iterations", func() bool { return iters() == 3 && ws.Source(id).Err == nil })
	if ws.Source(id).ChangedAt.IsZero() {
		t.Error("ChangedAt not set")
	}

	// A new snapshot dropped into the watched directory becomes a source.
	copyFile(t, "../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle", filepath.Join(dir, "new.pickle"))
	waitFor(t, "the new snapshot", func() bool {
		for _, s := range ws.Sources() {
			if s.Kind == KindSnapshot && s.State == Loaded {
				return true
			}
		}
		return false
	})
}

// TestWatchBurstRenameAndNewRuns: a burst of 10,000 writes reloads once;
// a file replaced by rename reloads; a run that gains sim/ becomes a
// comparison; a snapshot renamed into place becomes a source; nothing keeps
// running after the watcher stops.
func TestWatchBurstRenameAndNewRuns(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	real := filepath.Join(run, "real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(real, "memory_trace_rank0.json")
	if err := os.WriteFile(p, []byte(traceJSON(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ws := New(ctx, nil)
	ws.Open(dir)
	ws.Wait()
	if n := len(ws.Sources()); n != 1 {
		t.Fatalf("%d sources", n)
	}
	id := ws.Sources()[0].ID
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}

	// A burst: 10,000 writes of the same file, then quiet. On a loaded
	// machine the burst itself may pause for longer than Debounce: each
	// such quiet period may reload (once, or twice when the reload read a
	// half-written file and was retried), never each write.
	body := []byte(traceJSON(2))
	quiet := 1 // the one after the burst
	last := time.Now()
	for i := 0; i < 10000; i++ {
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if now.Sub(last) >= Debounce {
			quiet++
		}
		last = now
	}
	iters := func() int {
		s := ws.Source(id)
		if s.Real == nil || len(s.Real.Ranks) == 0 {
			return 0
		}
		return len(s.Real.Ranks[0].Iterations)
	}
	waitFor(t, "the burst's final state", func() bool { return iters() == 2 && ws.Source(id).Err == nil })
	time.Sleep(rescanEvery + 2*Debounce) // a rescan must not reload it again
	if n := w.reloads.Load(); n < 1 || n > int64(2*quiet) {
		t.Errorf("a burst of 10,000 writes with %d quiet period(s) reloaded %d times, want 1 to %d", quiet, n, 2*quiet)
	}
	if iters() != 2 {
		t.Errorf("the final state shows %d iterations, want the last write's 2", iters())
	}

	// Replaced by rename (an atomic writer).
	tmp := filepath.Join(real, ".tmp-rank0")
	if err := os.WriteFile(tmp, []byte(traceJSON(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the renamed file", func() bool {
		s := ws.Source(id)
		return s.Real != nil && len(s.Real.Ranks) > 0 && len(s.Real.Ranks[0].Iterations) == 3
	})

	// The run gains a simulated side: sim/ appears with a trace.
	sim := filepath.Join(run, "sim")
	if err := os.MkdirAll(sim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sim, "memory_trace_rank0.json"), []byte(traceJSON(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the comparison", func() bool {
		for _, s := range ws.Sources() {
			if s.Kind.IsTrace() && s.Real != nil && s.Sim != nil {
				return true
			}
		}
		return false
	})
	// The regrouped source compares real/ with sim/, not the parent
	// folder (which holds both) with real/.
	for _, s := range ws.Sources() {
		if s.Kind != KindTraceCompare {
			continue
		}
		if len(s.Paths) != 2 || s.Paths[0] != real || s.Paths[1] != sim || len(s.Sim.Ranks) != 1 ||
			filepath.Dir(s.Sim.Ranks[0].Path) != sim || len(s.Real.Ranks) != 1 || filepath.Dir(s.Real.Ranks[0].Path) != real {
			t.Errorf("regrouped comparison: paths %q, real %d ranks, sim %d ranks", s.Paths, len(s.Real.Ranks), len(s.Sim.Ranks))
		}
	}

	// A snapshot written under a temporary name, then renamed into place.
	tmpSnap := filepath.Join(run, "late.pickle.part")
	copyFile(t, "../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle", tmpSnap)
	if err := os.Rename(tmpSnap, filepath.Join(run, "late.pickle")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the late snapshot", func() bool {
		for _, s := range ws.Sources() {
			if s.Kind == KindSnapshot && s.State == Loaded && strings.HasSuffix(s.Paths[0], "late.pickle") {
				return true
			}
		}
		return false
	})

	cancel()
	w.Wait()
	ws.Wait()
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before+1 })
}

// TestRecordingsAreNotPairedUnasked: two recordings side by side open as
// two runs; two runs named real and sim become a comparison.
func TestRecordingsAreNotPairedUnasked(t *testing.T) {
	for _, c := range []struct {
		source string
		want   SourceKind
		n      int
	}{{"nvml", KindTraceRun, 2}, {"", KindTraceCompare, 1}} {
		dir := t.TempDir()
		for _, side := range []string{"real", "sim"} {
			it := trace.Iteration{Key: "0", T: []float64{0, 1}, Allocated: []float64{1, 2}, Reserved: []float64{2, 3},
				PeakAllocated: trace.Unset, Static: trace.Unset, Theoretical: trace.Unset, Source: c.source}
			if err := os.MkdirAll(filepath.Join(dir, side), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := trace.WriteMegatron(filepath.Join(dir, side, "memory_trace_rank0.json"), []trace.Iteration{it}); err != nil {
				t.Fatal(err)
			}
		}
		ws := New(context.Background(), nil)
		ws.Open(dir)
		ws.Wait()
		k := byKind(ws)
		if len(k[c.want]) != c.n {
			t.Errorf("source %q: %d %s sources, want %d (%v)", c.source, len(k[c.want]), c.want, c.n, k)
		}
	}
}

// TestOpenQuiet: the current directory opened without being named adds
// nothing when it holds nothing (no error on a first run), and its data
// when it does; a named empty directory is still an error.
func TestOpenQuiet(t *testing.T) {
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("hello"), 0o644)
	ws := New(context.Background(), nil)
	ws.OpenQuiet(empty)
	ws.Wait()
	if n := len(ws.Sources()); n != 0 {
		t.Fatalf("empty folder opened quietly gave %d sources", n)
	}
	ws.Open(empty)
	ws.Wait()
	if s := ws.Sources(); len(s) != 1 || s[0].State != Failed {
		t.Fatalf("a named empty folder must fail: %+v", s)
	}
	full := t.TempDir()
	copyFile(t, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle", filepath.Join(full, "a.pickle"))
	ws = New(context.Background(), nil)
	ws.OpenQuiet(full)
	ws.Wait()
	if s := ws.Sources(); len(s) != 1 || s[0].State != Loaded {
		t.Fatalf("quiet open of a folder with a snapshot: %+v", s)
	}
}

// TestOpenOnce: a file named twice, or named beside its folder (in either
// order, by a relative and an absolute path), is one source, pinned as a
// named file is; the folder's other files are sources of their own.
func TestOpenOnce(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.pickle"), filepath.Join(dir, "b.pickle")
	copyFile(t, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle", a)
	copyFile(t, "../testdata/snapshots/synthetic/proto2.pickle", b)
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, paths := range [][]string{{a, a}, {a, dir}, {dir, a}, {rel, dir}} {
		ws := New(context.Background(), nil)
		ws.Open(paths...)
		ws.Wait()
		count := map[string]int{}
		for _, s := range ws.Sources() {
			abs, _ := filepath.Abs(s.Path)
			count[abs]++
			if abs == a && !s.Pinned {
				t.Errorf("%v: the named file is not pinned", paths)
			}
		}
		want := 1
		if slices.Contains(paths, dir) {
			want = 2
		}
		if count[a] != 1 || len(count) != want {
			t.Errorf("%v: sources %v", paths, count)
		}
	}
}

// TestWatchRotatingSnapshots: training that keeps only its latest snapshot
// (write a new name, delete the old) leaves one source per file that
// exists, not one per file ever seen; a file the user named stays, with
// the error, when it goes away.
func TestWatchRotatingSnapshots(t *testing.T) {
	sample, err := os.ReadFile("../testdata/snapshots/h200/train.pickle")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pinned := filepath.Join(t.TempDir(), "named.pickle")
	for _, p := range []string{filepath.Join(dir, "snap_0.pickle"), pinned} {
		if err := os.WriteFile(p, sample, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := New(ctx, nil)
	ws.Open(dir, pinned)
	ws.Wait()
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	snapshots := func() (names []string) {
		for _, s := range ws.Sources() {
			if s.Kind == KindSnapshot && !s.Pinned {
				names = append(names, filepath.Base(s.Paths[0]))
			}
		}
		return names
	}
	for i := 1; i <= 4; i++ {
		next := filepath.Join(dir, fmt.Sprintf("snap_%d.pickle", i))
		if err := os.WriteFile(next, sample, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("snap_%d.pickle", i-1))); err != nil {
			t.Fatal(err)
		}
		want := filepath.Base(next)
		waitFor(t, "only "+want, func() bool {
			names := snapshots()
			return len(names) == 1 && names[0] == want
		})
	}
	if err := os.Remove(pinned); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the named file's error", func() bool {
		for _, s := range ws.Sources() {
			if s.Pinned && s.Err != nil && s.Analysis != nil {
				return true
			}
		}
		return false
	})
}

// analysedIDs lists the allocator snapshots whose analyses are in memory,
// checking that the others were let go with their summary kept.
func analysedIDs(t *testing.T, ws *Workspace) []int {
	t.Helper()
	var ids []int
	for _, s := range ws.Sources() {
		if s.Kind != KindSnapshot {
			continue
		}
		switch {
		case s.State == Loaded && s.Analysis != nil:
			ids = append(ids, s.ID)
		case s.State == Unloaded: // let go, or never loaded (lazy)
			if s.Analysis != nil || s.Generation > 0 && (s.Summary.Format == "" || s.Summary.Devices == 0) {
				t.Errorf("%s unloaded: analysis %v, generation %d, summary %+v", s.Path, s.Analysis != nil, s.Generation, s.Summary)
			}
		default:
			t.Errorf("%s: %s %v", s.Path, s.State, s.Err)
		}
	}
	return ids
}

// keepSample is the small snapshot the tests of the memory bound copy.
const keepSample = "../testdata/snapshots/synthetic/two_devices.pickle"

// readKeepSample returns keepSample's bytes.
func readKeepSample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(keepSample)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// footprintOfFile is Summary.Footprint of the snapshot in path.
func footprintOfFile(t *testing.T, path string) int64 {
	t.Helper()
	res, err := Load(context.Background(), KindSnapshot, []string{path}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return summaryOf(res.Analysis).Footprint
}

// TestFootprintOf: the estimate counts every device's trace entries and
// every segment's blocks.
func TestFootprintOf(t *testing.T) {
	s := &snapshot.Snapshot{
		Traces:   [][]snapshot.TraceEntry{make([]snapshot.TraceEntry, 3), nil, make([]snapshot.TraceEntry, 2)},
		Segments: []snapshot.Segment{{Blocks: make([]snapshot.Block, 4)}, {Blocks: make([]snapshot.Block, 1)}},
	}
	if got, want := footprintOf(s), int64(footprintBase+5*footprintPerEntry+5*footprintPerBlock); got != want {
		t.Errorf("footprint %d, want %d", got, want)
	}
}

// TestKeepBoundsAnalysedSnapshots: a folder of snapshots whose analyses
// take more than the workspace keeps leaves those that fit analysed (on
// both sides of the bound), the last loaded; Use loads one again and never
// lets go of those it names; a watcher's reload of one not in memory waits
// for a use; one whose file went bad while not in memory fails with the
// file's error.
func TestKeepBoundsAnalysedSnapshots(t *testing.T) {
	sample := readKeepSample(t)
	fp := footprintOfFile(t, keepSample)
	const files = 6
	dir := t.TempDir()
	var paths []string // named: each loads (see TestLazyFolder)
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("snap_%d.pickle", i))
		if err := os.WriteFile(p, sample, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, c := range []struct {
		keep int64
		want int
	}{{1, 1}, {2*fp - 1, 1}, {2 * fp, 2}, {5 * fp, 5}, {6*fp - 1, 5}, {6 * fp, 6}, {DefaultKeep, 6}} {
		ws := New(context.Background(), nil)
		ws.SetKeep(c.keep)
		ws.Open(paths...)
		ws.Wait()
		if got := len(analysedIDs(t, ws)); got != c.want {
			t.Errorf("keep %d bytes (%d a file): %d analysed, want %d", c.keep, fp, got, c.want)
		}
	}

	ws := New(context.Background(), nil)
	ws.SetKeep(2 * fp)
	ws.Open(paths...)
	ws.Wait()
	var unloaded []int
	for _, s := range ws.Sources() {
		if s.State == Unloaded {
			unloaded = append(unloaded, s.ID)
		}
	}
	if len(unloaded) != files-2 {
		t.Fatalf("%d unloaded, want %d", len(unloaded), files-2)
	}
	want := ws.Source(analysedIDs(t, ws)[0]).Summary
	a, b := unloaded[0], unloaded[1]
	if got := ws.Source(a).Summary; got != want {
		t.Errorf("summary kept %+v, want %+v (the same file)", got, want)
	}
	ws.Use(a)
	ws.Wait()
	if s := ws.Source(a); s.State != Loaded || s.Analysis == nil || s.Generation != 2 {
		t.Fatalf("used: %s, generation %d", s.State, s.Generation)
	}
	ws.SetKeep(1) // all but those in view (and the last used, a) go
	if got := analysedIDs(t, ws); len(got) != 1 || got[0] != a {
		t.Errorf("keep 1 byte with %d in view: analysed %v", a, got)
	}
	ws.Use(a, b)
	ws.Wait()
	if got := analysedIDs(t, ws); len(got) != 2 || !slices.Contains(got, a) || !slices.Contains(got, b) {
		t.Errorf("in view %d and %d, analysed %v", a, b, got)
	}

	c := unloaded[2]
	ws.Reload(c) // a file event for a source not in memory
	ws.Wait()
	if s := ws.Source(c); s.State != Unloaded || s.ChangedAt.IsZero() {
		t.Errorf("reloaded while not in memory: %s, changed at %v", s.State, s.ChangedAt)
	}
	bad := ws.Source(c).Paths[0]
	if err := os.WriteFile(bad, sample[:len(sample)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	ws.Use(c)
	ws.Wait()
	if s := ws.Source(c); s.State != Failed || s.Err == nil || !strings.Contains(s.Err.Error(), filepath.Base(bad)) {
		t.Errorf("truncated while not in memory: %s, %v", s.State, s.Err)
	}
}

// TestWatchAccumulatingSnapshots: a watched folder where training adds a
// snapshot after another, keeping them all, keeps the analyses that fit.
func TestWatchAccumulatingSnapshots(t *testing.T) {
	sample := readKeepSample(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "snap_0.pickle"), sample, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := New(ctx, nil)
	ws.SetKeep(2 * footprintOfFile(t, keepSample))
	ws.Open(dir)
	ws.Wait()
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	for i := 1; i < 6; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("snap_%d.pickle", i)), sample, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("snapshot %d loaded", i), func() bool {
			loaded := 0
			for _, s := range ws.Sources() {
				if s.Kind == KindSnapshot && s.Generation > 0 && s.State != Loading {
					loaded++
				}
			}
			return loaded == i+1
		})
		ws.Wait()
		if got := analysedIDs(t, ws); len(got) > 2 {
			t.Fatalf("after %d snapshots, %d analysed", i+1, len(got))
		}
	}
	last := ws.Sources()[len(ws.Sources())-1]
	if last.State != Loaded {
		t.Errorf("the newest snapshot is %s", last.State)
	}
}

// TestLazyFolder: snapshots met while walking a folder load while the
// analyses held and loading stay within keep (one at least), the others
// wait for a use, which loads them (files named always load: see
// TestKeepBoundsAnalysedSnapshots). A file's guess is its size, ten times
// a gzip file's.
func TestLazyFolder(t *testing.T) {
	sample := readKeepSample(t)
	fp := footprintOfFile(t, keepSample)
	guess := max(int64(len(sample)), footprintBase)
	dir := t.TempDir()
	const files = 6
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("snap_%d.pickle", i)), sample, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	count := func(ws *Workspace) (loaded, waiting int) {
		for _, s := range ws.Sources() {
			switch {
			case s.State == Loaded && s.Generation == 1:
				loaded++
			case s.State == Unloaded && s.Generation == 0:
				waiting++
			default:
				t.Errorf("%s: %s, generation %d, %v", s.Path, s.State, s.Generation, s.Err)
			}
		}
		return loaded, waiting
	}
	for _, keep := range []int64{1, KeepAll} {
		ws := New(context.Background(), nil)
		ws.SetKeep(keep)
		ws.Open(dir)
		ws.Wait()
		loaded, waiting := count(ws)
		if want := map[bool]int{true: files, false: 1}[keep == KeepAll]; loaded != want || waiting != files-want {
			t.Errorf("keep %d: %d loaded, %d waiting; want %d loaded", keep, loaded, waiting, want)
		}
	}

	// deferLoad on both sides of keep, with one analysis held.
	for _, c := range []struct {
		keep int64
		wait bool
	}{{fp + guess, false}, {fp + guess - 1, true}} {
		ws := New(context.Background(), nil)
		ws.SetKeep(c.keep)
		ws.sources = []*Source{
			{ID: 1, Kind: KindSnapshot, State: Loaded, Analysis: &snapshot.Analysis{}, Summary: Summary{Footprint: fp}},
			{ID: 2, Kind: KindSnapshot, Paths: []string{filepath.Join(dir, "snap_0.pickle")}},
		}
		ws.lazy[2] = true
		if wait := ws.deferLoad(ws.sources[1]); wait != c.wait {
			t.Errorf("keep %d, %d held, a guess of %d: wait %v", c.keep, fp, guess, wait)
		}
		if wait := ws.deferLoad(ws.sources[1]); wait {
			t.Error("a snapshot's load was deferred twice")
		}
	}

	ws := New(context.Background(), nil)
	ws.SetKeep(1)
	ws.Open(dir)
	ws.Wait()
	var id int
	for _, s := range ws.Sources() {
		if s.State == Unloaded {
			id = s.ID
		}
	}
	ws.Use(id)
	ws.Wait()
	if s := ws.Source(id); s.State != Loaded || s.Analysis == nil {
		t.Errorf("used, a snapshot that waited: %s %v", s.State, s.Err)
	}

	gz := filepath.Join(t.TempDir(), "snap.pickle.gz")
	copyFile(t, "../testdata/snapshots/synthetic/base.pickle.gz", gz)
	st, err := os.Stat(gz)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := guessFootprint(gz), max(10*st.Size(), footprintBase); got != want {
		t.Errorf("gzip guess %d, want %d", got, want)
	}
	if got, want := guessFootprint(filepath.Join(dir, "snap_0.pickle")), guess; got != want {
		t.Errorf("guess %d, want %d", got, want)
	}
}

// TestLazyFolderNewestFirst: of a folder's snapshots, those that fit the
// bound are the newest files, whatever their names.
func TestLazyFolderNewestFirst(t *testing.T) {
	sample := readKeepSample(t)
	dir := t.TempDir()
	now := time.Now()
	// Names in the order of their times: a, first by name, is the oldest.
	for i, name := range []string{"a.pickle", "m.pickle", "z.pickle"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, sample, 0o644); err != nil {
			t.Fatal(err)
		}
		at := now.Add(time.Duration(i-3) * time.Hour)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	ws := New(context.Background(), nil)
	ws.SetKeep(1)
	ws.Open(dir)
	ws.Wait()
	var loaded []string
	for _, s := range ws.Sources() {
		if s.State == Loaded {
			loaded = append(loaded, filepath.Base(s.Paths[0]))
		}
	}
	if len(loaded) != 1 || loaded[0] != "z.pickle" {
		t.Errorf("loaded %v, want the newest file, z.pickle", loaded)
	}
	if names := ws.Sources(); filepath.Base(names[0].Paths[0]) != "a.pickle" || filepath.Base(names[2].Paths[0]) != "z.pickle" {
		t.Errorf("sources are listed in name order: %v", names)
	}
}

// TestGuessReleasedWhenRemoved: a folder's snapshot removed before its
// load ran gives back its guess, so later walks are not deferred for it.
func TestGuessReleasedWhenRemoved(t *testing.T) {
	sample := readKeepSample(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "snap.pickle"), sample, 0o644); err != nil {
		t.Fatal(err)
	}
	ws := New(context.Background(), nil)
	held := 0
	for len(ws.sem) < cap(ws.sem) { // hold every slot: the load waits for its turn
		ws.sem <- struct{}{}
		held++
	}
	ws.Open(dir)
	id := ws.Sources()[0].ID
	ws.mu.Lock()
	guessed := ws.guessed
	ws.mu.Unlock()
	if guessed == 0 {
		t.Fatal("the walk's snapshot holds no guess while its load waits")
	}
	ws.Remove(id)
	// Give back exactly the slots taken: draining until the channel is
	// empty could also take the load's own slot once it got one, and its
	// release would then wait forever (a hang seen once under -race).
	for range held {
		<-ws.sem
	}
	ws.Wait()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.guessed != 0 || len(ws.guesses) != 0 {
		t.Errorf("after the removed source's load: guessed %d, %v", ws.guessed, ws.guesses)
	}
}
