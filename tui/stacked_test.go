package tui

import (
	"strconv"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"

	"memscope/snapshot"
)

// TestRoundTicks: the Timeline's event axis is labelled at round event
// numbers, where they fall, with labels that never touch.
func TestRoundTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		w      int
		want   string // "col:label ..."
	}{
		{0, 9576, 150, "0:0 15:1000 31:2000 46:3000 62:4000 78:5000 93:6000 109:7000 125:8000 140:9000"},
		{0, 9576, 70, "0:0 14:2000 29:4000 43:6000 58:8000"},
		// A zoomed window starts at its first round value, not at its edge.
		{1234, 1834, 60, "16:1400 36:1600 56:1800"},
		// From 10,000 events up the labels are short.
		{0, 1_500_000, 100, "0:0 13:0.2M 26:0.4M 40:0.6M 53:0.8M 66:1M 80:1.2M 93:1.4M"},
		// A handful of events: integer steps only.
		{0, 5, 80, "0:0 16:1 32:2 48:3 64:4"},
		{5, 5, 80, ""},
	}
	for _, c := range cases {
		var got []string
		for _, tk := range roundTicks(c.lo, c.hi, c.w, true) {
			got = append(got, strconv.Itoa(tk.col)+":"+tk.label)
		}
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("roundTicks(%v, %v, %d) = %q, want %q", c.lo, c.hi, c.w, s, c.want)
		}
	}
	// Labels never touch, however narrow the axis.
	for w := 1; w < 200; w++ {
		next := 0
		for _, tk := range roundTicks(0, 123456, w, true) {
			if tk.col < next || tk.col+len(tk.label) > w {
				t.Fatalf("width %d: label %q at %d overlaps or overflows", w, tk.label, tk.col)
			}
			next = tk.col + len(tk.label) + 1
		}
	}
}

// TestColumnsLinearInTime: with the x axis in time, columns are equal
// slices of time: ten events in the first 9 ms and ten more ten seconds
// later leave the columns between them on the level of the tenth event
// (the idle gap shows); by event index each column holds one event.
func TestColumnsLinearInTime(t *testing.T) {
	var trace []snapshot.TraceEntry
	for i := range 20 {
		us := int64(1_000_000 + i*1000)
		if i >= 10 {
			us += 10_000_000
		}
		trace = append(trace, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: uint64(0x1000 * (i + 1)), Size: int64(1 << (i % 5)), TimeUS: us})
	}
	tl := snapshot.Replay(&snapshot.Snapshot{Traces: [][]snapshot.TraceEntry{trace}}, 0, nil)
	byTime, ok := columnEvents(tl, 0, 20, 20, true)
	if !ok {
		t.Fatal("a trace with growing times gives columns by time")
	}
	gap := 0
	for c, e := range byTime {
		if e == 9 {
			gap++
		}
		if c > 0 && e < byTime[c-1] {
			t.Fatalf("columns go back in time: %v", byTime)
		}
	}
	if gap < 15 || byTime[0] > 9 || byTime[19] < 10 {
		t.Errorf("by time: %v; want the ten-second gap over most columns", byTime)
	}
	byIndex, ok := columnEvents(tl, 0, 20, 20, false)
	for c, e := range byIndex {
		if e != c || ok {
			t.Fatalf("by index each column holds its event: %v", byIndex)
		}
	}
	// Times that go back fall back to the index.
	trace[5].TimeUS = 1
	tl = snapshot.Replay(&snapshot.Snapshot{Traces: [][]snapshot.TraceEntry{trace}}, 0, nil)
	if _, ok := columnEvents(tl, 0, 20, 20, true); ok {
		t.Error("unsorted times still sliced by time")
	}
}

// TestStackedBaselineIsZero: the stacked chart's lowest label is its
// baseline, zero.
func TestStackedBaselineIsZero(t *testing.T) {
	for _, h := range []int{6, 11, 24} {
		out := renderStacked(stackedSpec{w: 40, h: h, cols: [][]int64{{5}, {10}}, reserved: []int64{10, 10}, ymax: 10,
			styles: []lipgloss.Style{{}}, glyphs: []string{"█"}, cursor: -1,
			xlabel: func(c int) string { return strconv.Itoa(c) },
			ylabel: func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }})
		lines := strings.Split(out, "\n")
		bottom := lines[len(lines)-3] // above the axis and the x labels
		if !strings.HasPrefix(strings.TrimSpace(bottom), "0│") {
			t.Errorf("h %d: bottom row %q, want the label 0", h, bottom)
		}
	}
}
