package tui

import (
	"math/rand/v2"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// TestRandomKeysKeepTheScreen walks every tab with random keys and
// resizes, over a snapshot, an estimate, a trace comparison and a snapshot
// of hostile strings: no key panics (the App counts the panics it
// catches), and every frame fills the terminal exactly, its height in lines
// and each line its width in cells, at 80x24, 40x12, 200x60 and any size a
// resize picks. A tab's own view is cut to its box (widget.Block); what
// this holds is everything else in the frame: tab bar, status and command
// lines, help, and the states that keys lead to.
func TestRandomKeysKeepTheScreen(t *testing.T) {
	keys := []string{"1", "2", "3", "4", "5", "tab", "enter", "esc", "up", "down", "left", "right", "home", "space",
		"g", "i", "m", "d", "s", "S", "p", "+", "-", "<", ">", "0", "x", "v", "f", "*", "E", "n", "N", "/", "a",
		"[", "]", "R", "o", "?", ":", "y", "L", "h", "c", "r", "t", "b", "k", "j"}
	inputs := []string{"../testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle",
		"../testdata/estimates/WRITER_tiny_gpt_cpu_peak_snapshot.json", "../testdata/traces/megatron_trace_memory",
		"../testdata/snapshots/synthetic/hostile_strings.pickle"}
	steps := 1500
	if testing.Short() {
		steps = 300
	}
	for seed := range 6 {
		rng := rand.New(rand.NewPCG(uint64(seed), 3))
		size := [3][2]int{{80, 24}, {40, 12}, {200, 60}}[seed%3]
		w, h := size[0], size[1]
		a := newTestApp(t, w, h, inputs...)
		var walk []string
		for i := range steps {
			if rng.IntN(200) == 0 {
				w, h = 10+rng.IntN(200), 3+rng.IntN(60)
				a.Update(tea.WindowSizeMsg{Width: w, Height: h})
				walk = append(walk, "resize")
			}
			k := keys[rng.IntN(len(keys))]
			press(a, k)
			walk = append(walk, k)
			if a.panics > 0 {
				t.Fatalf("seed %d, key %d (%q): %s", seed, i, k, a.internalErr)
			}
			lines := strings.Split(screen(a), "\n")
			fits := len(lines) == h
			for _, l := range lines {
				fits = fits && ansi.StringWidth(l) == w
			}
			if !fits {
				t.Fatalf("seed %d, %dx%d, after %q: the frame does not fill the terminal:\n%s",
					seed, w, h, walk[max(0, len(walk)-12):], strings.Join(lines, "\n"))
			}
		}
	}
}
