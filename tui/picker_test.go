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

// TestFailingSourceShownInPicker: a bad file is listed with its error and
// the other sources stay usable.
func TestFailingSourceShownInPicker(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "broken.pickle")
	if err := os.WriteFile(bad, []byte("\x80\x04\x95garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newTestApp(t, 120, 30, bad, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	if s := screen(a); !strings.Contains(s, "✗ 1 error (o)") {
		t.Errorf("status line should count the error:\n%s", s)
	}
	press(a, "o")
	s := screen(a)
	if !strings.Contains(s, "broken.pickle") || !strings.Contains(s, "pickle byte") {
		t.Errorf("picker should show the failure and why:\n%s", s)
	}
	press(a, "esc", "2")
	if s := screen(a); !strings.Contains(s, "MercuryB1") || !strings.Contains(s, "efficiency") {
		t.Errorf("the good snapshot stays usable:\n%s", s)
	}
}

func TestPickerDiff(t *testing.T) {
	a := newTestApp(t, 140, 40, "../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_bf16_128.pickle",
		"../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle")
	press(a, "o", "space", "down", "space", "d")
	if _, ok := a.overlay.(*diffOverlay); !ok {
		t.Fatalf("d with two marked snapshots opens the diff:\n%s", screen(a))
	}
	if s := screen(a); !strings.Contains(s, "CATEGORY AT THE PEAK") || !strings.Contains(s, "allocated") ||
		!strings.Contains(s, "peak_active") {
		t.Errorf("diff view:\n%s", s)
	}
	// The peak tables hold the difference that the final states hide (bf16
	// peaks 222 MiB higher, mostly in the einsum of the user's
	// linear.py:15, the site shown rather than torch's einsum).
	o := a.overlay.(*diffOverlay)
	if len(o.d.PeakSites) == 0 || !strings.Contains(o.d.PeakSites[0].Name, "linear.py:15 forward") || o.d.PeakSites[0].Delta() == 0 {
		t.Errorf("largest peak change: %+v", o.d.PeakSites[:min(1, len(o.d.PeakSites))])
	}
	if a.internalErr != "" {
		t.Fatal(a.internalErr)
	}
}

// TestVersusPickerRowsDiffer: at 80 columns the measured snapshots offered
// for an estimate stay tell-apart-able (their names' ends show).
func TestVersusPickerRowsDiffer(t *testing.T) {
	a := newTestApp(t, 80, 24, "../testdata/estimates/SYNTHETIC_peak_snapshot.json",
		"../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_bf16_128.pickle",
		"../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle",
		"../testdata/snapshots/silmont2000_assignment2-systems__mem_snapshot.pickle")
	press(a, "o", "home", "enter", "2", "c")
	s := screen(a)
	rows := 0
	seen := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "cuda:") || strings.Contains(l, " cuda:") {
			l = strings.TrimSpace(l)
			rows++
			if seen[l] {
				t.Errorf("two identical rows: %q", l)
			}
			seen[l] = true
		}
	}
	if rows < 3 || !strings.Contains(s, "bf16_128.pickle") || !strings.Contains(s, "fp32_128.pickle") {
		t.Errorf("picker:\n%s", s)
	}
}

// TestPickerUnloadedSnapshot: with more snapshots than the workspace keeps
// analysed, the picker marks the ones let go; enter loads one again and
// shows it, and a diff of one of them opens once it is loaded.
func TestPickerUnloadedSnapshot(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	files := []string{
		"../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_bf16_128.pickle",
		"../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle",
		"../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle",
	}
	ctx := context.Background()
	ws := model.New(ctx, nil)
	ws.SetKeep(1) // no analysis is kept beside those in view
	ws.Open(files...)
	ws.Wait()
	a := New(ctx, ws, Options{LiveErr: errors.New("no GPUs in tests")})
	a.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	t.Cleanup(func() {
		if a.panics > 0 {
			t.Errorf("%d panics caught; the last: %s", a.panics, a.internalErr)
		}
	})
	gone := -1
	for i, s := range ws.Sources() {
		if s.State == model.Unloaded {
			gone = i
		}
	}
	if gone < 0 {
		t.Fatalf("three snapshots, keep 1 byte: none let go: %v", ws.Sources())
	}
	name := ws.Sources()[gone].Name()
	press(a, "o", "home")
	for range gone {
		press(a, "down")
	}
	if s := screen(a); !strings.Contains(s, "not in memory (enter loads it)") || !strings.Contains(s, "reserved") {
		t.Fatalf("the picker shows what was let go, with its summary:\n%s", s)
	}
	press(a, "enter")
	ws.Wait()
	a.Update(wsChangedMsg{})
	if s := ws.Sources()[gone]; s.State != model.Loaded || a.c.snapSel != s.ID {
		t.Fatalf("enter on %s: %s, shown %d", name, s.State, a.c.snapSel)
	}
	press(a, "2")
	if s := screen(a); !strings.Contains(s, "efficiency") || !strings.Contains(s, safe(name)) {
		t.Errorf("the snapshot loaded again is shown:\n%s", s)
	}
	// Diff it with another one, let go too.
	other := -1
	for i, s := range ws.Sources() {
		if s.State == model.Unloaded {
			other = i
		}
	}
	if other < 0 {
		t.Fatalf("after loading %s, none let go: %v", name, ws.Sources())
	}
	press(a, "o", "home")
	for range min(gone, other) {
		press(a, "down")
	}
	press(a, "space")
	for range max(gone, other) - min(gone, other) {
		press(a, "down")
	}
	press(a, "space", "d")
	if _, ok := a.overlay.(*diffOverlay); ok {
		t.Fatal("the diff opened before its snapshot was loaded")
	}
	if s := screen(a); !strings.Contains(s, "the diff opens once") {
		t.Errorf("d on a snapshot not in memory says what happens:\n%s", s)
	}
	ws.Wait()
	a.Update(wsChangedMsg{})
	if _, ok := a.overlay.(*diffOverlay); !ok {
		t.Fatalf("the diff opens once both are loaded:\n%s", screen(a))
	}
}

// TestPickerNotLoadedYet: snapshots of a folder past the workspace's bound
// are listed as not loaded yet, and enter loads and shows one.
func TestPickerNotLoadedYet(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	dir := t.TempDir()
	for _, f := range []string{"MercuryB1_SQAttn__cuda_memory_snapshot.pickle", "silmont2000_assignment2-systems__memory_forward_bf16_128.pickle"} {
		b, err := os.ReadFile(filepath.Join("../testdata/snapshots", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	ws := model.New(ctx, nil)
	ws.SetKeep(1)
	ws.Open(dir)
	ws.Wait()
	a := New(ctx, ws, Options{LiveErr: errors.New("no GPUs in tests")})
	a.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	press(a, "o", "home")
	waiting := -1
	for i, s := range ws.Sources() {
		if s.State == model.Unloaded && s.Generation == 0 {
			waiting = i
		}
	}
	if waiting < 0 {
		t.Fatalf("keep 1 byte: every snapshot of the folder loaded: %v", ws.Sources())
	}
	if s := screen(a); !strings.Contains(s, "not loaded yet (enter loads it)") {
		t.Fatalf("the picker shows the snapshot that waits:\n%s", s)
	}
	for range waiting {
		press(a, "down")
	}
	press(a, "enter")
	ws.Wait()
	a.Update(wsChangedMsg{})
	s := ws.Sources()[waiting]
	if s.State != model.Loaded || a.c.snapSel != s.ID {
		t.Fatalf("enter: %s, shown %d, want %d", s.State, a.c.snapSel, s.ID)
	}
	press(a, "2")
	if got := screen(a); !strings.Contains(got, "efficiency") || !strings.Contains(got, safe(s.Name())) {
		t.Errorf("the snapshot chosen is shown:\n%s", got)
	}
	if a.panics > 0 {
		t.Fatal(a.internalErr)
	}
}

// TestPickerPathsMadeSafe: a file name with control characters, in a
// watched folder anyone may write to, reaches the picker's detail line
// escaped, whether its snapshot is loaded or not (any may be the newer
// file, the one loaded). A colour sequence (SGR) is escaped too: the last
// safety net before the terminal (textsafe.Styled) keeps those, as the
// program's own styling is made of them.
func TestPickerPathsMadeSafe(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	b, err := os.ReadFile("../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a_snap\x1b]0;pwned\x07.pickle", "b_snap\x1b[2J.pickle", "c_snap\x1b[31m.pickle"}
	for newer := range names {
		dir := t.TempDir()
		for i, name := range names {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			at := time.Now().Add(-time.Hour)
			if i == newer {
				at = at.Add(time.Minute)
			}
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		ws := model.New(ctx, nil)
		ws.SetKeep(1) // one loaded, one not loaded yet
		ws.Open(dir)
		ws.Wait()
		a := New(ctx, ws, Options{LiveErr: errors.New("no GPUs in tests")})
		a.Update(tea.WindowSizeMsg{Width: 200, Height: 40})
		press(a, "o")
		raw := a.View().Content
		for _, bad := range []string{"\x1b]0;pwned", "\x1b[2J", "\x1b[31m"} {
			if strings.Contains(raw, bad) {
				t.Errorf("%q from a file name reached the terminal raw", bad)
			}
		}
		s := screen(a)
		for _, want := range []string{`/a_snap\x1b]0;pwned\x07.pickle`, `/b_snap\x1b[2J.pickle`, `/c_snap\x1b[31m.pickle`, "not loaded yet (enter loads it) · written ", " ago · " + dir + "/"} {
			if !strings.Contains(s, want) {
				t.Errorf("the picker should show %q:\n%s", want, s)
			}
		}
	}
}
