package model

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWatchListNews: a listing reports files new or changed since the last
// one, and files gone from its directory, whether a listing or a settled
// event stamped them (a rotated snapshot whose Remove event was lost);
// stamps of other directories, a subfolder's included, are not its news.
func TestWatchListNews(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	other := t.TempDir()
	for _, d := range []string{sub} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, body string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")
	inSub, inOther := filepath.Join(sub, "x.json"), filepath.Join(other, "y.json")
	write(a, "1")
	write(b, "2")
	write(inSub, "3")
	write(inOther, "4")
	w := &Watcher{stamps: map[string]stamp{}, stampsIn: map[string]map[string]bool{}}
	list := func(d string) []string {
		var news []string
		w.list(d, func(p string) { news = append(news, p) })
		slices.Sort(news)
		return news
	}
	for _, d := range []string{sub, other} {
		list(d)
	}
	if got, want := list(dir), []string{a, b, sub}; !slices.Equal(got, want) {
		t.Fatalf("first listing: %v, want %v", got, want)
	}
	if got := list(dir); len(got) != 0 {
		t.Fatalf("nothing changed, yet %v", got)
	}
	write(b, "22") // a new size
	if got, want := list(dir), []string{b}; !slices.Equal(got, want) {
		t.Fatalf("after a write: %v, want %v", got, want)
	}
	// c appears and is settled from its event before any listing, then
	// goes with its Remove event lost; a goes too.
	write(c, "5")
	info, err := os.Stat(c)
	if err != nil {
		t.Fatal(err)
	}
	w.setStamp(c, stamp{info.Size(), info.ModTime()})
	for _, p := range []string{a, c, inSub, inOther} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := list(dir), []string{a, c}; !slices.Equal(got, want) {
		t.Fatalf("after removals: %v, want %v (not the other folders' files)", got, want)
	}
	if _, ok := w.stamps[a]; ok || w.stampsIn[dir][a] || w.stampsIn[dir][c] {
		t.Fatalf("stamps of removed files remain: %v %v", w.stamps, w.stampsIn[dir])
	}
	if got, want := list(sub), []string{inSub}; !slices.Equal(got, want) {
		t.Fatalf("the subfolder: %v, want %v", got, want)
	}
	if len(w.stampsIn[sub]) != 0 {
		t.Fatalf("an emptied folder keeps stamps: %v", w.stampsIn[sub])
	}
}

// TestRescanAfter: the backstop rescans every rescanEvery until a rescan
// takes more than rescanEvery/rescanShare, then waits rescanShare times
// as long as it took.
func TestRescanAfter(t *testing.T) {
	edge := rescanEvery / rescanShare
	for _, c := range []struct{ took, want time.Duration }{
		{0, rescanEvery},
		{time.Millisecond, rescanEvery},
		{edge, rescanEvery},
		{edge + time.Millisecond, (edge + time.Millisecond) * rescanShare},
		{25 * time.Millisecond, 25 * time.Second},
	} {
		if got := rescanAfter(c.took); got != c.want {
			t.Errorf("a rescan of %v: next after %v, want %v", c.took, got, c.want)
		}
	}
}

// TestWatchFolderOpenedEmpty: a folder opened before training wrote to it
// fails ("nothing found") and is watched; a snapshot written into it, or
// into a subfolder made after (torchtitan's iteration_N/rankR_...), with
// its files written before the subfolder's watch starts, becomes a
// source, as the folder would open now, and the folder's failure goes.
func TestWatchFolderOpenedEmpty(t *testing.T) {
	const sample = "../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle"
	flat, nested := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ws := New(ctx, nil)
	ws.Open(flat, nested)
	ws.Wait()
	failed := func() int {
		n := 0
		for _, s := range ws.Sources() {
			if s.State == Failed {
				n++
			}
		}
		return n
	}
	if n := failed(); n != 2 {
		t.Fatalf("two empty folders: %d failed sources, want 2: %v", n, ws.Sources())
	}
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	loaded := func(dir string) int {
		n := 0
		for _, s := range ws.Sources() {
			if s.Kind == KindSnapshot && s.State == Loaded && strings.HasPrefix(s.Path, dir+string(filepath.Separator)) {
				n++
			}
		}
		return n
	}

	copyFile(t, sample, filepath.Join(flat, "snapshot_step100.pickle"))
	waitFor(t, "the snapshot in the folder opened empty", func() bool { return loaded(flat) == 1 })
	if n := failed(); n != 1 {
		t.Errorf("after its first snapshot, the folder still fails: %d failed sources: %v", n, ws.Sources())
	}

	// copyFile makes the subfolder and writes both files at once: they are
	// there before the watcher sees the folder. The folder then opens as it
	// would now: one rank overview.
	copyFile(t, sample, filepath.Join(nested, "iteration_10", "rank0_memory_snapshot.pickle"))
	copyFile(t, sample, filepath.Join(nested, "iteration_10", "rank1_memory_snapshot.pickle"))
	ranks := func() *Source {
		for _, s := range ws.Sources() {
			if s.Kind == KindRanks && s.Path == nested && s.State == Loaded {
				return s
			}
		}
		return nil
	}
	waitFor(t, "the rank overview of the folder", func() bool { return ranks() != nil && len(ranks().Ranks) == 2 })
	if n := failed(); n != 0 {
		t.Errorf("%d failed sources left: %v", n, ws.Sources())
	}
	fresh := New(ctx, nil)
	fresh.Open(nested)
	fresh.Wait()
	var got, want []SourceKind
	for _, s := range ws.Sources() {
		if strings.HasPrefix(s.Path+string(filepath.Separator), nested+string(filepath.Separator)) {
			got = append(got, s.Kind)
		}
	}
	for _, s := range fresh.Sources() {
		want = append(want, s.Kind)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the folder filled in gave sources %v; opened now it gives %v", got, want)
	}
}

// TestWatchQuietFolder: the current folder of a run without PATH, which
// held nothing usable, is watched, and opened again (walked) once a
// snapshot is written there, but not for any other file: such a folder
// may be a home or source folder. A snapshot in a subfolder the watcher
// does not watch shows whether a walk happened.
func TestWatchQuietFolder(t *testing.T) {
	const sample = "../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ws := New(ctx, nil)
	ws.OpenQuiet(dir)
	ws.Wait()
	if len(ws.Sources()) != 0 || !slices.Equal(ws.Quiet(), []string{dir}) {
		t.Fatalf("a folder with nothing usable: sources %v, quiet %v", ws.Sources(), ws.Quiet())
	}
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	snapshots := func() int {
		n := 0
		for _, s := range ws.Sources() {
			if s.Kind == KindSnapshot && s.State == Loaded {
				n++
			}
		}
		return n
	}

	copyFile(t, sample, filepath.Join(dir, "deep", "snap_step1.pickle")) // not watched: only a walk finds it
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("more notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * Debounce)
	if n := len(ws.Sources()); n != 0 {
		t.Fatalf("a text file in the folder: %d sources, want none (no walk): %v", n, ws.Sources())
	}

	copyFile(t, sample, filepath.Join(dir, "snap_step2.pickle"))
	waitFor(t, "both snapshots, once a snapshot is written in the folder", func() bool { return snapshots() == 2 })
	if q := ws.Quiet(); len(q) != 0 {
		t.Errorf("the folder still waits after it had snapshots: %v", q)
	}
	for _, s := range ws.Sources() {
		if s.State == Failed {
			t.Errorf("failed source: %v", s)
		}
	}
}

// TestWatchRunBesideUnrelatedRun: a watched run whose parent holds another
// run folder, neither name saying which is simulated (two folders in
// /tmp), stays a run when the folder changes, as opening it would leave
// it; a sibling named sim/ still makes a comparison.
func TestWatchRunBesideUnrelatedRun(t *testing.T) {
	parent := t.TempDir()
	runA, runB := filepath.Join(parent, "emptyrun"), filepath.Join(parent, "ht")
	const src = "../testdata/traces/megatron_trace_memory/real/memory_trace_rank0_wd4_tp1_pp2_l32_bs1.json"
	copyFile(t, src, filepath.Join(runB, "memory_trace_rank0_wd4_tp1_pp2_l32_bs1.json"))
	copyFile(t, src, filepath.Join(runA, "memory_trace_rank0_wd4_tp1_pp2_l32_bs1.json"))
	ctx, cancel := context.WithCancel(context.Background())
	ws := New(ctx, nil)
	ws.Open(runA)
	ws.Wait()
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	kind := func() SourceKind {
		srcs := ws.Sources()
		if len(srcs) != 1 {
			t.Fatalf("sources: %v", srcs)
		}
		return srcs[0].Kind
	}
	if k := kind(); k != KindTraceRun {
		t.Fatalf("opened as %s", k)
	}
	copyFile(t, src, filepath.Join(runA, "memory_trace_rank2_wd4_tp1_pp2_l32_bs1.json"))
	waitFor(t, "the new rank, or another kind", func() bool {
		s := ws.Sources()[0]
		return s.Kind != KindTraceRun || s.Real != nil && len(s.Real.Ranks) == 2
	})
	time.Sleep(3 * Debounce) // the parent's news settles too
	if k := kind(); k != KindTraceRun {
		t.Errorf("a run beside an unrelated run became a %s", k)
	}

	// A folder named as the simulation pairs them.
	if err := os.Rename(runB, filepath.Join(parent, "sim")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the comparison", func() bool { return kind() == KindTraceCompare })
}

// TestWatchNewFoldersBounded: folders made after the watch starts are
// followed two levels into a folder opened by name and none beside a file
// opened alone (a tree checked out beside it is not walked); new files
// beside that file still become sources.
func TestWatchNewFoldersBounded(t *testing.T) {
	const sample = "../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle"
	root, beside := t.TempDir(), t.TempDir()
	copyFile(t, sample, filepath.Join(root, "snap_step1.pickle"))
	alone := filepath.Join(beside, "alone.pickle")
	copyFile(t, sample, alone)
	ctx, cancel := context.WithCancel(context.Background())
	ws := New(ctx, nil)
	ws.Open(root, alone)
	ws.Wait()
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	has := func(p string) bool {
		for _, s := range ws.Sources() {
			if s.Path == p {
				return true
			}
		}
		return false
	}
	followed := []string{
		filepath.Join(root, "a", "x.pickle"),
		filepath.Join(root, "a", "b", "y.pickle"),
		filepath.Join(beside, "next.pickle"),
	}
	ignored := []string{
		filepath.Join(root, "a", "b", "c", "z.pickle"),
		filepath.Join(beside, "tree", "w.pickle"),
	}
	for _, p := range append(followed, ignored...) {
		copyFile(t, sample, p)
	}
	for _, p := range followed {
		waitFor(t, p, func() bool { return has(p) })
	}
	time.Sleep(3 * Debounce)
	for _, p := range ignored {
		if has(p) {
			t.Errorf("%s became a source: its folder is past the levels followed", p)
		}
	}
}

// TestWatchDropsDeletedTrace: a trace file that appeared in a watched
// folder and was deleted is dropped, as a rotated snapshot is, not kept as
// a failed source.
func TestWatchDropsDeletedTrace(t *testing.T) {
	const sample = "../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle"
	root := t.TempDir()
	copyFile(t, sample, filepath.Join(root, "snap_step1.pickle"))
	ctx, cancel := context.WithCancel(context.Background())
	ws := New(ctx, nil)
	ws.Open(root)
	ws.Wait()
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	log := filepath.Join(root, "train.log")
	copyFile(t, "../testdata/traces/logs/megatron_logger.log", log)
	source := func() *Source {
		for _, s := range ws.Sources() {
			if s.Path == log {
				return s
			}
		}
		return nil
	}
	waitFor(t, "the log as a source", func() bool { return source() != nil })
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted log dropped", func() bool { return source() == nil })
	for _, s := range ws.Sources() {
		if s.Err != nil {
			t.Errorf("failed source left: %v", s)
		}
	}
}

// TestFollowIn: the levels followed in a file's folder: two in a folder
// opened by name, one fewer a level down, none past that or outside any
// (a sibling whose name begins with the folder's is outside), the nearest
// folder deciding; a relative folder of a file as its absolute path.
func TestFollowIn(t *testing.T) {
	root := t.TempDir()
	j := func(p ...string) string { return filepath.Join(append([]string{root}, p...)...) }
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, j("runs", "a"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir     string
		folders []string
		want    int
	}{
		{j("runs"), []string{j("runs")}, followSource},
		{j("runs", "a"), []string{j("runs")}, followSource - 1},
		{j("runs", "a", "b"), []string{j("runs")}, 0},
		{j("runs", "a", "b", "c"), []string{j("runs")}, followFile},
		{j("runs2"), []string{j("runs")}, followFile},
		{root, []string{j("runs")}, followFile},
		{j("runs", "a", "b"), []string{j("runs"), j("runs", "a", "b")}, followSource},
		{rel, []string{j("runs")}, followSource - 1},
		{j("x"), nil, followFile},
	} {
		if got := followIn(c.dir, c.folders); got != c.want {
			t.Errorf("followIn(%s, %v) = %d, want %d", c.dir, c.folders, got, c.want)
		}
	}
}

// TestWatchDeletedFolderKept: a run folder opened by name that is deleted
// keeps its source (an error meanwhile), and loads again when the folder
// is made again (a training run that clears its dump folder first).
func TestWatchDeletedFolderKept(t *testing.T) {
	run := filepath.Join(t.TempDir(), "run")
	copyRun := func() {
		es, err := os.ReadDir("../testdata/traces/megatron_trace_memory/real")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			copyFile(t, filepath.Join("../testdata/traces/megatron_trace_memory/real", e.Name()), filepath.Join(run, e.Name()))
		}
	}
	copyRun()
	ctx, cancel := context.WithCancel(context.Background())
	ws := New(ctx, nil)
	ws.Open(run)
	ws.Wait()
	if n := len(ws.Sources()); n != 1 || ws.Sources()[0].Kind != KindTraceRun || ws.Sources()[0].Err != nil {
		t.Fatalf("the run: %v", ws.Sources())
	}
	id := ws.Sources()[0].ID
	w, err := Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	if err := os.RemoveAll(run); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted run's error", func() bool { s := ws.Source(id); return s != nil && s.Err != nil })
	copyRun()
	waitFor(t, "the run made again, loaded", func() bool { s := ws.Source(id); return s != nil && s.Err == nil })
}
