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
// file, and on the first listed of files written within a minute of it
// (the ranks of one dump), on both sides of that minute.
func TestSnapshotShownIsNewest(t *testing.T) {
	for _, tc := range []struct {
		name string
		ages [3]time.Duration // of a, b and c.pickle
		want string
	}{
		{"steps an hour apart: the newest", [3]time.Duration{2 * time.Hour, time.Hour, 3 * time.Hour}, "b.pickle"},
		{"newest listed last", [3]time.Duration{2 * time.Hour, 3 * time.Hour, time.Hour}, "c.pickle"},
		{"a minute older: one dump, the first listed", [3]time.Duration{time.Hour + newestBatch, time.Hour, time.Hour + 30*time.Second}, "a.pickle"},
		{"a minute and a second older: not of the dump", [3]time.Duration{time.Hour + newestBatch + time.Second, time.Hour, time.Hour + 30*time.Second}, "b.pickle"},
		{"copied together: the first listed", [3]time.Duration{time.Hour, time.Hour, time.Hour}, "a.pickle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			now := time.Now()
			for i, name := range []string{"a.pickle", "b.pickle", "c.pickle"} {
				writeSnapshot(t, dir, name, now.Add(-tc.ages[i]))
			}
			ctx := context.Background()
			ws := model.New(ctx, nil)
			ws.Open(dir)
			ws.Wait()
			a := New(ctx, ws, Options{LiveErr: errors.New("no GPUs in tests")})
			if got := shownName(a); got != tc.want {
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
// so, until the user chooses one in the picker; from then on new files
// are listed and the choice stays.
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

	// The user chooses the first snapshot in the picker: it stays.
	press(a, "o", "home", "enter")
	if got := shownName(a); got != "step100.pickle" {
		t.Fatalf("chosen in the picker: shown %q, want step100.pickle", got)
	}
	arrive("step400.pickle")
	if got := shownName(a); got != "step100.pickle" {
		t.Errorf("a new snapshot moved the user's choice to %q", got)
	}
	if a.panics > 0 {
		t.Fatal(a.internalErr)
	}
}
