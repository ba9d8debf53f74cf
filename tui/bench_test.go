package tui

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"memscope/trace"
)

// Benchmarks of one frame (App.render, what View draws) with large data:
// 1024 ranks of traces and a snapshot of 100k blocks with a 200k-event
// trace, at 200x60. The inputs are generated in Go in a temp directory.
//
//	go test ./tui -run '^$' -bench View -benchtime 20x

func writeRanks(b *testing.B, dir string, n int) {
	for _, side := range []string{"real", "sim"} {
		d := filepath.Join(dir, side)
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for r := 0; r < n; r++ {
			it := trace.Iteration{Key: "0", PeakAllocated: trace.Unset, Static: 1000, Theoretical: trace.Unset}
			for i := 0; i < 400; i++ {
				u := float64(i) / 399
				it.T = append(it.T, u)
				v := 20000 + 30000*math.Sin(math.Pi*u) + float64(r%17)*100
				if side == "sim" {
					v *= 0.98
				}
				it.Allocated = append(it.Allocated, v)
				it.Reserved = append(it.Reserved, 70000)
			}
			if err := trace.WriteMegatron(filepath.Join(d, fmt.Sprintf("memory_trace_rank%d.json", r)), []trace.Iteration{it}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// writeSnapshotJSON writes a snapshot in the JSON form with nBlocks active
// blocks over a few hundred stacks and a trace of 2*nBlocks events.
func writeSnapshotJSON(b *testing.B, path string, nBlocks int) {
	type frame struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
		Name     string `json:"name"`
	}
	stacks := make([][]frame, 300)
	for i := range stacks {
		for d := 0; d < 12; d++ {
			stacks[i] = append(stacks[i], frame{fmt.Sprintf("/w/model/layer%d.py", (i+d)%40), 10 + d, []string{"forward", "attention", "mlp", "backward"}[(i+d)%4]})
		}
	}
	var blocks []map[string]any
	var events []map[string]any
	addr := int64(1 << 40)
	for i := 0; i < nBlocks; i++ {
		size := int64(512 * (1 + i%4096))
		blocks = append(blocks, map[string]any{"address": addr, "size": size, "requested_size": size - 100, "state": "active_allocated", "frames": stacks[i%len(stacks)]})
		events = append(events, map[string]any{"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": 1000 + i, "frames": stacks[i%len(stacks)]})
		if i%2 == 1 {
			events = append(events, map[string]any{"action": "free_requested", "addr": addr + 1, "size": 512, "stream": 0, "time_us": 1000 + i})
		}
		addr += size
	}
	total := addr - (1 << 40)
	snap := map[string]any{
		"segments":      []map[string]any{{"device": 0, "address": int64(1 << 40), "total_size": total, "stream": 0, "segment_type": "large", "blocks": blocks}},
		"device_traces": [][]map[string]any{events},
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := json.NewEncoder(f).Encode(snap); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkView(b *testing.B) {
	dir := b.TempDir()
	writeRanks(b, filepath.Join(dir, "runs"), 1024)
	writeSnapshotJSON(b, filepath.Join(dir, "big.json"), 100000)
	a := newTestApp(b, 200, 60, filepath.Join(dir, "runs"), filepath.Join(dir, "big.json"))
	if len(a.traces.rows) != 1024 {
		b.Fatalf("%d ranks", len(a.traces.rows))
	}
	if d := a.snap.dev(); d == nil || len(d.Allocations) != 100000 {
		b.Fatalf("snapshot not loaded: %v", a.source(a.c.snapSel))
	}
	for _, t := range a.tabs {
		b.Run(t.name(), func(b *testing.B) {
			a.active = t.id()
			a.prepareActive()
			a.render() // first frame builds caches (trees, sparklines, replay)
			b.ResetTimer()
			for k := 0; k < b.N; k++ {
				if t.id() == tabTimeline {
					press(a, "right") // the cursor moves every frame
				}
				_ = a.render()
			}
		})
	}
	b.Run("Traces-heatmap", func(b *testing.B) {
		a.active = tabTraces
		a.prepareActive()
		press(a, "h")
		a.render()
		b.ResetTimer()
		for k := 0; k < b.N; k++ {
			_ = a.render()
		}
		press(a, "h")
	})
	b.Run("Timeline-zoom-pan", func(b *testing.B) {
		// Every frame a new window: the stacked bands are swept again.
		a.active = tabTimeline
		a.prepareActive()
		a.render()
		keys := []string{"+", ">", "<", "-"}
		b.ResetTimer()
		for k := 0; k < b.N; k++ {
			press(a, keys[k%len(keys)])
			_ = a.render()
		}
	})
	b.Run("Timeline-allocator-state", func(b *testing.B) {
		a.active = tabTimeline
		a.prepareActive()
		press(a, "m")
		a.render()
		b.ResetTimer()
		for k := 0; k < b.N; k++ {
			press(a, "right")
			_ = a.render()
		}
		press(a, "m")
	})
	b.Run("Snapshot-segment-map", func(b *testing.B) {
		a.active = tabSnapshot
		a.prepareActive()
		press(a, "m")
		a.render()
		b.ResetTimer()
		for k := 0; k < b.N; k++ {
			_ = a.render()
		}
		press(a, "m")
	})
}
