package tui

import (
	"strings"
	"testing"

	"memscope/snapshot"
)

// TestHelpKeysDoWhatTheySay walks the remaining keys of each tab's help.
func TestHelpKeysDoWhatTheySay(t *testing.T) {
	a := newTestApp(t, 120, 40, testInputs...)
	// Traces: paging keys move the cursor within bounds.
	press(a, "1", "G")
	if a.traces.list.Cursor != len(a.traces.rows)-1 {
		t.Errorf("G goes to the last rank: %d", a.traces.list.Cursor)
	}
	press(a, "home")
	if a.traces.list.Cursor != 0 {
		t.Error("home goes to the first rank")
	}
	press(a, "G", "g")
	if a.traces.list.Cursor != 0 {
		t.Error("g goes to the first rank, as G goes to the last")
	}
	press(a, "enter", "r")
	if !a.traces.showResv || !strings.Contains(screen(a), "reserved (device)") {
		t.Error("r shows reserved memory")
	}
	press(a, "esc")
	// Snapshot: * expands everything under the cursor; s on an allocation
	// shows its stack.
	press(a, "2")
	tv := a.snap.currentTree()
	before := len(tv.Rows)
	press(a, "*")
	if len(tv.Rows) <= before {
		t.Errorf("* expands all: %d -> %d rows", before, len(tv.Rows))
	}
	for i, r := range tv.Rows {
		if r.Node.Alloc != nil {
			tv.List.Cursor = i
			break
		}
	}
	press(a, "s")
	if _, ok := a.overlay.(*stackOverlay); !ok {
		t.Error("s on an allocation opens its stack")
	}
	press(a, "n")
	if !a.overlay.(*stackOverlay).showNoise {
		t.Error("n shows the noise frames")
	}
	press(a, "esc")
	// Live: select, focus, sort, filter.
	press(a, "4", "right", "enter")
	if !a.live.focus || a.live.sel != 1 || !strings.Contains(screen(a), "GPU 1") || strings.Contains(screen(a), "GPU 2 ") {
		t.Errorf("→ then enter focuses GPU 1:\n%s", screen(a))
	}
	press(a, "esc", "s")
	if a.live.procSort != 1 {
		t.Error("s changes the process order")
	}
	press(a, "/", "r", "a", "n", "k", " ", "3", "enter")
	if s := screen(a); !strings.Contains(s, "--local-rank 3") || strings.Contains(s, "--local-rank 4") {
		t.Errorf("/ filters processes:\n%s", s)
	}
	// Timeline: axis, pan and stack of a live allocation.
	press(a, "5", "x")
	if !a.timeline.byTime {
		t.Error("x switches the axis to time")
	}
	press(a, "+", "+")
	x0 := a.timeline.x0
	press(a, ">")
	if a.timeline.x0 <= x0 {
		t.Errorf("> pans right: %d -> %d", x0, a.timeline.x0)
	}
	// The live set is grouped: * opens the first category, the third row
	// is an allocation, enter opens its stack.
	press(a, "*", "down", "down", "enter")
	if _, ok := a.overlay.(*stackOverlay); !ok {
		t.Errorf("enter on a live allocation opens its stack:\n%s", screen(a))
	}
	press(a, "esc", "f", "enter")
	if _, ok := a.overlay.(*stackOverlay); !ok || !a.timeline.flat {
		t.Error("f makes the live set a flat list, and enter opens the selected allocation's stack")
	}
	press(a, "esc", "f", "g")
	if a.timeline.bandBy != snapshot.BandRole || !strings.Contains(screen(a), "─ reserved") {
		t.Error("g stacks the chart by role")
	}
	press(a, "g")
	if a.timeline.bandBy != snapshot.BandSite || !strings.Contains(screen(a), ".py:") {
		t.Errorf("g again stacks the chart by call site:\n%s", screen(a))
	}
	press(a, "g", "v")
	if !a.timeline.lines {
		t.Error("v switches to the line chart")
	}
	press(a, "v")
	// Picker: r reloads the selected source.
	press(a, "o", "r")
	if !strings.Contains(a.status, "reloading") {
		t.Errorf("r reloads: status %q", a.status)
	}
}

// TestHelpListsEveryKey: at 80x24 the help of every tab shows each of its
// keys, long descriptions wrapped, never a column dropped.
func TestHelpListsEveryKey(t *testing.T) {
	a := newTestApp(t, 80, 24, testInputs...)
	for i, tb := range a.tabs {
		press(a, itoa(i+1), "?")
		s := screen(a)
		for _, b := range tb.help() {
			if !strings.Contains(s, b.Help().Key+" ") {
				t.Errorf("%s help lacks %q:\n%s", tb.name(), b.Help().Key, s)
			}
		}
		if i == 1 && !strings.Contains(s, "group by category / role / call stack") {
			t.Errorf("Snapshot help lacks g's description:\n%s", s)
		}
		press(a, "esc")
	}
}

// TestHelpOverOverlays: ? over an overlay (the Timeline's stages, a stack,
// the sources) opens the help with the overlay's own keys, and a key then
// closes the help and leaves the overlay open.
func TestHelpOverOverlays(t *testing.T) {
	a := newTestApp(t, 100, 40, testInputs...)
	for _, c := range []struct {
		name string
		open []string
		mark string // a line of the overlay's own view
	}{
		{"stages", []string{"5", "s"}, "annotated ranges"},
		{"sources", []string{"o"}, "sources"},
	} {
		press(a, c.open...)
		if a.overlay == nil {
			t.Fatalf("%s: %v opened no overlay", c.name, c.open)
		}
		o := a.overlay
		press(a, "?")
		s := screen(a)
		if !strings.Contains(s, "This view") {
			t.Fatalf("%s: ? shows no help:\n%s", c.name, s)
		}
		for _, b := range o.help() {
			if !strings.Contains(s, b.Help().Key+" ") {
				t.Errorf("%s: the help lacks %q:\n%s", c.name, b.Help().Key, s)
			}
		}
		press(a, "x")
		if a.showHelp || a.overlay != o || !strings.Contains(screen(a), c.mark) {
			t.Errorf("%s: after the help closed, the overlay is not shown:\n%s", c.name, screen(a))
		}
		press(a, "esc")
	}
}

// TestHelpScrolls: at 80x24 the Snapshot tab's help is taller than the
// window; ↓ scrolls it to its last line, and another key closes it.
func TestHelpScrolls(t *testing.T) {
	a := newTestApp(t, 80, 24, testInputs...)
	press(a, "2", "?")
	s := screen(a)
	if !strings.Contains(s, "lines 1–") || !strings.Contains(s, "scroll") {
		t.Fatalf("a help taller than the window says it scrolls:\n%s", s)
	}
	for range 40 {
		press(a, "down")
	}
	s = screen(a)
	checkScreen(t, s, 80, 24)
	if !a.showHelp || !strings.Contains(s, "e ") || strings.Contains(s, "lines 1–") {
		t.Errorf("↓ scrolls to the end, the help still open:\n%s", s)
	}
	press(a, "x")
	if a.showHelp {
		t.Error("another key closes the help")
	}
}
