package model

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestLoadEachKind: Load gives each kind of input its data, and its
// errors name the file.
func TestLoadEachKind(t *testing.T) {
	ctx := context.Background()
	snap := "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle"
	est := "../testdata/estimates/WRITER_tiny_gpt_cpu_peak_snapshot.json"
	real, sim := "../testdata/traces/megatron_trace_memory/real", "../testdata/traces/megatron_trace_memory/sim"
	var phases []string
	res, err := Load(ctx, KindSnapshot, []string{snap}, nil, func(phase string, _ float64) { phases = append(phases, phase) })
	if err != nil || res.Analysis == nil || len(res.Analysis.Devices) == 0 {
		t.Fatalf("snapshot: %v", err)
	}
	if got := strings.Join(phases, ","); !strings.HasPrefix(got, "decoding") || !strings.Contains(got, "analysing") {
		t.Errorf("snapshot phases %q", got)
	}
	if res, err := Load(ctx, KindEstimate, []string{est}, nil, nil); err != nil || res.Estimate == nil {
		t.Errorf("estimate: %v", err)
	}
	if res, err := Load(ctx, KindTraceRun, []string{real}, nil, nil); err != nil || res.Real == nil || len(res.Real.Ranks) == 0 {
		t.Errorf("trace run: %v", err)
	}
	res, err = Load(ctx, KindTraceCompare, []string{real, sim}, nil, nil)
	if err != nil || res.Comparison == nil || len(res.Comparison.Ranks) == 0 {
		t.Errorf("comparison: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "cut.pickle")
	data, _ := os.ReadFile(snap)
	os.WriteFile(bad, data[:len(data)/2], 0o644)
	for _, c := range []struct {
		kind  SourceKind
		paths []string
		want  string
	}{
		{KindSnapshot, []string{bad}, "cut.pickle"},
		{KindTraceCompare, []string{real}, "takes 2 paths"},
		{KindLive, []string{real}, "nothing to load"},
		{KindEstimate, []string{"/nonexistent/peak.json"}, "/nonexistent/peak.json"},
	} {
		if _, err := Load(ctx, c.kind, c.paths, nil, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want an error saying %q", c.kind, c.paths, err, c.want)
		}
	}
}

// TestLoadAll: results come back in order, a failure stays with its job,
// and the budget bounds what loads at once: inputs each larger than the
// budget load one at a time, small ones side by side.
func TestLoadAll(t *testing.T) {
	snaps, _ := filepath.Glob("../testdata/snapshots/*.pickle")
	if len(snaps) < 4 {
		t.Fatalf("%d snapshots", len(snaps))
	}
	var jobs []Job
	for _, p := range snaps {
		jobs = append(jobs, Job{Kind: KindSnapshot, Paths: []string{p}})
	}
	jobs = append(jobs, Job{Kind: KindSnapshot, Paths: []string{"/nonexistent.pickle"}})
	var smallest int64 = 1 << 62
	for _, p := range snaps {
		st, _ := os.Stat(p)
		smallest = min(smallest, footprint(p, st.Size()))
	}
	for _, c := range []struct {
		name     string
		budget   int64
		workers  int
		maxAtOne int
	}{
		{"each input above the budget", smallest - 1, 4, 1},
		{"room for all", 1 << 40, 4, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			running, most := map[int]bool{}, 0
			res := LoadAll(context.Background(), jobs, LoadOptions{Workers: c.workers, Budget: c.budget,
				Progress: func(j int, phase string, _ float64) {
					mu.Lock()
					defer mu.Unlock()
					running[j] = phase != "done"
					n := 0
					for _, r := range running {
						if r {
							n++
						}
					}
					most = max(most, n)
				}})
			for i, r := range res[:len(snaps)] {
				if r.Err != nil || r.Analysis == nil || len(r.Analysis.Devices) == 0 {
					t.Errorf("%s: %v", snaps[i], r.Err)
				}
			}
			if last := res[len(snaps)]; last.Err == nil || !strings.Contains(last.Err.Error(), "nonexistent") {
				t.Errorf("the missing file: %v", last.Err)
			}
			if most > c.maxAtOne {
				t.Errorf("%d inputs loaded at once, want at most %d", most, c.maxAtOne)
			}
		})
	}
}

// TestLoadAllDone: Done gets each job's result once, as the job ends (the
// job's progress is over by then), and what it leaves in the result is
// what LoadAll returns.
func TestLoadAllDone(t *testing.T) {
	snaps, _ := filepath.Glob("../testdata/snapshots/*.pickle")
	jobs := []Job{{Kind: KindSnapshot, Paths: []string{"/nonexistent.pickle"}}}
	for _, p := range snaps {
		jobs = append(jobs, Job{Kind: KindSnapshot, Paths: []string{p}})
	}
	var mu sync.Mutex
	ended, done := map[int]bool{}, map[int]int{}
	res := LoadAll(context.Background(), jobs, LoadOptions{Workers: 3,
		Progress: func(j int, phase string, _ float64) {
			if phase == "done" {
				mu.Lock()
				ended[j] = true
				mu.Unlock()
			}
		},
		Done: func(j int, r *Result) {
			mu.Lock()
			defer mu.Unlock()
			if !ended[j] {
				t.Errorf("job %d: Done before its progress ended", j)
			}
			if (r.Err == nil) != (j > 0) || r.Err == nil && r.Analysis == nil {
				t.Errorf("job %d: Done got %v, %v", j, r.Analysis != nil, r.Err)
			}
			done[j]++
			if j%2 == 1 {
				*r = Result{} // dropped, as report does
			}
		}})
	for j := range jobs {
		if done[j] != 1 {
			t.Errorf("job %d: Done called %d times", j, done[j])
		}
		if dropped := j%2 == 1; j > 0 && (res[j].Analysis == nil) != dropped {
			t.Errorf("job %d: returned analysis %v, dropped by Done %v", j, res[j].Analysis != nil, dropped)
		}
	}
}
