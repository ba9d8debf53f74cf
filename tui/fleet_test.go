package tui

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"memscope/fleet"
	"memscope/model"
	"memscope/nvml"
)

// fakeFleet is a FleetSource of hosts x gpus GPUs with a fixed clock.
// node-003's GPUs carry the UUIDs of the test's local fake GPUs.
type fakeFleet struct {
	hosts, gpus int
	at          time.Time
	err         error
	latest      int // calls
}

func (f *fakeFleet) Options() fleet.Options {
	return fleet.Options{URL: "http://prometheus.test:9090", Range: time.Hour, Scrape: 15 * time.Second}
}

func (f *fakeFleet) Latest(ctx context.Context, at time.Time) (*fleet.Fleet, error) {
	f.latest++
	if f.err != nil {
		return nil, f.err
	}
	fl := &fleet.Fleet{At: f.at, Range: time.Hour, Step: 15 * time.Second}
	for h := range f.hosts {
		for g := range f.gpus {
			host := fmt.Sprintf("node-%03d", h)
			uuid := fmt.Sprintf("GPU-%04d-%02d", h, g)
			if h == 3 {
				uuid = fmt.Sprintf("GPU-fake-%04d", g) // the local GPUs
			}
			total := int64(80 << 30)
			used := int64((10 + (h*7+g*13)%70)) << 30
			gpu := fleet.GPU{Host: host, Index: fmt.Sprint(g), UUID: uuid, Model: "NVIDIA H100 80GB HBM3",
				Used: used, Free: total - used, Reserved: 0, Total: total, MaxUsed: used + 2<<30, Util: 90, Power: 600}
			if h%4 == 1 {
				gpu.Pod, gpu.Namespace = fmt.Sprintf("trainer-%d", h/4), "llm"
			}
			if h == 2 && g == 5 {
				gpu.Used, gpu.Free, gpu.Total = -1, -1, -1 // a blank reading
			}
			fl.GPUs = append(fl.GPUs, gpu)
		}
	}
	return fl, nil
}

func (f *fakeFleet) History(ctx context.Context, fl *fleet.Fleet) error {
	for i := range fl.GPUs {
		g := &fl.GPUs[i]
		g.History = nil
		for k := 0; k <= 240; k++ {
			v := int64(20<<30) + int64((k*37+i*11)%40)<<30
			g.History = append(g.History, fleet.Point{T: fl.At.Add(-time.Hour + time.Duration(k)*15*time.Second), Bytes: v})
		}
	}
	fl.HasHistory = true
	return nil
}

func newFleetTestApp(t testing.TB, w, h int, src *fakeFleet) *App {
	t.Setenv("NO_COLOR", "1")
	ctx := context.Background()
	ws := model.New(ctx, nil)
	a := New(ctx, ws, Options{Live: nvml.NewFake(8, fixedClock()), Interval: time.Second, Fleet: src})
	a.live.sampler.Once(ctx)
	a.Update(liveMsg{}) // the Live tab takes the sample and tells Fleet its GPUs
	a.Update(tea.WindowSizeMsg{Width: w, Height: h})
	t.Cleanup(func() {
		if a.panics > 0 {
			t.Errorf("%d panics caught during the test; the last: %s", a.panics, a.internalErr)
		}
	})
	refreshFleet(a)
	return a
}

// refreshFleet runs one refresh (latest figures, then history) through
// Update, as the program would.
func refreshFleet(a *App) {
	msg := a.fleet.fetch(&a.c)()
	_, cmd := a.Update(msg)
	if msg.(fleetLatestMsg).err == nil {
		a.Update(cmd()) // the history; the next command is the timer
	}
}

func TestFleetGolden(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		src := &fakeFleet{hosts: 12, gpus: 8, at: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
		a := newFleetTestApp(t, size[0], size[1], src)
		if a.active != tabFleet {
			t.Fatalf("the explorer opened on tab %d, want the Fleet tab", a.active+1)
		}
		name := func(v string) string { return fmt.Sprintf("fleet_%s_%dx%d", v, size[0], size[1]) }
		s := screen(a)
		s = reAgo.ReplaceAllString(s, "Ns ago")
		golden(t, name("grid"), s)
		press(a, "enter")
		golden(t, name("host"), reAgo.ReplaceAllString(screen(a), "Ns ago"))
		press(a, "enter")
		golden(t, name("gpu"), screen(a))
	}
}

func TestFleetKeys(t *testing.T) {
	src := &fakeFleet{hosts: 12, gpus: 8, at: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	a := newFleetTestApp(t, 120, 40, src)
	order := func() []string {
		var out []string
		for _, h := range a.fleet.hosts {
			out = append(out, h.name)
		}
		return out
	}
	// Default sort: most used first.
	for i := 1; i < len(a.fleet.hosts); i++ {
		if a.fleet.hosts[i].sum.Used > a.fleet.hosts[i-1].sum.Used {
			t.Fatalf("not sorted by used: %v", order())
		}
	}
	press(a, "s") // free
	for i := 1; i < len(a.fleet.hosts); i++ {
		x, y := a.fleet.hosts[i-1].sum, a.fleet.hosts[i].sum
		if y.Total-y.Used > x.Total-x.Used {
			t.Fatalf("not sorted by free: %v", order())
		}
	}
	press(a, "s") // imbalance
	for i := 1; i < len(a.fleet.hosts); i++ {
		if a.fleet.hosts[i].sum.Imbalance > a.fleet.hosts[i-1].sum.Imbalance {
			t.Fatalf("not sorted by imbalance: %v", order())
		}
	}
	press(a, "s") // name
	if o := order(); o[0] != "node-000" || o[11] != "node-011" {
		t.Fatalf("not sorted by name: %v", o)
	}
	if !strings.Contains(screen(a), "sort name") {
		t.Error("the sort is not shown")
	}
	// The filter: by pod, shown, and esc clears it.
	press(a, "/", "t", "r", "a", "i", "n", "e", "r", "-", "1", "enter")
	if o := order(); len(o) != 1 || o[0] != "node-005" {
		t.Fatalf("filter trainer-1: %v", o)
	}
	if s := screen(a); !strings.Contains(s, `filter "trainer-1" 1 of 12 hosts`) {
		t.Errorf("the filter is not shown:\n%s", s)
	}
	press(a, "esc")
	if len(order()) != 12 || a.fleet.filter.Query() != "" {
		t.Errorf("esc left the filter: %v", order())
	}
	press(a, "/", "n", "o", "d", "e", "-", "0", "0", "2", "enter")
	if o := order(); len(o) != 1 {
		t.Fatalf("filter by host: %v", o)
	}
	press(a, "esc")
	// enter opens a host; a GPU without a reading says so.
	press(a, "home")
	for a.fleet.hosts[a.fleet.list.Cursor].name != "node-002" {
		press(a, "down")
	}
	press(a, "enter")
	s := screen(a)
	if !strings.Contains(s, "node-002 · 8 GPUs") || !strings.Contains(s, "- / -") {
		t.Errorf("host view:\n%s", s)
	}
	press(a, "esc")
	// A local GPU: node-003 shares UUIDs with this machine's GPUs; L shows
	// the selected one on the Live tab.
	for a.fleet.hosts[a.fleet.list.Cursor].name != "node-003" {
		press(a, "down")
	}
	if !strings.Contains(screen(a), "node-003 ◆") {
		t.Errorf("node-003 is not marked local:\n%s", screen(a))
	}
	press(a, "enter", "down", "down", "L")
	if a.active != tabLive || a.live.sel != 2 || !a.live.focus {
		t.Errorf("L: tab %d, live GPU %d focus %v; want Live, GPU 2 focused", a.active+1, a.live.sel, a.live.focus)
	}
	// r refreshes now.
	a.active = tabFleet
	a.prepareActive()
	n := src.latest
	_, cmd := a.Update(tea.KeyPressMsg{Code: 'r', Text: "r"})
	if cmd == nil {
		t.Fatal("r did not refresh")
	}
	a.Update(cmd())
	if src.latest != n+1 {
		t.Errorf("r: %d queries, want 1 more", src.latest-n)
	}
}

// TestFleetError: an unreachable Prometheus is shown plainly, and data
// already shown stays when a later refresh fails.
func TestFleetError(t *testing.T) {
	src := &fakeFleet{hosts: 2, gpus: 2, err: fmt.Errorf("cannot reach Prometheus at http://prometheus.test:9090: connection refused")}
	a := newFleetTestApp(t, 80, 24, src)
	if s := screen(a); !strings.Contains(s, "cannot reach Prometheus") || !strings.Contains(s, "r retries now") {
		t.Errorf("error view:\n%s", s)
	}
	src.err = nil
	refreshFleet(a)
	if a.fleet.data == nil || len(a.fleet.hosts) != 2 {
		t.Fatal("no data after the error cleared")
	}
	src.err = fmt.Errorf("Prometheus at x refused y: 503")
	refreshFleet(a)
	if s := screen(a); len(a.fleet.hosts) != 2 || !strings.Contains(s, "refused") || !strings.Contains(s, "node-001") {
		t.Errorf("a failed refresh lost the data or hid the error:\n%s", s)
	}
}

func BenchmarkFleetView(b *testing.B) {
	src := &fakeFleet{hosts: 128, gpus: 8, at: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	a := newFleetTestApp(b, 200, 60, src)
	if len(a.fleet.data.GPUs) != 1024 {
		b.Fatalf("%d GPUs", len(a.fleet.data.GPUs))
	}
	b.Run("grid", func(b *testing.B) {
		for b.Loop() {
			press(a, "down")
			_ = a.render()
		}
	})
	b.Run("host", func(b *testing.B) {
		press(a, "enter")
		defer press(a, "esc")
		for b.Loop() {
			press(a, "down")
			_ = a.render()
		}
	})
	b.Run("refresh", func(b *testing.B) {
		for b.Loop() {
			refreshFleet(a)
		}
	})
}

var reAgo = regexp.MustCompile(`\d+s ago`)
