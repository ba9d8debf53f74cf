package tui

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"memscope/model"
	"memscope/nvml"
	"memscope/trace"
)

var reXLabel = regexp.MustCompile(`-?\d+(?:\.\d)?([smh])\b`)

// xUnits lists the units of the x labels on a chart's label line.
func xUnits(s string) map[string]bool {
	units := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		if strings.Count(l, "now")+len(reXLabel.FindAllString(l, -1)) >= 3 && !strings.Contains(l, "│") {
			for _, m := range reXLabel.FindAllStringSubmatch(l, -1) {
				units[m[1]] = true
			}
		}
	}
	return units
}

// TestLiveCharts: m cycles memory / utilisation / power, v draws a chart per
// GPU, enter shows the focused GPU's processes; the x axis keeps one unit.
func TestLiveCharts(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1])
		press(a, "4")
		s := screen(a)
		if u := xUnits(s); len(u) != 1 {
			t.Errorf("x labels in units %v:\n%s", u, s)
		}
		if !strings.Contains(s, "━ GPU 0") || !strings.Contains(s, "┈ the other 7 GPUs") {
			t.Errorf("legend of the overlay chart:\n%s", s)
		}
		press(a, "m")
		if s := screen(a); !strings.Contains(s, "100%") || !strings.Contains(s, "utilisation · ━ GPU 0") {
			t.Errorf("m: utilisation on a 0-100%% axis:\n%s", s)
		}
		press(a, "m")
		if s := screen(a); !strings.Contains(s, "700W") || !strings.Contains(s, "power · ━ GPU 0") {
			t.Errorf("m: power up to the 700 W limit:\n%s", s)
		}
		press(a, "m", "v")
		s = screen(a)
		checkScreen(t, s, size[0], size[1])
		golden(t, "live_multiples_"+itoa(size[0])+"x"+itoa(size[1]), s)
		if size[1] >= 48 {
			for _, g := range []string{"GPU 0 ", "GPU 3 ", "GPU 7 "} {
				if !strings.Contains(s, g) {
					t.Errorf("v: no small chart titled %q:\n%s", g, s)
				}
			}
			if !strings.Contains(s, "8 GPUs, one chart each") {
				t.Errorf("v: legend:\n%s", s)
			}
		}
		press(a, "v", "enter")
		s = screen(a)
		golden(t, "live_processes_"+itoa(size[0])+"x"+itoa(size[1]), s)
		if !strings.Contains(s, "GPU 0 memory per process") ||
			(size[0] >= 160 && (!strings.Contains(s, "━ 4100 python pretrain_gpt.py") || !strings.Contains(s, "┄ 5200 python eval.py"))) {
			t.Errorf("enter: per-process history of GPU 0:\n%s", s)
		}
	}
}

func TestTimeAxisOneUnit(t *testing.T) {
	for _, c := range []struct {
		span float64
		unit string
		at   float64
		want string
	}{
		{10, "s", -4, "-4s"}, {180, "s", -90, "-90s"}, {181, "m", -120, "-2m"}, {1800, "m", -900, "-15m"},
		{3 * 3600, "m", -7200, "-120m"}, {3*3600 + 1, "h", -7200, "-2h"}, {240, "m", -90, "-1.5m"}, {10, "s", 0, "now"},
	} {
		unit, f := timeAxis(c.span)
		if unit != c.unit || f(0, c.at) != c.want {
			t.Errorf("timeAxis(%v): %s, %s; want %s, %s", c.span, unit, f(0, c.at), c.unit, c.want)
		}
	}
}

// TestLiveViewSaysWhenItCannot: at 80x24 eight small charts do not fit;
// v then says so instead of doing nothing.
func TestLiveViewSaysWhenItCannot(t *testing.T) {
	a := newTestApp(t, 80, 24, testInputs...)
	press(a, "4", "v")
	s := screen(a)
	checkScreen(t, s, 80, 24)
	if !a.live.multiples || !strings.Contains(s, "needs a taller window") {
		t.Errorf("v at 80x24:\n%s", s)
	}
}

// TestLiveReplayControls: a replay says where it is in the recording and
// which loop, space pauses it, ] and [ seek.
func TestLiveReplayControls(t *testing.T) {
	dir := t.TempDir()
	fake := nvml.NewFake(2, nil)
	if err := nvml.Record(context.Background(), fake, nvml.RecordOptions{OutDir: dir, Interval: 10 * time.Millisecond,
		Duration: 250 * time.Millisecond, FlushEvery: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r, err := newPlaybackOf(t, dir, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NO_COLOR", "1")
	ws := model.New(context.Background(), nil)
	a := New(context.Background(), ws, Options{Live: r, Interval: 50 * time.Millisecond})
	a.live.sampler.Once(context.Background())
	a.live.state = a.live.sampler.State()
	a.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	press(a, "4")
	if s := screen(a); !strings.Contains(s, "replay ") || !strings.Contains(s, "loop 1") || !strings.Contains(s, "playing") {
		t.Fatalf("the replay's position is not shown:\n%s", s)
	}
	press(a, "space")
	at, _, _, paused := r.Position()
	if s := screen(a); !paused || !strings.Contains(s, "paused") {
		t.Errorf("space pauses:\n%s", s)
	}
	press(a, "]")
	if at2, _, _, _ := r.Position(); at2 <= at {
		t.Errorf("] seeks forward: %v then %v", at, at2)
	}
	press(a, "space")
	if _, _, _, paused := r.Position(); paused {
		t.Error("space resumes")
	}
}

// newPlaybackOf loads dir's traces and plays them back.
func newPlaybackOf(t testing.TB, dir string, now func() time.Time, speed float64) (*nvml.Playback, error) {
	t.Helper()
	set, err := trace.LoadPath(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	return nvml.NewPlayback(set, dir, now, speed)
}
