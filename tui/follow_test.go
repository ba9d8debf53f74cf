package tui

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"memscope/model"
)

// followSample is a small real snapshot the tests below copy under other
// names.
const followSample = "../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle"

// writeSnapshot copies followSample to dir/name, modified at at.
func writeSnapshot(t *testing.T, dir, name string, at time.Time) string {
	t.Helper()
	b, err := os.ReadFile(followSample)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
	return p
}

// shownName is the file name of the snapshot the snapshot tabs show.
func shownName(a *App) string {
	if s := a.source(a.c.snapSel); s != nil {
		return filepath.Base(s.Path)
	}
	return ""
}

// TestSnapshotShownIsNewest: a folder of snapshots opens on the newest
// file (whatever the names' order), the first listed of files written at
// one instant; a folder of ranks on its rank overview.
func TestSnapshotShownIsNewest(t *testing.T) {
	type file struct {
		name string
		age  time.Duration
	}
	h := time.Hour
	for _, tc := range []struct {
		name  string
		files []file
		want  string
	}{
		{"steps an hour apart: the newest", []file{{"a.pickle", 2 * h}, {"b.pickle", h}, {"c.pickle", 3 * h}}, "b.pickle"},
		{"newest listed last", []file{{"a.pickle", 2 * h}, {"b.pickle", 3 * h}, {"c.pickle", h}}, "c.pickle"},
		{"steps a millisecond apart: the newest", []file{{"snap_step100.pickle", h + 2*time.Millisecond}, {"snap_step200.pickle", h + time.Millisecond}, {"snap_step300.pickle", h}}, "snap_step300.pickle"},
		{"written at one instant: the first listed", []file{{"a.pickle", h}, {"b.pickle", h}, {"c.pickle", h}}, "a.pickle"},
		{"ranks: the rank overview", []file{{"rank0.pickle", 2 * h}, {"rank1.pickle", h}}, "."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			now := time.Now()
			for _, f := range tc.files {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f.name)), 0o755); err != nil {
					t.Fatal(err)
				}
				writeSnapshot(t, dir, f.name, now.Add(-f.age))
			}
			ctx := context.Background()
			ws := model.New(ctx, nil)
			ws.Open(dir)
			ws.Wait()
			a := New(ctx, ws, Options{LiveErr: errors.New("no GPUs in tests")})
			got := ""
			if s := a.source(a.c.snapSel); s != nil {
				got, _ = filepath.Rel(dir, s.Path)
			}
			if got != tc.want {
				t.Fatalf("shown %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNamedSnapshotShownFirst: files named on the command line are shown
// before newer ones, the first named first.
func TestNamedSnapshotShownFirst(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	now := time.Now()
	old := writeSnapshot(t, dir, "old.pickle", now.Add(-2*time.Hour))
	older := writeSnapshot(t, dir, "older.pickle", now.Add(-3*time.Hour))
	writeSnapshot(t, other, "newer.pickle", now.Add(-time.Hour))
	for _, tc := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"two files, the newer named first", []string{old, older}, "old.pickle"},
		{"two files, the older named first", []string{older, old}, "older.pickle"},
		{"a file and a folder with a newer one", []string{old, other}, "old.pickle"},
		{"two folders: the newest of both", []string{other, dir}, "newer.pickle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ws := model.New(ctx, nil)
			ws.Open(tc.paths...)
			ws.Wait()
			a := New(ctx, ws, Options{LiveErr: errors.New("no GPUs in tests")})
			if got := shownName(a); got != tc.want {
				t.Fatalf("shown %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSnapshotFollowsNewArrivals: in a watched folder, a snapshot written
// while the explorer runs is shown once it is loaded, with a line saying
// so, until the user works in the snapshot tabs (a key) or chooses one in
// the picker; from then on new files are announced and listed, and the
// snapshot shown stays.
func TestSnapshotFollowsNewArrivals(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	dir := t.TempDir()
	now := time.Now()
	writeSnapshot(t, dir, "step100.pickle", now.Add(-2*time.Hour))
	writeSnapshot(t, dir, "step200.pickle", now.Add(-time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	ws := model.New(ctx, nil)
	ws.Open(dir)
	ws.Wait()
	w, err := model.Watch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); w.Wait() }()
	a := New(ctx, ws, Options{LiveErr: errors.New("no GPUs in tests")})
	a.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	if got := shownName(a); got != "step200.pickle" {
		t.Fatalf("at start: shown %q, want the newest, step200.pickle", got)
	}

	arrive := func(name string) {
		t.Helper()
		writeSnapshot(t, dir, name, time.Now())
		deadline := time.Now().Add(10 * time.Second)
		for {
			for _, s := range ws.Sources() {
				if filepath.Base(s.Path) == name && s.State == model.Loaded {
					a.Update(wsChangedMsg{})
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s was not loaded: %v", name, ws.Sources())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	arrive("step300.pickle")
	if got := shownName(a); got != "step300.pickle" {
		t.Fatalf("after a new snapshot: shown %q, want step300.pickle", got)
	}
	if s := screen(a); !strings.Contains(s, "step300.pickle, the newest (o: choose one)") {
		t.Errorf("no line says the view moved to the new snapshot:\n%s", s)
	}

	// A key in the Snapshot tab (the user works in it) keeps the snapshot
	// shown: a newer one is announced, not shown in its place.
	if a.active != tabSnapshot {
		t.Fatalf("the Snapshot tab is not in front (%v)", a.active)
	}
	press(a, "down")
	arrive("step400.pickle")
	if got := shownName(a); got != "step300.pickle" {
		t.Fatalf("after a key in the Snapshot tab, a new snapshot replaced the one shown: %q", got)
	}
	if s := screen(a); !strings.Contains(s, "newer snapshot: ") || !strings.Contains(s, "step400.pickle (o to show it)") {
		t.Errorf("the newer snapshot is not announced:\n%s", s)
	}

	// The user chooses the first snapshot in the picker: it stays.
	press(a, "o", "home", "enter")
	if got := shownName(a); got != "step100.pickle" {
		t.Fatalf("chosen in the picker: shown %q, want step100.pickle", got)
	}
	arrive("step500.pickle")
	if got := shownName(a); got != "step100.pickle" {
		t.Errorf("a new snapshot moved the user's choice to %q", got)
	}
	if a.panics > 0 {
		t.Fatal(a.internalErr)
	}
}

// TestAge: each unit on both sides of its edge, and a time ahead of the
// clock.
func TestAge(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Hour, "just now"},
		{999 * time.Millisecond, "just now"},
		{time.Second, "1s ago"},
		{59 * time.Second, "59s ago"},
		{time.Minute, "1m ago"},
		{59*time.Minute + 59*time.Second, "59m ago"},
		{time.Hour, "1h ago"},
		{48*time.Hour - time.Second, "47h ago"},
		{48 * time.Hour, "2d ago"},
		{30 * 24 * time.Hour, "30d ago"},
	} {
		if got := age(c.d); got != c.want {
			t.Errorf("age(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// TestPickerSaysWhenWritten: the picker's line of a snapshot says how long
// ago its file was written, loaded or not loaded yet.
func TestPickerSaysWhenWritten(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	dir := t.TempDir()
	writeSnapshot(t, dir, "new.pickle", time.Now().Add(-3*time.Hour-time.Minute))
	writeSnapshot(t, dir, "old.pickle", time.Now().Add(-5*time.Hour-time.Minute))
	ctx := context.Background()
	ws := model.New(ctx, nil)
	ws.SetKeep(1) // the newest loads, the other waits
	ws.Open(dir)
	ws.Wait()
	a := New(ctx, ws, Options{LiveErr: errors.New("no GPUs in tests")})
	a.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	press(a, "o")
	s := screen(a)
	for _, want := range []string{"reserved 32.00 MiB · written 3h ago ·", "not loaded yet (enter loads it) · written 5h ago ·"} {
		if !strings.Contains(s, want) {
			t.Errorf("the picker should say %q:\n%s", want, s)
		}
	}
}
