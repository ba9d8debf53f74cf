package tui

import (
	"context"
	"fmt"
	"os"
	"testing"

	"memscope/model"
	"memscope/snapshot"
)

// Frames at the scale issue 14 names, from data built in memory (the file
// formats are benchmarked where they are decoded):
//
//	go test ./tui -run '^$' -bench 'Scale' -benchtime 20x

// syntheticTrace is one device's trace of about n events: allocations from
// 400 call sites (distinct stacks of 16 frames), freed a few hundred events
// later, with a ProfilerStep#N every n/20 events.
func syntheticTrace(n int) *snapshot.Snapshot {
	stacks := make([]snapshot.Stack, 400)
	for i := range stacks {
		var fr []snapshot.Frame
		for d := 0; d < 16; d++ {
			fr = append(fr, snapshot.Frame{Filename: fmt.Sprintf("/w/model/layer%d.py", (i+d)%50), Line: int64(10 + d + i), Name: "forward"})
		}
		stacks[i] = snapshot.StackOf(fr...)
	}
	s := &snapshot.Snapshot{Traces: [][]snapshot.TraceEntry{nil}, Stacks: stacks}
	var open []uint64
	addr := uint64(1 << 40)
	t := int64(1_000_000)
	for i := 0; len(s.Traces[0]) < n; i++ {
		t += 3
		if i%(n/40) == 0 {
			step := i / (n / 40)
			s.Annotations = append(s.Annotations, snapshot.Annotation{Name: fmt.Sprintf("ProfilerStep#%d", step), Stage: "START", TimeUS: t})
			if step > 0 {
				s.Annotations = append(s.Annotations, snapshot.Annotation{Name: fmt.Sprintf("ProfilerStep#%d", step-1), Stage: "END", TimeUS: t - 1})
			}
		}
		size := int64(512 * (1 + i%2048))
		s.Traces[0] = append(s.Traces[0], snapshot.TraceEntry{Addr: addr, Size: size, TimeUS: t, Stack: uint32(i%len(stacks)) + 1}.With(snapshot.ActionAlloc))
		open = append(open, addr)
		addr += uint64(size)
		if len(open) > 300 {
			a := open[0]
			open = open[1:]
			s.Traces[0] = append(s.Traces[0],
				snapshot.TraceEntry{Addr: a, TimeUS: t + 1}.With(snapshot.ActionFreeRequested),
				snapshot.TraceEntry{Addr: a, TimeUS: t + 1}.With(snapshot.ActionFreeCompleted))
		}
	}
	// Sizes of frees come from their allocs, as PyTorch writes them.
	sizes := map[uint64]int64{}
	for i := range s.Traces[0] {
		e := &s.Traces[0][i]
		if e.Action() == snapshot.ActionAlloc {
			sizes[e.Addr] = e.Size
		} else {
			e.Size = sizes[e.Addr]
		}
	}
	return s
}

func loadedSource(id int, a *snapshot.Analysis) *model.Source {
	return &model.Source{ID: id, Kind: model.KindSnapshot, Path: "synthetic", Paths: []string{"synthetic"}, State: model.Loaded, Analysis: a, Generation: 1}
}

func BenchmarkScaleTimeline1M(b *testing.B) {
	benchTimeline(b, snapshot.Analyze(syntheticTrace(1_000_000), nil), 1_000_000)
}

// BenchmarkScaleTimelineFile draws the Timeline of a real snapshot file
// (skipped unless MEMSCOPE_BENCH_FILE names one), e.g. the 0.8 GB
// distinct-stack file of issue 11:
//
//	python3 scripts/gen_snapshot.py --entries 1500000 --frames unshared --stacks 1500000 --depth 30 F
//	MEMSCOPE_BENCH_FILE=F go test ./tui -run '^$' -bench ScaleTimelineFile -benchtime 20x
func BenchmarkScaleTimelineFile(b *testing.B) {
	path := os.Getenv("MEMSCOPE_BENCH_FILE")
	if path == "" {
		b.Skip("MEMSCOPE_BENCH_FILE is not set")
	}
	s, err := snapshot.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	benchTimeline(b, snapshot.Analyze(s, nil), 1)
}

func benchTimeline(b *testing.B, an *snapshot.Analysis, minEvents int) {
	a := newTestApp(b, 200, 60)
	src := loadedSource(99, an)
	a.timeline.setSource(&a.c, src)
	if a.timeline.tl == nil || len(a.timeline.tl.Events) < minEvents {
		b.Fatal("no timeline")
	}
	a.active = tabTimeline
	a.prepareActive()
	for _, c := range []struct {
		name string
		keys []string
	}{
		{"cursor", []string{"right"}},
		{"zoom-pan", []string{"+", ">", "<", "-"}},
		{"stages", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.keys == nil {
				press(a, "s")
				if _, ok := a.overlay.(*stagesOverlay); !ok {
					b.Fatal("no stages overlay")
				}
			}
			_ = a.timeline.view(&a.c)
			b.ResetTimer()
			for k := 0; k < b.N; k++ {
				if len(c.keys) > 0 {
					press(a, c.keys[k%len(c.keys)])
					_ = a.timeline.view(&a.c)
				} else {
					press(a, "down")
					_ = a.overlay.view(&a.c, a.w, a.bodyHeight())
				}
			}
			a.overlay = nil
			if a.timeline.src != src || a.timeline.tl == nil {
				b.Fatal("the timeline lost its source")
			}
		})
	}
	// With the allocator state shown, a key costs the UI goroutine only
	// the move and the frame; the replay to the new event (state-replay)
	// runs off it, in a tea.Cmd, once the cursor rests.
	press(a, "m")
	b.Run("state-mode-cursor", func(b *testing.B) {
		for k := 0; k < b.N; k++ {
			press(a, "right")
			_ = a.timeline.view(&a.c)
		}
	})
	press(a, "m")
	b.Run("state-replay", func(b *testing.B) {
		for k := 0; k < b.N; k++ {
			press(a, "right")
			_ = a.timeline.tl.StateAt(an.Snapshot, a.timeline.cursor)
		}
	})
	b.Logf("%d events, %d stages", len(a.timeline.tl.Events), len(an.Devices[0].Stages))
}

// BenchmarkScaleRanks draws the rank table of 128 and 1024 ranks (the
// figures are what a rank folder keeps once its snapshots are read).
func BenchmarkScaleRanks(b *testing.B) {
	for _, n := range []int{128, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var rows []snapshot.RankSummary
			for r := 0; r < n; r++ {
				rows = append(rows, snapshot.RankSummary{Path: fmt.Sprintf("/run/iteration_10/rank%d_memory_snapshot.pickle", r),
					Label: snapshot.Label{Rank: r, Step: 10}, Peak: int64(60+r%13) << 30, Reserved: 78 << 30, EfficiencyPct: 90,
					TopCategory: "Activation", TopCategoryBytes: 30 << 30})
			}
			a := newTestApp(b, 200, 60)
			src := &model.Source{ID: 99, Kind: model.KindRanks, Path: "/run", Paths: []string{"/run"}, State: model.Loaded, Ranks: rows, Generation: 1}
			a.snap.setSource(&a.c, src)
			a.active = tabSnapshot
			a.prepareActive()
			_ = a.snap.view(&a.c)
			b.ResetTimer()
			for k := 0; k < b.N; k++ {
				press(a, []string{"down", "s", "pgdown"}[k%3])
				_ = a.snap.view(&a.c)
			}
		})
	}
}

// BenchmarkScaleAnomalies1M is the cost the stage, leak and pending-free
// checks add to the analysis of a 1M-event trace (Replay is measured in
// snapshot's BenchmarkReplay1M).
func BenchmarkScaleAnomalies1M(b *testing.B) {
	s := syntheticTrace(1_000_000)
	tl := snapshot.Replay(s, 0, nil)
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		st := tl.Stages(s.Annotations)
		steps, _ := snapshot.StepsOf(st)
		_ = tl.LeakSuspects(steps)
		_ = tl.PendingFrees()
	}
}

// BenchmarkOpenFile is what a user waits for on MEMSCOPE_BENCH_FILE: from
// nothing to the Snapshot tab's first frame (decode, analysis, tree), then
// to the Timeline's (its bands and columns), then one key on each tab.
//
//	MEMSCOPE_BENCH_FILE=/tmp/bigtrain.pickle go test ./tui -run '^$' -bench OpenFile -benchtime 3x
func BenchmarkOpenFile(b *testing.B) {
	path := os.Getenv("MEMSCOPE_BENCH_FILE")
	if path == "" {
		b.Skip("MEMSCOPE_BENCH_FILE is not set")
	}
	var a *App
	b.Run("first-frame", func(b *testing.B) {
		for k := 0; k < b.N; k++ {
			a = newTestApp(b, 200, 60, path)
			if s := a.source(a.c.snapSel); s == nil || s.State != model.Loaded {
				b.Fatalf("not loaded: %v", s)
			}
			_ = a.render()
		}
	})
	b.Run("timeline-first-frame", func(b *testing.B) {
		for k := 0; k < b.N; k++ {
			a.timeline = newTimelineTab()
			for i, t := range a.tabs {
				if t.id() == tabTimeline {
					a.tabs[i] = a.timeline
				}
			}
			a.refresh()
			a.resize()
			press(a, "5")
			_ = a.render()
		}
	})
	for _, c := range []struct {
		tab  string
		keys []string
	}{
		{"2", []string{"down", "right", "down", "g", "g", "g"}},
		{"3", []string{"down", "down", "s", "S"}},
		{"5", []string{"right", "+", ">", "<", "-", "g", "g", "g"}},
	} {
		press(a, c.tab)
		b.Run("keys-tab"+c.tab, func(b *testing.B) {
			for k := 0; k < b.N; k++ {
				press(a, c.keys[k%len(c.keys)])
				_ = a.render()
			}
		})
	}
}
