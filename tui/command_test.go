package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"memscope/model"
)

// typeLine types s into the app key by key.
func typeLine(a *App, s string) {
	for _, r := range s {
		if r == ' ' {
			press(a, "space")
			continue
		}
		press(a, string(r))
	}
}

// run sends a tea.Cmd's message back, as the program would.
func run(a *App, cmd tea.Cmd) {
	if cmd != nil {
		if msg := cmd(); msg != nil {
			a.Update(msg)
		}
	}
}

// TestCommandLine: ":" opens the command line; tab completes names and
// arguments; enter runs the command; unknown ones say so.
func TestCommandLine(t *testing.T) {
	a := newTestApp(t, 120, 40, testInputs...)
	a.c.opts.ExportDir = t.TempDir()
	press(a, ":")
	if s := screen(a); !strings.Contains(s, ":") || a.cmd == nil {
		t.Fatalf("no command line:\n%s", s)
	}
	typeLine(a, "ti")
	press(a, "tab")
	if got := a.cmd.in.Value(); got != "timeline " {
		t.Errorf("tab completed %q, want %q", got, "timeline ")
	}
	press(a, "enter")
	if a.cmd != nil || a.active != tabTimeline {
		t.Errorf("enter: command line open %v, tab %d", a.cmd != nil, a.active)
	}
	press(a, ":")
	typeLine(a, "t")
	press(a, "tab")
	if s := screen(a); !strings.Contains(s, "traces  top  timeline") {
		t.Errorf("ambiguous completion lists the candidates:\n%s", s)
	}
	press(a, "esc")
	if a.cmd != nil {
		t.Error("esc closes the command line")
	}
	press(a, ":")
	typeLine(a, "frobnicate")
	press(a, "enter")
	if !strings.Contains(a.status, `no command "frobnicate"`) {
		t.Errorf("status %q", a.status)
	}
	// :open with path completion.
	dir := t.TempDir()
	b, err := os.ReadFile("../testdata/snapshots/h200/train.pickle")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extra_snapshot.pickle"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	press(a, ":")
	typeLine(a, "open "+dir+"/ex")
	press(a, "tab")
	if got, want := a.cmd.in.Value(), "open "+filepath.Join(dir, "extra_snapshot.pickle"); got != want {
		t.Errorf("path completion %q, want %q", got, want)
	}
	before := len(a.ws.Sources())
	press(a, "enter")
	a.ws.Wait()
	if len(a.ws.Sources()) != before+1 {
		t.Errorf(":open added %d sources", len(a.ws.Sources())-before)
	}
	press(a, ":")
	typeLine(a, "quit")
	if _, cmd := a.Update(tea.KeyPressMsg{Code: tea.KeyEnter}); cmd == nil {
		t.Error(":quit returns no command")
	}
}

// :export runs the tab's export; :rank opens a rank of a rank folder.
func TestCommandExportAndRank(t *testing.T) {
	dir := t.TempDir()
	a := newTestApp(t, 120, 40, testInputs...)
	a.c.opts.ExportDir = dir
	press(a, "5", ":")
	typeLine(a, "export")
	_, cmd := a.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	run(a, cmd)
	if !strings.Contains(a.status, "exported "+dir) {
		t.Errorf(":export: status %q", a.status)
	}
	r := newTestApp(t, 120, 40, rankFolder(t))
	press(r, ":")
	typeLine(r, "rank ")
	press(r, "tab")
	if s := screen(r); !strings.Contains(s, "0  1  2  3  4") {
		t.Errorf("rank completion:\n%s", s)
	}
	typeLine(r, "2")
	press(r, "enter")
	r.ws.Wait()
	r.refresh()
	if s := r.source(r.c.snapSel); s == nil || s.Kind != model.KindSnapshot || !strings.HasSuffix(s.Paths[0], filepath.Join("iteration_10", "rank2_memory_snapshot.pickle")) {
		t.Errorf(":rank 2 opened %v", s)
	}
	press(r, ":")
	typeLine(r, "rank 9")
	press(r, "enter")
	if !strings.Contains(r.status, "no rank 9") {
		t.Errorf("status %q", r.status)
	}
}

// TestCommandRankFromAnyTab: :rank N on a snapshot tab whose snapshot is
// not part of a rank folder opens the traces' rank N instead of failing;
// with neither, it says so.
func TestCommandRankFromAnyTab(t *testing.T) {
	a := newTestApp(t, 120, 40, testInputs...)
	press(a, "5", ":")
	typeLine(a, "rank 2")
	press(a, "enter")
	if a.active != tabTraces || a.traces.mode != modeDetail || a.traces.cur() == nil || a.traces.cur().rank != 2 {
		t.Errorf(":rank 2 on the Timeline: tab %d, traces mode %v, status %q", a.active, a.traces.mode, a.status)
	}
	s := newTestApp(t, 120, 40, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	press(s, "2", ":")
	typeLine(s, "rank 2")
	press(s, "enter")
	if s.active != tabSnapshot || !strings.Contains(s.status, "no rank folder or traces open") {
		t.Errorf(":rank 2 with a lone snapshot: tab %d, status %q", s.active, s.status)
	}
}
