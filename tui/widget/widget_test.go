package widget

import (
	"strconv"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
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
		for _, tk := range RoundTicks(c.lo, c.hi, c.w, true) {
			got = append(got, strconv.Itoa(tk.Col)+":"+tk.Label)
		}
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("roundTicks(%v, %v, %d) = %q, want %q", c.lo, c.hi, c.w, s, c.want)
		}
	}
	// Labels never touch, however narrow the axis.
	for w := 1; w < 200; w++ {
		next := 0
		for _, tk := range RoundTicks(0, 123456, w, true) {
			if tk.Col < next || tk.Col+len(tk.Label) > w {
				t.Fatalf("width %d: label %q at %d overlaps or overflows", w, tk.Label, tk.Col)
			}
			next = tk.Col + len(tk.Label) + 1
		}
	}
}

// TestStackedBaselineIsZero: the stacked chart's lowest label is its
// baseline, zero.
func TestStackedBaselineIsZero(t *testing.T) {
	for _, h := range []int{6, 11, 24} {
		out := Stacked(StackedSpec{W: 40, H: h, Cols: [][]int64{{5}, {10}}, Reserved: []int64{10, 10}, YMax: 10,
			Styles: []lipgloss.Style{{}}, Glyphs: []string{"█"}, Cursor: -1,
			XLabel: func(c int) string { return strconv.Itoa(c) },
			YLabel: func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }})
		lines := strings.Split(out, "\n")
		bottom := lines[len(lines)-3] // above the axis and the x labels
		if !strings.HasPrefix(strings.TrimSpace(bottom), "0│") {
			t.Errorf("h %d: bottom row %q, want the label 0", h, bottom)
		}
	}
}
