package tui

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"memscope/model"
	"memscope/nvml"
	"memscope/snapshot"
	"memscope/trace"
	"memscope/tui/widget"
)

// updating reports whether -update was given (the flag is defined by
// teatest's golden package, which this test imports).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

var testInputs = []string{
	"../testdata/traces/megatron_trace_memory",
	"../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle",
	"../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle",
	"../testdata/estimates/SYNTHETIC_peak_snapshot.json",
}

// fixedClock ticks one second per call, so simulated GPUs are repeatable.
func fixedClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

// newTestApp loads inputs fully and sizes the app, without a terminal.
func newTestApp(t testing.TB, w, h int, inputs ...string) *App {
	t.Setenv("NO_COLOR", "1")
	ctx := context.Background()
	ws := model.New(ctx, nil)
	ws.Open(inputs...)
	ws.Wait()
	a := New(ctx, ws, Options{Live: nvml.NewFake(8, fixedClock()), Interval: time.Second})
	for i := 0; i < 6; i++ {
		a.live.sampler.Once(ctx)
	}
	a.live.state = a.live.sampler.State()
	a.Update(tea.WindowSizeMsg{Width: w, Height: h})
	// Update and View catch panics to keep the terminal usable; a test
	// must still fail on one.
	t.Cleanup(func() {
		if a.panics > 0 {
			t.Errorf("%d panics caught during the test; the last: %s", a.panics, a.internalErr)
		}
	})
	return a
}

func press(a *App, keys ...string) {
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "right":
			msg = tea.KeyPressMsg{Code: tea.KeyRight}
		case "left":
			msg = tea.KeyPressMsg{Code: tea.KeyLeft}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "up":
			msg = tea.KeyPressMsg{Code: tea.KeyUp}
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "home":
			msg = tea.KeyPressMsg{Code: tea.KeyHome}
		case "space":
			msg = tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
		default:
			r := []rune(k)[0]
			msg = tea.KeyPressMsg{Code: r, Text: k}
		}
		a.Update(msg)
	}
}

// screen draws through View, as the terminal does (its panics are caught
// and counted).
func screen(a *App) string { return ansi.Strip(a.View().Content) }

var reTime = regexp.MustCompile(`changed \d\d:\d\d:\d\d`)

func golden(t *testing.T, name, got string) {
	t.Helper()
	got = reTime.ReplaceAllString(got, "changed HH:MM:SS")
	path := filepath.Join("testdata", "golden", name+".golden")
	if updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tui -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test ./tui -update rewrites it):\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// TestGolden renders every tab at 80x24 and 160x48 with real sample data.
func TestGolden(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1], testInputs...)
		for i, tab := range a.tabs {
			a.active = a.tabs[i].id()
			a.prepareActive()
			name := strings.ToLower(tab.name()) + "_" + itoa(size[0]) + "x" + itoa(size[1])
			t.Run(name, func(t *testing.T) {
				s := screen(a)
				checkScreen(t, s, size[0], size[1])
				golden(t, name, s)
			})
		}
	}
}

// checkScreen asserts the frame is exactly the terminal's size: no line
// overflows or wraps.
func checkScreen(t *testing.T, s string, w, h int) {
	t.Helper()
	lines := strings.Split(s, "\n")
	if len(lines) != h {
		t.Errorf("%d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if got := ansi.StringWidth(l); got != w {
			t.Errorf("line %d is %d cells wide, want %d: %q", i, got, w, l)
		}
	}
}

func TestSmallTerminalsDegrade(t *testing.T) {
	for _, size := range [][2]int{{40, 12}, {20, 5}, {10, 3}} {
		a := newTestApp(t, size[0], size[1], testInputs...)
		for i := range a.tabs {
			a.active = a.tabs[i].id()
			a.prepareActive()
			checkScreen(t, screen(a), size[0], size[1])
		}
		press(a, "?")
		checkScreen(t, screen(a), size[0], size[1])
	}
}

func TestTabsKeys(t *testing.T) {
	a := newTestApp(t, 100, 30, testInputs...)
	press(a, "2")
	if a.active != tabSnapshot || !strings.Contains(screen(a), "efficiency") {
		t.Fatalf("2 should show the Snapshot tab:\n%s", screen(a))
	}
	press(a, "tab")
	if a.active != 2 {
		t.Errorf("tab: active %d", a.active)
	}
	a.Update(tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift})
	if a.active != tabSnapshot {
		t.Errorf("shift+tab: active %d", a.active)
	}
	press(a, "?")
	if s := screen(a); !strings.Contains(s, "Snapshot") || !strings.Contains(s, "segment map") || !strings.Contains(s, "Everywhere") {
		t.Errorf("help should list the tab's keys:\n%s", s)
	}
	press(a, "x")
	if a.showHelp {
		t.Error("any key closes the help")
	}
	// Clicking a tab title selects it.
	r := a.tabRanges()[4]
	a.Update(tea.MouseClickMsg{X: r[0] + 1, Y: 0, Button: tea.MouseLeft})
	if a.active != tabTimeline {
		t.Errorf("click on the Timeline title: active %d", a.active)
	}
}

func TestTracesSortAndDetail(t *testing.T) {
	a := newTestApp(t, 120, 30, "../testdata/traces/generated")
	firstRank := func() string {
		for _, l := range strings.Split(screen(a), "\n")[3:] {
			if f := strings.Fields(l); len(f) > 0 {
				return f[0]
			}
		}
		return ""
	}
	if got := firstRank(); got != "0" {
		t.Fatalf("sorted by rank, first row is %q", got)
	}
	press(a, "s")
	if got := firstRank(); got != "1" {
		t.Errorf("sorted by |error|, first row should be rank 1 (-3%%), got %q\n%s", got, screen(a))
	}
	press(a, "home", "enter")
	s := screen(a)
	if !strings.Contains(s, "Rank 1 · real iteration 2 [ ] of 3 (1.50s, 119 samples)") || !strings.Contains(s, "━ static (real)") || !strings.Contains(s, "┄ static (sim)") {
		t.Errorf("detail view, static memory per side:\n%s", s)
	}
	if !strings.Contains(s, "0.41s") || !strings.Contains(s, "sim/real time 0.60x") {
		t.Errorf("the detail chart is in seconds and gives the duration ratio:\n%s", s)
	}
	press(a, "x")
	if s := screen(a); !strings.Contains(s, "55%") || strings.Contains(s, "0.41s") || !strings.Contains(s, "x: % of each iteration") {
		t.Errorf("x switches to relative time:\n%s", s)
	}
	press(a, "x")
	if strings.Contains(s, "┄ theoretical") {
		t.Error("theoretical line must be off by default")
	}
	press(a, "t")
	if s := screen(a); !strings.Contains(s, "theoretical") {
		t.Errorf("t shows the theoretical line:\n%s", s)
	}
	press(a, "[")
	s = screen(a)
	if !strings.Contains(s, "real iteration 1") {
		t.Errorf("[ switches to the previous iteration:\n%s", s)
	}
	// The statistics follow the iteration on screen.
	rk := a.traces.cur().real
	it1 := rk.Iteration(1)
	wantErr, _, _ := trace.CompareIterations(it1, a.traces.cur().simIt)
	if !strings.Contains(s, "real peak "+mibStr(it1.Peak())) || !strings.Contains(s, fmt.Sprintf("%+.2f%%", wantErr)) {
		t.Errorf("statistics of iteration 1 (peak %s, error %+.2f%%):\n%s", mibStr(it1.Peak()), wantErr, s)
	}
	press(a, "esc", "h")
	if s := screen(a); !strings.Contains(s, "Rank × time heatmap") {
		t.Errorf("h shows the heatmap:\n%s", s)
	}
}

func TestSnapshotTreeExpands(t *testing.T) {
	a := newTestApp(t, 120, 40, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	press(a, "2")
	before := strings.Count(screen(a), "▸") + strings.Count(screen(a), "▾")
	rows := len(a.snap.currentTree().Rows)
	press(a, "down", "right")
	after := len(a.snap.currentTree().Rows)
	if after <= rows {
		t.Errorf("→ should expand the selected node: rows %d -> %d (markers before %d)", rows, after, before)
	}
	press(a, "left")
	if got := len(a.snap.currentTree().Rows); got != rows {
		t.Errorf("← should collapse it again: rows %d, want %d", got, rows)
	}
	press(a, "g")
	if s := screen(a); !strings.Contains(s, "role → call site → allocation") {
		t.Errorf("g switches to the role tree:\n%s", s)
	}
	press(a, "g")
	if s := screen(a); !strings.Contains(s, "call stack (outermost first)") {
		t.Errorf("g again switches to the call-stack tree:\n%s", s)
	}
	press(a, "m")
	if s := screen(a); !strings.Contains(s, "cached free") || !strings.Contains(s, "0x") {
		t.Errorf("m shows the segment map:\n%s", s)
	}
}

func TestTopSortFilterStack(t *testing.T) {
	a := newTestApp(t, 140, 40, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	press(a, "3")
	all := len(a.top.view_)
	if all == 0 {
		t.Fatal("no rows")
	}
	press(a, "/")
	if !a.top.capturing() {
		t.Fatal("/ should open the filter")
	}
	// The filter matches roles too (the peak's live set: parameters made
	// by .to() beside temporaries).
	for _, r := range "parameter" {
		press(a, string(r))
	}
	press(a, "enter")
	n := len(a.top.view_)
	if n == 0 || n >= all {
		t.Errorf("filter should narrow %d rows, got %d", all, n)
	}
	for _, i := range a.top.view_ {
		if !strings.Contains(a.top.search[i], "parameter") || a.top.allocs[i].Role != snapshot.RoleParameter {
			t.Fatalf("row %d does not match the filter", i)
		}
	}
	press(a, "q") // the filter is closed: q quits... so check it was not typed
	if a.top.filter.Query() != "parameter" {
		t.Errorf("query changed after closing the filter: %q", a.top.filter.Query())
	}
	a = newTestApp(t, 140, 40, "../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_bf16_128.pickle")
	press(a, "3")
	sizeOf := func(i int) int64 { return a.top.allocs[a.top.view_[i]].Size }
	if sizeOf(0) < sizeOf(len(a.top.view_)-1) {
		t.Error("default order is largest first")
	}
	press(a, "S")
	if sizeOf(0) > sizeOf(len(a.top.view_)-1) {
		t.Error("S reverses the order")
	}
	press(a, "enter")
	if _, ok := a.overlay.(*stackOverlay); !ok || !strings.Contains(screen(a), "Stack trace") {
		t.Errorf("enter shows the stack trace:\n%s", screen(a))
	}
	press(a, "esc")
	if a.overlay != nil {
		t.Error("esc closes the stack")
	}
}

func TestTimelineCursor(t *testing.T) {
	a := newTestApp(t, 120, 40, "../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle")
	press(a, "5")
	tl := a.timeline.tl
	if tl == nil {
		t.Fatal("no timeline")
	}
	if a.timeline.cursor != tl.Peak.EventIndex {
		t.Errorf("cursor starts at the peak: %d vs %d", a.timeline.cursor, tl.Peak.EventIndex)
	}
	press(a, "0", "right")
	if a.timeline.cursor <= tl.Peak.EventIndex {
		t.Error("→ moves the cursor right")
	}
	press(a, "[")
	s := screen(a)
	if !strings.Contains(s, "Optimizer.zero_grad") && a.timeline.cursor > tl.Peak.EventIndex {
		t.Errorf("[ jumps to the previous annotation:\n%s", s)
	}
	press(a, "p")
	if a.timeline.cursor != tl.Peak.EventIndex || !strings.Contains(screen(a), "Live at the cursor: "+bytesStr(tl.Peak.Active)) {
		t.Errorf("p jumps to the peak:\n%s", screen(a))
	}
	span := a.timeline.x1 - a.timeline.x0
	press(a, "+")
	if a.timeline.x1-a.timeline.x0 >= span {
		t.Error("+ zooms in")
	}
}

// TestProgram runs the real Bubble Tea program: keys reach the tabs and q
// quits cleanly.
func TestProgram(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := model.New(ctx, nil)
	ws.Open(testInputs...)
	a := New(ctx, ws, Options{Live: nvml.NewFake(4, fixedClock()), Interval: 100 * time.Millisecond})
	tm := teatest.NewTestModel(t, a, teatest.WithInitialTermSize(100, 30))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("4 ranks, 2 paired")) },
		teatest.WithDuration(10*time.Second))
	tm.Type("4")
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("SIMULATED")) },
		teatest.WithDuration(10*time.Second))
	tm.Type("q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	if fm, ok := tm.FinalModel(t).(*App); !ok || fm.active != 3 {
		t.Errorf("final model: %#v", fm)
	}
}

// TestEstimateViews covers the Snapshot and Top tabs on an estimate: the
// merged-module, module-tree, phase and stack-group views, the tensor
// table and the create/release stacks.
func TestEstimateViews(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1], "../testdata/estimates/generated_peak_snapshot.json")
		press(a, "2")
		for i, view := range []string{"merged", "moduletree", "phases", "stackgroups"} {
			if i > 0 {
				press(a, "g")
			}
			name := "estimate_" + view + "_" + itoa(size[0]) + "x" + itoa(size[1])
			s := screen(a)
			checkScreen(t, s, size[0], size[1])
			golden(t, name, s)
		}
		// It opens on the largest device (cuda:1 here); d goes on to the next.
		press(a, "d")
		if !strings.Contains(screen(a), "cuda:2 (3/3") {
			t.Errorf("d switches the estimate's device:\n%s", screen(a))
		}
		press(a, "3")
		s := screen(a)
		checkScreen(t, s, size[0], size[1])
		golden(t, "estimate_top_"+itoa(size[0])+"x"+itoa(size[1]), s)
	}
	a := newTestApp(t, 140, 40, "../testdata/estimates/SYNTHETIC_peak_snapshot.json")
	press(a, "3", "down", "enter")
	s := screen(a)
	if !strings.Contains(s, "allocated at") || !strings.Contains(s, "released at:") || !strings.Contains(s, "schedules.py:400 backward_step") {
		t.Errorf("enter shows create and release stacks:\n%s", s)
	}
}

// TestEstimateVersusMeasured pairs an estimate with a snapshot only by
// equal rank labels or by the user's pick, and compares peak with peak.
func TestEstimateVersusMeasured(t *testing.T) {
	const est, meas = "../testdata/estimates/SYNTHETIC_peak_snapshot.json", "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle"
	open := func(t *testing.T, estName, measName string) *App {
		dir := t.TempDir()
		for src, dst := range map[string]string{est: estName, meas: measName} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, dst), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a := newTestApp(t, 160, 30, filepath.Join(dir, estName), filepath.Join(dir, measName))
		press(a, "o")
		for i, s := range a.c.sources {
			if s.Kind == model.KindEstimate {
				a.overlay.(*picker).list.Cursor = i
			}
		}
		press(a, "enter", "c")
		return a
	}
	measuredPeak := func(a *App) int64 {
		for _, s := range a.c.sources {
			if s.Kind == model.KindSnapshot {
				return s.Analysis.Devices[0].Peak.Active
			}
		}
		t.Fatal("no snapshot loaded")
		return 0
	}
	totalLine := func(s string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "total") {
				return l
			}
		}
		return ""
	}

	t.Run("equal rank labels pair by themselves", func(t *testing.T) {
		a := open(t, "rank0_peak_snapshot.json", "rank0_memory_snapshot.pickle")
		s := screen(a)
		if !strings.Contains(s, "ESTIMATED") || !strings.Contains(s, "rank 0 in both file names") || !strings.Contains(s, "rank0_memory_snapshot.pickle") {
			t.Fatalf("estimate vs measured:\n%s", s)
		}
		// The measured column sums the live set at the measured peak.
		if tl := totalLine(s); !strings.Contains(tl, bytesStr(measuredPeak(a))) {
			t.Errorf("measured total is the measured peak %s: %q", bytesStr(measuredPeak(a)), tl)
		}
	})
	for _, names := range [][2]string{{"peak_snapshot.json", "memory_snapshot.pickle"}, {"rank1_peak_snapshot.json", "rank0_memory_snapshot.pickle"}} {
		t.Run("no guess for "+names[0]+" and "+names[1], func(t *testing.T) {
			a := open(t, names[0], names[1])
			s := screen(a)
			if strings.Contains(s, "ESTIMATED") || !strings.Contains(s, "Which allocator snapshot") {
				t.Fatalf("unlabelled files are not paired by device index:\n%s", s)
			}
			press(a, "enter")
			s = screen(a)
			if !strings.Contains(s, "paired by your pick") || !strings.Contains(totalLine(s), bytesStr(measuredPeak(a))) {
				t.Errorf("enter pairs the picked snapshot:\n%s", s)
			}
			press(a, "p")
			if !strings.Contains(screen(a), "Which allocator snapshot") {
				t.Error("p reopens the pick list")
			}
			press(a, "esc")
			if !strings.Contains(screen(a), "paired by your pick") {
				t.Error("esc keeps the pick")
			}
		})
	}
}

// TestExport: e writes the view's picture and table into the export
// directory and says where.
func TestExport(t *testing.T) {
	dir := t.TempDir()
	a := newTestApp(t, 120, 40, testInputs...)
	a.c.opts.ExportDir = dir
	for _, tab := range []string{"1", "2", "3", "5"} {
		press(a, tab)
		cmd := a.tabs[a.active].update(&a.c, tea.KeyPressMsg{Code: 'e', Text: "e"})
		if cmd == nil {
			t.Fatalf("tab %s: e returned nothing", tab)
		}
		msg := cmd()
		a.Update(msg)
		if !strings.Contains(a.status, "exported "+dir) {
			t.Errorf("tab %s: status %q", tab, a.status)
		}
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	csvs, _ := filepath.Glob(filepath.Join(dir, "*.csv"))
	if len(pngs) < 7 || len(csvs) != 4 {
		t.Errorf("exported %d pictures and %d tables: %v %v", len(pngs), len(csvs), pngs, csvs)
	}
}

// TestStackOpensAtFirstUserFrame: the stack of MercuryB1's largest block
// at the peak starts with allocator, dispatcher and CPython frames and
// passes through transformers; the overlay opens with the user's own frame
// (entrance.py, the site) in view and marked, and names the frame and
// keyword that decided the category.
func TestStackOpensAtFirstUserFrame(t *testing.T) {
	a := newTestApp(t, 80, 24, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	press(a, "3", "enter")
	o, ok := a.overlay.(*stackOverlay)
	if !ok {
		t.Fatalf("enter on Top opens no stack:\n%s", screen(a))
	}
	s := screen(a)
	if !strings.Contains(s, "▶ ") || !strings.Contains(s, "entrance.py:89") {
		t.Errorf("first user frame not in view:\n%s", s)
	}
	if !strings.Contains(s, `category Activation: keyword "forward"`) || !strings.Contains(s, "◆ Activation") {
		t.Errorf("the deciding frame and keyword are not named:\n%s", s)
	}
	shownBefore := len(o.shown())
	press(a, "n")
	if len(o.shown()) <= shownBefore {
		t.Errorf("n shows the hidden plumbing frames: %d then %d lines", shownBefore, len(o.shown()))
	}
	if a.internalErr != "" {
		t.Fatal(a.internalErr)
	}
}

// TestTorchtitanMarks: allocation retries and OOMs of an export are marked
// on the detail chart.
func TestTorchtitanMarks(t *testing.T) {
	a := newTestApp(t, 120, 30, "../testdata/traces/titan/collector_rank2_memory.json")
	press(a, "1", "enter")
	s := screen(a)
	if !strings.Contains(s, "step 2: 3 alloc retries") || !strings.Contains(s, "step 4: 1 OOMs") || strings.Contains(s, "simulated allocated") {
		t.Errorf("marks and legend:\n%s", s)
	}
}

// TestEstimateStackHidesProfilerFrames: an estimated tensor's stack opens
// at the model's frame, and n hides the profiler's hook frames.
func TestEstimateStackHidesProfilerFrames(t *testing.T) {
	a := newTestApp(t, 160, 60, "../testdata/estimates/WRITER_tiny_gpt_cpu_peak_snapshot.json")
	press(a, "3", "enter")
	s := screen(a)
	marked := ""
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "▶") {
			marked = l
		}
	}
	if !strings.Contains(marked, "run_real_writer.py") {
		t.Errorf("the stack opens at the model's frame, got %q:\n%s", marked, s)
	}
	// Each frame's line of code (an estimate's stacks carry them) shows
	// under it, and hides with it: the profiler's own
	// (traceback.format_stack) only when its frames show.
	if !strings.Contains(s, "model = GPTModel()") {
		t.Errorf("the frames' lines of code should show:\n%s", s)
	}
	profilerLine := strings.Contains(s, "traceback.format_stack()")
	before := strings.Count(s, "memory_dispatch_mode.py") + strings.Count(s, "_pytree.py")
	frameLines := func(s string) int { // a frame's line: two spaces and its file
		n := 0
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "  ") && len(l) > 2 && l[2] != ' ' {
				n++
			}
		}
		return n
	}
	var said int
	if _, err := fmt.Sscanf(s[strings.Index(s, "e edit · ")+len("e edit · "):], "%d interpreter/dispatcher frames hidden", &said); err != nil {
		t.Fatalf("no count of hidden frames: %v\n%s", err, s)
	}
	shownBefore := frameLines(s)
	press(a, "n")
	if got := frameLines(screen(a)) - shownBefore; got != said {
		t.Errorf("the note says %d frames hidden; n showed %d more", said, got)
	}
	after := strings.Count(screen(a), "memory_dispatch_mode.py") + strings.Count(screen(a), "_pytree.py")
	if (before == 0) == (after == 0) {
		t.Errorf("n shows/hides the profiler frames: %d before, %d after", before, after)
	}
	if shown := strings.Contains(screen(a), "traceback.format_stack()"); shown == profilerLine || shown != (after > 0) {
		t.Errorf("the profiler frame's line of code: shown %v with its frames hidden, %v shown (frames %d, %d)", profilerLine, shown, before, after)
	}
}

// TestOpensOnTheFittingTab: the first tab follows what was opened until
// the user picks one.
func TestOpensOnTheFittingTab(t *testing.T) {
	for _, c := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"a lone snapshot", []string{"../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle"}, "Snapshot"},
		{"a lone estimate", []string{"../testdata/estimates/SYNTHETIC_peak_snapshot.json"}, "Snapshot"},
		{"traces and a snapshot", []string{"../testdata/traces/megatron_trace_memory", "../testdata/estimates/SYNTHETIC_peak_snapshot.json"}, "Traces"},
		{"nothing but GPUs (live or --replay)", nil, "Live"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newTestApp(t, 120, 30, c.paths...)
			if got := a.tabs[a.active].name(); got != c.want {
				t.Errorf("opens on %s, want %s", got, c.want)
			}
			press(a, "4")
			a.refresh()
			if a.tabs[a.active].name() != "Live" {
				t.Error("a refresh after the user chose a tab keeps it")
			}
		})
	}
}

// panicTab panics on a key, or when drawn.
type panicTab struct {
	tracesTab
	inView bool
}

func (p *panicTab) update(*tabContext, tea.Msg) tea.Cmd { panic("boom in update") }
func (p *panicTab) view(*tabContext) string {
	if p.inView {
		panic("boom in view")
	}
	return ""
}

// TestCaughtPanicsAreCounted: a panic in a tab is shown, not fatal, and
// counted, which is what makes every other test fail on one.
func TestCaughtPanicsAreCounted(t *testing.T) {
	a := newTestApp(t, 80, 24)
	a.tabs[0] = &panicTab{}
	press(a, "1", "x")
	if a.panics != 1 || !strings.Contains(screen(a), "internal error: boom in update") {
		t.Errorf("a panic in update is caught and shown: %d %q", a.panics, a.internalErr)
	}
	press(a, "x") // dismisses the message
	a.tabs[0] = &panicTab{inView: true}
	if s := screen(a); a.panics != 2 || !strings.Contains(s, "internal error while drawing: boom in view") {
		t.Errorf("a panic while drawing is caught and shown: %d %q", a.panics, s)
	}
	a.panics = 0 // counted as expected here
}

// TestFileStringsNeverReachTheTerminalRaw opens files whose frames,
// annotations, modules, shapes, phases and file names carry terminal
// control sequences, walks every view, and checks what would be written to
// the terminal.
func TestFileStringsNeverReachTheTerminalRaw(t *testing.T) {
	dir := t.TempDir()
	// A trace run whose file name carries a clear-screen sequence.
	tr := `{"0": {"samples": [{"timestamp_s": 0, "allocated_memory_MB": 1}, {"timestamp_s": 1, "allocated_memory_MB": 2}]}}`
	for _, side := range []string{"real", "sim"} {
		if err := os.MkdirAll(filepath.Join(dir, "run", side), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "run", side, "memory_trace_rank0_\x1b[2J\x07.json"), []byte(tr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := newTestApp(t, 160, 50, filepath.Join(dir, "run"),
		"../testdata/snapshots/synthetic/hostile_strings.pickle", "../testdata/snapshots/synthetic/hostile_peak_snapshot.json")
	bad := []string{"\x1b]", "\x07", "\x1b[2J", "\u009b", "\x7f", "PWNED\x07"}
	check := func(where string) {
		t.Helper()
		raw := a.View().Content
		for _, b := range bad {
			if strings.Contains(raw, b) {
				t.Errorf("%s: %q reaches the terminal:\n%s", where, b, ansi.Strip(raw))
			}
		}
		// Shown escaped (not dropped), and escaped where placed, so the
		// layout keeps its width.
		vis := ansi.Strip(raw)
		for _, pair := range [][2]string{{"PWNED", `\x1b]0;PWNED`}, {"evil.py", `\x07evil.py`}, {"2Jforward", `\x1b[2Jforward`},
			{"2Jbuild", `\x1b[2Jbuild`}, {"31m.py", `\u009b31m.py`}} {
			if n, m := strings.Count(vis, pair[0]), strings.Count(vis, pair[1]); n != m {
				t.Errorf("%s: %q appears %d times, escaped (%q) %d times:\n%s", where, pair[0], n, pair[1], m, vis)
			}
		}
		if strings.Contains(vis, "GPT.mlp") {
			t.Errorf("%s: a control sequence was dropped silently:\n%s", where, vis)
		}
		checkScreen(t, vis, 160, 50)
	}
	pick := func(kind model.SourceKind) {
		press(a, "o")
		for i, s := range a.c.sources {
			if s.Kind == kind {
				a.overlay.(*picker).list.Cursor = i
			}
		}
		check("sources picker")
		press(a, "enter")
	}
	press(a, "1")
	check("traces list")
	press(a, "enter")
	check("traces detail")
	press(a, "esc", "h")
	check("heatmap")
	press(a, "esc")
	pick(model.KindSnapshot)
	check("snapshot categories")
	press(a, "E")
	check("snapshot tree expanded")
	press(a, "g")
	check("call-stack tree")
	press(a, "E", "down", "down", "enter")
	check("stack overlay")
	press(a, "esc", "m")
	check("segment map")
	press(a, "esc", "3")
	check("top")
	press(a, "enter")
	check("top stack")
	press(a, "esc", "5")
	check("timeline")
	pick(model.KindEstimate)
	for i := 0; i < 4; i++ {
		check(fmt.Sprintf("estimate view %d", i))
		press(a, "g")
	}
	press(a, "3")
	check("estimate top")
	press(a, "enter")
	check("estimate stack")
	press(a, "esc", "?")
	check("help")
}

// TestStateSurvivesCopiesAndReloads: a progress tick (the workspace copies
// its sources) keeps every tab as it is; a reload of the same file keeps
// the trees' open nodes, the cursors and the timeline's place.
func TestStateSurvivesCopiesAndReloads(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "snap.pickle")
	b, err := os.ReadFile("../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	a := newTestApp(t, 120, 40, p)
	press(a, "2", "down", "right", "down", "down")
	tree := a.snap.currentTree()
	cursor := tree.Cur().Path
	open := len(tree.Rows)
	press(a, "3", "down", "down", "down", "5", "left", "left")
	topCursor, tlCursor := a.top.list.Cursor, a.timeline.cursor

	a.ws.MarkDemo() // copies every source, as a progress tick does
	a.refresh()
	if a.snap.currentTree() != tree || a.top.list.Cursor != topCursor || a.timeline.cursor != tlCursor {
		t.Error("a copy of the same data rebuilt the views")
	}

	id := a.c.sources[0].ID
	gen := a.c.sources[0].Generation
	a.ws.Reload(id)
	a.ws.Wait()
	a.refresh()
	if a.c.sources[0].Generation == gen {
		t.Fatal("the reload did not happen")
	}
	tree2 := a.snap.currentTree()
	if tree2 == tree || tree2.Cur() == nil || tree2.Cur().Path != cursor || len(tree2.Rows) != open {
		t.Errorf("after a reload the tree has %d rows (want %d), cursor %v (want %s)", len(tree2.Rows), open, tree2.Cur(), cursor)
	}
	if a.top.list.Cursor != topCursor || a.timeline.cursor != tlCursor {
		t.Errorf("after a reload: top cursor %d (want %d), timeline cursor %d (want %d)", a.top.list.Cursor, topCursor, a.timeline.cursor, tlCursor)
	}
}

// TestLiveSetGrouped: the live set at the cursor is a tree whose
// categories add up to the live bytes, and what is opened stays open as
// the cursor moves.
func TestLiveSetGrouped(t *testing.T) {
	a := newTestApp(t, 120, 40, "../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle")
	press(a, "5")
	screen(a)
	tv := a.timeline.ltree
	if tv == nil {
		t.Fatal("no grouped live set")
	}
	var sum int64
	for _, c := range tv.Root.Children {
		sum += c.Bytes
	}
	if sum != a.timeline.liveB || a.timeline.liveN > liveTreeCap {
		t.Errorf("categories sum to %d, live bytes %d", sum, a.timeline.liveB)
	}
	press(a, "*")
	opened := len(tv.Expanded)
	press(a, "left")
	screen(a)
	if a.timeline.ltree == tv || len(a.timeline.ltree.Expanded) < opened {
		t.Errorf("moving the cursor rebuilds the tree and keeps %d open groups: %d", opened, len(a.timeline.ltree.Expanded))
	}
}

// runAll runs a command (a batch too) and sends its messages back, as the
// program would; only for commands that end by themselves.
func runAll(a *App, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			runAll(a, c)
		}
	default:
		_, next := a.Update(msg)
		runAll(a, next)
	}
}

// TestAllocatorStateAtCursor: m on the Timeline shows the segments and
// blocks replayed to the cursor, with the figures the replay gives there.
func TestAllocatorStateAtCursor(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1], "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
		press(a, "5")
		_, replay := a.Update(tea.KeyPressMsg{Code: 'm', Text: "m"})
		if s := screen(a); !strings.Contains(s, "replaying the allocator state") {
			t.Errorf("m: the state is replayed off the UI goroutine, and the view says so meanwhile:\n%s", s)
		}
		runAll(a, replay)
		tl := a.timeline.tl
		check := func() {
			t.Helper()
			s := screen(a)
			cur := a.timeline.cursor
			want := fmt.Sprintf("Allocator state after event %d", cur)
			if !strings.Contains(s, want) || !strings.Contains(s, "reserved "+bytesStr(tl.ReservedAt(cur))) ||
				!strings.Contains(s, "active "+bytesStr(tl.ActiveAt(cur))) {
				t.Errorf("%q with reserved %s and active %s:\n%s", want, bytesStr(tl.ReservedAt(cur)), bytesStr(tl.ActiveAt(cur)), s)
			}
			checkScreen(t, s, size[0], size[1])
		}
		check()
		golden(t, fmt.Sprintf("timeline_state_%dx%d", size[0], size[1]), screen(a))
		press(a, "0", "home", "right", "right", "right")
		if s := screen(a); !strings.Contains(s, "following the cursor") {
			t.Errorf("a moving cursor keeps the last state, marked:\n%s", s)
		}
		a.Update(stateTick{cursor: a.timeline.cursor - 1}) // a tick of an older position does nothing
		if a.timeline.stateAt == a.timeline.cursor {
			t.Error("a stale tick replayed the state")
		}
		_, replay = a.Update(stateTick{cursor: a.timeline.cursor}) // the cursor rested
		if a.timeline.stateAt == a.timeline.cursor {
			t.Error("the rested cursor's state was replayed on the UI goroutine")
		}
		runAll(a, replay)
		check()
		press(a, "m")
		if strings.Contains(screen(a), "Allocator state") {
			t.Error("m goes back to the live set")
		}
	}
}

// TestSegmentsToOneScale: segment rows share one scale (at least one cell),
// and a cell shows the state covering most of its bytes.
func TestSegmentsToOneScale(t *testing.T) {
	for _, c := range []struct {
		size, largest int64
		n, want       int
	}{{314 << 20, 314 << 20, 80, 80}, {157 << 20, 314 << 20, 80, 40}, {2 << 20, 314 << 20, 80, 1}, {1, 314 << 20, 80, 1}, {5, 0, 80, 80}} {
		if got := scaledCells(c.size, c.largest, c.n); got != c.want {
			t.Errorf("scaledCells(%d, %d, %d) = %d, want %d", c.size, c.largest, c.n, got, c.want)
		}
	}
	th := widget.NewTheme(true)
	th.NoColor = true
	// 10 cells of 10 bytes: 0-24 allocated (cell 2 is half free: a tie
	// shows free), 40-45 pending (most of cell 4), the rest free.
	got := ansi.Strip(spanCells(th, 100, []cellSpan{{0, 25, cellAllocated}, {40, 6, cellPending}}, 10))
	if want := "██░░▒░░░░░"; got != want {
		t.Errorf("spanCells = %q, want %q", got, want)
	}
}

// TestSnapshotTreeSearch: / searches the whole tree (closed nodes too),
// opens what matches and puts the cursor on it; n and N go on.
func TestSnapshotTreeSearch(t *testing.T) {
	a := newTestApp(t, 140, 40, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	press(a, "2", "/")
	if !a.snap.capturing() {
		t.Fatal("/ starts a search that takes the keys")
	}
	// The call site is the user's own line (entrance.py), not the
	// transformers frame under it.
	for _, r := range "entrance" {
		press(a, string(r))
	}
	tv := a.snap.currentTree()
	if r := tv.Cur(); r == nil || !strings.Contains(r.Node.Label, "entrance.py") {
		t.Fatalf("the cursor is on the call site in entrance.py: %+v\n%s", r, screen(a))
	}
	press(a, "enter")
	if a.snap.capturing() || !strings.Contains(screen(a), `search "entrance"`) {
		t.Error("enter keeps the search and gives the keys back")
	}
	// Allocation leaves sit in closed nodes: the search opens them.
	press(a, "/")
	for _, r := range "active_alloc" {
		press(a, string(r))
	}
	press(a, "enter")
	first := tv.Cur()
	if first == nil || first.Node.Alloc == nil {
		t.Fatalf("the search reaches an allocation in a closed node: %+v", first)
	}
	firstNode := first.Node
	press(a, "n")
	second := tv.Cur().Node
	press(a, "N")
	if tv.Cur().Node != firstNode || second == firstNode || second.Alloc == nil {
		t.Errorf("n then N come back to the first match: %p, %p, %p", firstNode, second, tv.Cur().Node)
	}
	press(a, "/", "z", "z", "q", "esc")
	if a.snap.query != "" || !strings.Contains(a.status, "no match") {
		t.Errorf("a query without match says so and esc ends it: %q %q", a.snap.query, a.status)
	}
}

// TestTracesFilter: / keeps the ranks whose number or file path matches.
func TestTracesFilter(t *testing.T) {
	a := newTestApp(t, 160, 40, "../testdata/traces/generated")
	all := len(a.traces.rows)
	press(a, "1", "/", "3")
	if len(a.traces.rows) != 1 || a.traces.rows[0].rank != 3 {
		t.Fatalf("a number keeps that rank: %d rows", len(a.traces.rows))
	}
	press(a, "enter")
	if a.traces.capturing() || !strings.Contains(screen(a), `filter "3": 1 of 6 ranks`) {
		t.Errorf("enter keeps the filter:\n%s", screen(a))
	}
	press(a, "/", "esc")
	if len(a.traces.rows) != all {
		t.Error("esc clears the filter")
	}
	press(a, "/")
	for _, r := range "rank5_" {
		press(a, string(r))
	}
	if len(a.traces.rows) != 1 || a.traces.rows[0].rank != 5 {
		t.Errorf("text is looked for in the file paths: %d rows", len(a.traces.rows))
	}
}

// TestLiveFilterIsShown: a Live filter says it is on and esc clears it;
// e exports the history and processes; a tab change drops the message.
func TestLiveFilterIsShown(t *testing.T) {
	a := newTestApp(t, 80, 24, testInputs...)
	a.c.opts.ExportDir = t.TempDir()
	press(a, "4", "/")
	for _, r := range "local-rank 3" {
		press(a, string(r))
	}
	press(a, "enter")
	s := screen(a)
	if !strings.Contains(s, `filter "local-rank 3": 1 processes shown · esc clears`) {
		t.Fatalf("filter not shown:\n%s", s)
	}
	press(a, "esc")
	if a.live.filter.Query() != "" || strings.Contains(screen(a), `filter "`) {
		t.Fatalf("esc did not clear the filter:\n%s", screen(a))
	}
	_, cmd := a.Update(tea.KeyPressMsg{Code: 'e', Text: "e"})
	if cmd == nil {
		t.Fatal("e did nothing on Live")
	}
	a.Update(cmd())
	files, _ := filepath.Glob(filepath.Join(a.c.opts.ExportDir, "memscope_live_*"))
	if len(files) != 2 || !strings.Contains(a.status, "exported") {
		t.Fatalf("export: %v, status %q", files, a.status)
	}
	hist, _ := os.ReadFile(files[0])
	if n := strings.Count(string(hist), "\n"); n < 8*6 {
		t.Errorf("history has %d lines, want a row per GPU and sample", n)
	}
	press(a, "1")
	if strings.Contains(screen(a), "exported") {
		t.Error("the Live export message followed to Traces")
	}
}

// TestTopFilterIsShownAt80: the Top filter note leads the header, so a
// long file name cannot push it off an 80-column screen.
func TestTopFilterIsShownAt80(t *testing.T) {
	a := newTestApp(t, 80, 24, testInputs...)
	press(a, "3", "/", "a", "t", "t", "n", "enter")
	lines := strings.Split(screen(a), "\n")
	if !strings.HasPrefix(lines[1], `filter "attn": `) || !strings.Contains(lines[1], "(esc clears)") {
		t.Errorf("filter not leading the header: %q", lines[1])
	}
}

// TestNothingOpenedOpensLive: with no source at all (a first run in an
// empty folder), the explorer opens on Live, which says what to do.
func TestNothingOpenedOpensLive(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	ws := model.New(context.Background(), nil)
	a := New(context.Background(), ws, Options{LiveErr: fmt.Errorf("NVML initialisation failed: no driver")})
	a.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if a.active != tabLive {
		t.Fatalf("opened on tab %d, want Live", a.active+1)
	}
	if s := screen(a); !strings.Contains(s, "Live GPUs: not available") || strings.Contains(s, "error") && strings.Contains(s, "✗") {
		t.Errorf("screen:\n%s", s)
	}
}

// TestTracesDetailWithoutColour: under NO_COLOR the real and simulated
// lines differ in their drawing (solid, dashed) and the legend says so.
func TestTracesDetailWithoutColour(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1], testInputs...)
		press(a, "1", "enter")
		s := screen(a)
		if !strings.Contains(s, "━ real allocated") || !strings.Contains(s, "┄ simulated allocated") {
			t.Errorf("legend does not tell the lines apart:\n%s", s)
		}
		golden(t, fmt.Sprintf("traces_detail_%dx%d", size[0], size[1]), s)
	}
	// A flat series drawn dashed sets about half the dots a solid one does,
	// dotted fewer still.
	count := func(dash int) int {
		xs, ys := []float64{0, 1}, []float64{0.5, 0.5}
		out := widget.Chart(widget.ChartSpec{W: 60, H: 6, Xmin: 0, Xmax: 1, Ymin: 0, Ymax: 1,
			Series: []widget.Series{{Xs: xs, Ys: ys, Dash: dash}}})
		n := 0
		for _, r := range out {
			if r > 0x2800 && r <= 0x28ff {
				n += bits.OnesCount(uint(r - 0x2800)) // braille dots set
			}
		}
		return n
	}
	solid, dashed, dotted := count(0), count(widget.DashDashed), count(widget.DashDotted)
	if !(dashed < solid*3/4 && dashed > solid/4 && dotted < dashed) {
		t.Errorf("braille dots: solid %d, dashed %d, dotted %d", solid, dashed, dotted)
	}
}

// TestFitMiddle: names that fit stay whole; longer ones keep both ends.
func TestFitMiddle(t *testing.T) {
	for _, c := range []struct {
		in   string
		w    int
		want string
	}{
		{"abcdef", 6, "abcdef"}, {"abcdef", 8, "abcdef  "}, {"abcdefg", 6, "ab…efg"},
		{"memory_forward_bf16_128.pickle", 16, "memory_…8.pickle"},
		{"日本語のファイル名.pickle", 12, ""}, {"x", 0, ""},
	} {
		got := widget.FitMiddle(c.in, c.w)
		if ansi.StringWidth(got) != c.w {
			t.Errorf("fitMiddle(%q, %d) = %q: %d cells", c.in, c.w, got, ansi.StringWidth(got))
		}
		if c.want != "" && got != c.want {
			t.Errorf("fitMiddle(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
		}
	}
	a, b := widget.FitMiddle("silmont2000_assignment2-systems__memory_forward_bf16_128.pickle", 40), widget.FitMiddle("silmont2000_assignment2-systems__memory_forward_fp32_128.pickle", 40)
	if a == b || !strings.HasPrefix(a, "silmont") || !strings.Contains(a, "bf16_128.pickle") {
		t.Errorf("middle cut loses what tells the names apart: %q / %q", a, b)
	}
}

// TestRecommendationsInFull: R lists every recommendation, wrapped, not
// the three one-line ones the tab has room for.
func TestRecommendationsInFull(t *testing.T) {
	a := newTestApp(t, 80, 24, testInputs...)
	press(a, "2")
	d := a.snap.dev()
	if d == nil || len(d.Recommendations) < 2 {
		t.Fatal("the sample snapshot is expected to have at least two recommendations")
	}
	if !strings.Contains(screen(a), "R shows them in full") {
		t.Errorf("the tab does not say how to see them:\n%s", screen(a))
	}
	press(a, "R")
	s := strings.Join(strings.Fields(screen(a)), " ")
	for _, r := range d.Recommendations {
		words := strings.Fields(r.Text)
		if last := words[len(words)-1]; !strings.Contains(s, last) {
			t.Errorf("recommendation not in full (its last word %q missing): %s", last, r.Text)
		}
	}
	press(a, "esc")
	if a.overlay != nil {
		t.Error("esc did not close the recommendations")
	}
}

// TestAllInactiveSnapshotPointsToThePeak: a snapshot whose blocks are all
// cached says so and where its trace peaked, instead of an empty tree.
func TestAllInactiveSnapshotPointsToThePeak(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1], "../testdata/snapshots/drisspg_transformer_nuggets__mini_snapshot.pickle")
		press(a, "2")
		s := screen(a)
		d := a.snap.dev()
		if d.ActiveBlocks != 0 {
			t.Fatalf("the sample has %d active blocks", d.ActiveBlocks)
		}
		if !strings.Contains(s, "Nothing is allocated at the moment of this snapshot") ||
			!strings.Contains(s, "peaked at "+bytesStr(d.Peak.Active)) || !strings.Contains(s, "p jumps to the peak") {
			t.Errorf("no pointer to the peak:\n%s", s)
		}
		golden(t, fmt.Sprintf("snapshot_inactive_%dx%d", size[0], size[1]), s)
		press(a, "5", "p")
		if want := max(0, a.timeline.tl.Peak.EventIndex); a.timeline.cursor != want && a.timeline.cursor != a.timeline.tl.Peak.EventIndex {
			t.Errorf("p on the Timeline: cursor %d, peak %d", a.timeline.cursor, a.timeline.tl.Peak.EventIndex)
		}
	}
}

// TestRolesPeakTopAndIcicle: on a real PyTorch 2.11 snapshot (C++ and
// Python stacks), the Top tab opens on the live set at the peak with roles
// and user sites, p switches to the snapshot, the Snapshot tab names the
// roles at the peak, and i draws the flame graph of the peak's memory.
func TestRolesPeakTopAndIcicle(t *testing.T) {
	const file = "../testdata/snapshots/h100/gpt_adamw.pickle.gz"
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1], file)
		d := a.snap.dev()
		peak := a.snap.src.Analysis.PeakLive(d)
		press(a, "3")
		s := screen(a)
		checkScreen(t, s, size[0], size[1])
		golden(t, fmt.Sprintf("top_peak_%dx%d", size[0], size[1]), s)
		if !a.top.peak || len(a.top.allocs) != len(peak) || !strings.Contains(s, "ROLE") || !strings.Contains(s, "SITE") {
			t.Fatalf("Top opens on the %d allocations live at the peak:\n%s", len(peak), s)
		}
		// The largest live allocation at the peak is the logits' gradient
		// (a backward temporary); its site is the autograd node, not a
		// dispatcher frame.
		if top := a.top.allocs[a.top.view_[0]]; top.Role != snapshot.RoleTemporary ||
			!strings.Contains(a.top.locs[a.top.view_[0]], "Backward0::apply") {
			t.Errorf("largest at the peak: %s at %q", top.Role, a.top.locs[a.top.view_[0]])
		}
		press(a, "p")
		if a.top.peak || len(a.top.allocs) != len(d.Allocations) {
			t.Errorf("p shows the snapshot's %d active blocks, not %d rows", len(d.Allocations), len(a.top.allocs))
		}
		press(a, "2")
		s = screen(a)
		if !strings.Contains(s, "roles at the peak: Activation") {
			t.Errorf("the Snapshot tab names the roles at the peak:\n%s", s)
		}
		press(a, "i")
		s = screen(a)
		checkScreen(t, s, size[0], size[1])
		golden(t, fmt.Sprintf("icicle_%dx%d", size[0], size[1]), s)
		if !strings.Contains(s, "all · "+bytesStr(d.Peak.Active)+" (100.0%)") {
			t.Errorf("the icicle's root is the peak's %s:\n%s", bytesStr(d.Peak.Active), s)
		}
		ic := a.snap.currentIcicle()
		press(a, "down")
		first := ic.cur()
		if first == ic.root || first != ic.root.Children[0] {
			t.Error("↓ goes to the largest callee")
		}
		press(a, "right")
		if ic.cur() == first || len(ic.chain) != 2 {
			t.Error("→ goes to the next sibling")
		}
		press(a, "left", "enter")
		if ic.zoom != 1 || !strings.Contains(screen(a), "esc zoom out") {
			t.Error("enter zooms into the frame")
		}
		press(a, "esc")
		if ic.zoom != 0 || a.snap.alloc.mode != amIcicle {
			t.Error("esc zooms out first")
		}
		press(a, "esc")
		if a.snap.alloc.mode != amCategory {
			t.Error("esc at the top leaves the flame graph")
		}
	}
}

// TestDiffSitesKeepTheirEnd: at 80 columns the diff's call sites are cut
// from the left, so "file:line function" stays whole.
func TestDiffSitesKeepTheirEnd(t *testing.T) {
	a := newTestApp(t, 80, 24, "../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_bf16_128.pickle",
		"../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle")
	press(a, "o", "space", "down", "space", "d")
	o, ok := a.overlay.(*diffOverlay)
	if !ok {
		t.Fatalf("no diff:\n%s", screen(a))
	}
	found := false
	for _, l := range o.lines(&a.c, 80) {
		l = strings.TrimRight(ansi.Strip(l), " ")
		if strings.Contains(l, "linear.py:15") {
			found = true
			if !strings.HasSuffix(l, "linear.py:15 forward") || ansi.StringWidth(l) > 80 {
				t.Errorf("a call site cut on the right or too wide: %q", l)
			}
		}
	}
	if !found {
		t.Error("no row for linear.py:15")
	}
}

// TestMissingPathIsShown: a path that does not exist is said on the tab
// the explorer opens on, not only behind the sources picker.
func TestMissingPathIsShown(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	ctx := context.Background()
	ws := model.New(ctx, nil)
	ws.Open("/nonexistent/path") // what `memscope /nonexistent/path` opens: no live GPUs
	ws.Wait()
	a := New(ctx, ws, Options{Interval: time.Second})
	a.Update(tea.WindowSizeMsg{Width: 100, Height: 24})
	if s := screen(a); !strings.Contains(s, "✗") || !strings.Contains(s, "no such file or directory") {
		t.Errorf("the error is not on the first screen:\n%s", s)
	}
}

// TestStackCopyAndEdit: in a stack, y copies the selected frame's
// path:line (the site when it opens) and e opens a local file in the
// editor, or says the file is not here.
func TestStackCopyAndEdit(t *testing.T) {
	a := newTestApp(t, 120, 30, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	press(a, "3", "enter")
	_, ok := a.overlay.(*stackOverlay)
	if !ok {
		t.Fatal("no stack")
	}
	screen(a) // places the cursor on the site
	a.overlayUpdate(tea.KeyPressMsg{Code: 'y', Text: "y"})
	if !strings.Contains(a.status, "copied ") || !strings.HasSuffix(a.status, "entrance.py:89") {
		t.Errorf("y: status %q, want the site's path:line", a.status)
	}
	if c := a.overlayUpdate(tea.KeyPressMsg{Code: 'y', Text: "y"}); c == nil {
		t.Error("y returns no clipboard command")
	}
	a.overlayUpdate(tea.KeyPressMsg{Code: 'e', Text: "e"})
	if !strings.Contains(a.status, "is not a file on this machine") {
		t.Errorf("e on a file from another machine: status %q", a.status)
	}
	local := filepath.Join(t.TempDir(), "model.py")
	os.WriteFile(local, []byte("x = 1\n"), 0o644)
	t.Setenv("EDITOR", "true")
	if c := editFrame(&a.c, &snapshot.Frame{Filename: local, Line: 1, Name: "f"}); c == nil {
		t.Error("e on a local file starts no editor")
	}
}

// TestTopSortResetsAcrossKinds: a sort chosen on a snapshot's columns does
// not carry over to an estimate's, whose columns differ.
func TestTopSortResetsAcrossKinds(t *testing.T) {
	a := newTestApp(t, 140, 40, "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle",
		"../testdata/estimates/SYNTHETIC_peak_snapshot.json")
	press(a, "3", "s", "s")
	if a.top.sortCol == 0 {
		t.Fatal("s did not change the sort")
	}
	press(a, "o", "down", "enter")
	press(a, "3")
	s := screen(a)
	if !a.top.est {
		t.Fatalf("the estimate is not shown:\n%s", s)
	}
	if a.top.sortCol != 0 || !strings.Contains(s, "SIZE▼") {
		t.Errorf("the estimate's Top keeps another kind's sort (column %d):\n%s", a.top.sortCol, s)
	}
}

// TestTracesHeadersKeepWords: at 80 columns the sparkline headers are
// whole words, not "REAL …" and "SIMUL…".
func TestTracesHeadersKeepWords(t *testing.T) {
	a := newTestApp(t, 80, 24, "../testdata/traces/megatron_trace_memory")
	press(a, "1")
	s := screen(a)
	if strings.Contains(s, "SIMUL…") || strings.Contains(s, "REAL …") || !strings.Contains(s, "REAL ") || !strings.Contains(s, "SIM ") {
		t.Errorf("headers cut mid-word:\n%s", s)
	}
}

// TestSuspendKey: ctrl+z hands the terminal back to the shell (Bubble
// Tea's suspend, which sends SIGTSTP: only the command is checked here,
// not run), from any view, the command line included; after `fg` the
// view is the same.
func TestSuspendKey(t *testing.T) {
	a := newTestApp(t, 80, 24, testInputs...)
	ctrlZ := tea.KeyPressMsg{Code: 'z', Mod: tea.ModCtrl}
	for _, setup := range [][]string{{"1"}, {"5"}, {"2", "?"}, {"1", ":"}} {
		press(a, setup...)
		before := screen(a)
		_, cmd := a.Update(ctrlZ)
		if cmd == nil {
			t.Fatalf("after %v ctrl+z did nothing", setup)
		}
		if _, ok := cmd().(tea.SuspendMsg); !ok {
			t.Fatalf("after %v ctrl+z sends %T, want tea.SuspendMsg", setup, cmd())
		}
		a.Update(tea.ResumeMsg{})
		if after := screen(a); after != before {
			t.Errorf("after %v the view changed across a suspend:\n%s\n---\n%s", setup, before, after)
		}
		press(a, "esc")
	}
}
