package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"memscope/snapshot"
	"memscope/snapshot/estimate"
	"memscope/trace"
)

// Data is what loading one input gave: the analysis of an allocator
// snapshot or an estimate, or the traces of a run or of a real and a
// simulated run with their comparison.
type Data struct {
	Analysis   *snapshot.Analysis
	Estimate   *estimate.Analysis
	Real, Sim  *trace.Set
	Comparison *trace.Comparison
	Warnings   []string
}

// Progress hears the phase of a load ("decoding", "analysing", "reading")
// and the fraction of the input done.
type Progress func(phase string, frac float64)

// Load opens and analyses one input: the one place memscope does, for
// report, diff, compare and the explorer alike. paths holds one path, two
// (real, simulated) for KindTraceCompare. cat categorises (nil: the
// default rules); progress may be nil. A panic in a decoder or in the
// analysis becomes an error naming the file: one bad input never ends the
// program.
func Load(ctx context.Context, kind SourceKind, paths []string, cat *snapshot.Categorizer, progress Progress) (res Data, err error) {
	if progress == nil {
		progress = func(string, float64) {}
	}
	if cat == nil {
		cat = snapshot.NewCategorizer(nil)
	}
	want := 1
	if kind == KindTraceCompare {
		want = 2
	}
	if len(paths) != want {
		return res, fmt.Errorf("a %s source takes %d paths, not %d", kind, want, len(paths))
	}
	defer func() {
		if v := recover(); v != nil {
			res, err = Data{}, fmt.Errorf("%s: internal error while loading: %v", paths[0], v)
		}
	}()
	switch kind {
	case KindSnapshot:
		progress("decoding", 0)
		s, err := snapshot.OpenProgress(ctx, paths[0], func(f float64) { progress("decoding", f) })
		if err != nil {
			return res, err
		}
		progress("analysing", 1)
		res.Analysis, res.Warnings = snapshot.Analyze(s, cat), s.Warnings
	case KindEstimate:
		progress("reading", 0)
		e, err := estimate.Open(ctx, paths[0])
		if err != nil {
			return res, err
		}
		progress("analysing", 1)
		res.Estimate = estimate.Analyze(e, cat)
	case KindTraceRun:
		progress("reading", 0)
		set, err := trace.LoadPath(ctx, paths[0])
		if err != nil {
			return res, err
		}
		if len(set.Ranks) == 0 {
			return res, fmt.Errorf("%s: no trace could be read (%d files failed)", paths[0], len(set.Errors))
		}
		res.Real, res.Warnings = set, rankWarnings(set)
	case KindTraceCompare:
		progress("reading", 0)
		real, err := trace.LoadPath(ctx, paths[0])
		if err != nil {
			return res, fmt.Errorf("real run: %w", err)
		}
		progress("reading", 0.5)
		sim, err := trace.LoadPath(ctx, paths[1])
		if err != nil {
			return res, fmt.Errorf("simulated run: %w", err)
		}
		res.Real, res.Sim = real, sim
		res.Comparison = trace.Compare(real, sim, -1, nil)
		res.Warnings = append(rankWarnings(real), rankWarnings(sim)...)
	default:
		return res, fmt.Errorf("%s: nothing to load for a %s source", paths[0], kind)
	}
	return res, nil
}

func rankWarnings(s *trace.Set) []string {
	var out []string
	for _, r := range s.Ranks {
		for _, w := range r.Warnings {
			out = append(out, filepath.Base(r.Path)+": "+w)
		}
	}
	return out
}

// Job is one input of LoadAll.
type Job struct {
	Kind  SourceKind
	Paths []string
}

// Result is what LoadAll gave for one job.
type Result struct {
	Data
	Err error
}

// LoadOptions tune LoadAll.
type LoadOptions struct {
	// Workers is how many inputs load at once (0: 2, as two pickle
	// machines already share a large file).
	Workers int
	// Budget bounds the estimated memory of the inputs loading at once
	// (a snapshot's file size times 3, a .gz's times 24; 0:
	// DefaultRankBudget). An input larger than the whole budget waits
	// for the others and loads alone.
	Budget int64
	// Rules are the user's category rules, tried before the defaults.
	Rules []snapshot.Rule
	// Progress hears each job's phase and fraction done, then "done"
	// when the job ends, loaded or failed (nil: nothing).
	Progress func(job int, phase string, frac float64)
	// Done, when set, gets each job's result as the job ends, on the
	// goroutine that loaded it, and may change what it holds before
	// LoadAll keeps it (report keeps a rendered file instead of its
	// analysis).
	Done func(job int, res *Result)
}

// LoadAll loads every job, Workers at a time within the memory budget,
// and returns their results in order. A job that fails (or panics) is an
// error in its result; the others load all the same. Cancelling ctx stops
// the jobs not started and the decoders of those running.
func LoadAll(ctx context.Context, jobs []Job, opt LoadOptions) []Result {
	workers := opt.Workers
	if workers <= 0 {
		workers = 2
	}
	workers = min(workers, runtime.GOMAXPROCS(0)*2, max(1, len(jobs)))
	limit := opt.Budget
	if limit <= 0 {
		limit = DefaultRankBudget
	}
	b := newBudget(limit)
	out := make([]Result, len(jobs))
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Categorizers cache per stack and are not safe for
			// concurrent use: one per worker.
			cat := snapshot.NewCategorizer(opt.Rules)
			for i := range work {
				res := loadJob(ctx, i, jobs[i], b, cat, opt.Progress)
				if opt.Done != nil {
					opt.Done(i, &res)
				}
				out[i] = res
			}
		}()
	}
	for i := range jobs {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

func loadJob(ctx context.Context, i int, j Job, b *budget, cat *snapshot.Categorizer, progress func(int, string, float64)) Result {
	if len(j.Paths) == 0 {
		return Result{Err: fmt.Errorf("job %d has no path", i)}
	}
	var need int64
	for _, p := range j.Paths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			need += footprint(p, st.Size())
		}
	}
	n, err := b.acquire(ctx, max(need, 1))
	if err != nil {
		return Result{Err: fmt.Errorf("%s: %w", j.Paths[0], err)}
	}
	defer b.release(n)
	var p Progress
	if progress != nil {
		p = func(phase string, frac float64) { progress(i, phase, frac) }
	}
	res, err := Load(ctx, j.Kind, j.Paths, cat, p)
	if progress != nil {
		progress(i, "done", 1) // failed or not: the bar counts the file read
	}
	return Result{Data: res, Err: err}
}
