package tui

import (
	"strconv"
	"strings"
	"testing"
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
