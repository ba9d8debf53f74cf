package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"memscope/snapshot"
)

// rankDir lays out a torchtitan dump: iteration_N/rankR_memory_snapshot.pickle
// for two iterations of four ranks, each rank a different real snapshot.
func rankDir(t *testing.T) (string, []string) {
	t.Helper()
	srcs := []string{
		"../testdata/snapshots/silmont2000_assignment2-systems__mem_snapshot.pickle",
		"../testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle",
		"../testdata/snapshots/h200/train.pickle",
		"../testdata/snapshots/h200/record_stream.pickle",
	}
	dir := t.TempDir()
	var paths []string
	for _, it := range []int{10, 20} {
		for r, src := range srcs {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "memory_snapshot", fmt.Sprintf("iteration_%d", it), fmt.Sprintf("rank%d_memory_snapshot.pickle", r))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	return dir, paths
}

// TestRankFolderOpensAsOneSource: the folder becomes one rank overview whose
// rows carry each file's own peak, reserved and category at its peak.
func TestRankFolderOpensAsOneSource(t *testing.T) {
	dir, _ := rankDir(t)
	// A broken rank: named like one, not a snapshot.
	bad := filepath.Join(dir, "memory_snapshot", "iteration_20", "rank4_memory_snapshot.pickle")
	if err := os.WriteFile(bad, []byte("\x80\x04truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := New(context.Background(), nil)
	ws.Open(dir)
	ws.Wait()
	srcs := ws.Sources()
	if len(srcs) != 1 || srcs[0].Kind != KindRanks || srcs[0].State != Loaded {
		t.Fatalf("sources: %v", srcs)
	}
	rows := srcs[0].Ranks
	if len(rows) != 9 || srcs[0].ErrorCount() != 1 {
		t.Fatalf("%d rows, %d errors", len(rows), srcs[0].ErrorCount())
	}
	for i, r := range rows {
		if r.Path == bad {
			if r.Err == nil || r.Label.Rank != 4 {
				t.Errorf("broken rank: %+v", r)
			}
			continue
		}
		s, err := snapshot.Open(context.Background(), r.Path)
		if err != nil {
			t.Fatal(err)
		}
		a := snapshot.Analyze(s, nil)
		var peak int64
		for _, d := range a.Devices {
			peak = max(peak, d.Peak.Active)
		}
		if r.Err != nil || r.Peak != peak || r.Label.Step != []int{10, 10, 10, 10, 20, 20, 20, 20, 20}[i] {
			t.Errorf("row %d %s: %+v, want peak %d", i, r.Path, r, peak)
		}
	}

	// Opening one rank adds it once.
	id := ws.OpenSnapshot(rows[2].Path)
	if ws.OpenSnapshot(rows[2].Path) != id {
		t.Error("a rank opened twice became two sources")
	}
	ws.Wait()
	if s := ws.Source(id); s.State != Loaded || s.Analysis == nil {
		t.Errorf("opened rank: %v", s)
	}
}

// TestRankBudget: files load in parallel only while their footprints fit
// in the budget; a file larger than the whole budget loads alone.
func TestRankBudget(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := 0; i < 8; i++ {
		p := filepath.Join(dir, fmt.Sprintf("rank%d.pickle", i))
		if err := os.WriteFile(p, make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	fp := footprint(paths[0], 1000)
	for _, c := range []struct {
		limit int64
		want  int
	}{{fp - 1, 1}, {fp, 1}, {2*fp - 1, 1}, {2 * fp, 2}, {4 * fp, 4}, {100 * fp, 4}} {
		var cur, peak atomic.Int32
		var mu sync.Mutex
		rows := SummarizeRanks(context.Background(), paths, c.limit, 4, func(ctx context.Context, path string) snapshot.RankSummary {
			n := cur.Add(1)
			mu.Lock()
			peak.Store(max(peak.Load(), n))
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			cur.Add(-1)
			return snapshot.RankSummary{Peak: 1}
		}, nil)
		if int(peak.Load()) != c.want || len(rows) != 8 || rows[7].Label.Rank != 7 {
			t.Errorf("budget %d (footprint %d): %d at once, want %d", c.limit, fp, peak.Load(), c.want)
		}
	}
}

// A cancelled load stops waiting for the budget and says so per file.
func TestRankBudgetCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := newBudget(10)
	if _, err := b.acquire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := b.acquire(ctx, 5); err == nil {
		t.Error("acquire returned without budget after cancel")
	}
}
