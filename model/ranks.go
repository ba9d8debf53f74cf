package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"memscope/snapshot"
)

// DefaultRankBudget is the memory the rank overview lets decoded snapshots
// take at once: files load in parallel while their estimated footprints fit
// in it, and one at a time beyond.
const DefaultRankBudget int64 = 4 << 30

// footprint estimates the memory a snapshot file takes while it is decoded
// and analysed: the file's bytes, the compact decoded form and the
// analysis (about three times a pickle's size; gzip first inflates about
// eight times).
func footprint(path string, size int64) int64 {
	f := 3 * size
	if strings.HasSuffix(strings.ToLower(path), ".gz") {
		f *= 8
	}
	return max(f, 1)
}

// budget is a weighted semaphore over bytes. A request larger than the
// whole budget waits for everything else to finish and then runs alone.
type budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	free int64
	size int64
}

func newBudget(n int64) *budget {
	b := &budget{free: n, size: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *budget) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(n, b.size)
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		b.cond.Wait()
	}
	b.free -= n
	return n, nil
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// SummarizeRanks reads every file and keeps its summary only: the
// snapshots are decoded in parallel (workers at a time, 0: one per CPU),
// while their estimated footprints fit in limit bytes. summarize reads one
// file (nil: decode and analyse it with cat's rules). Failures become rows
// with Err set; progress hears the fraction of files done.
func SummarizeRanks(ctx context.Context, paths []string, limit int64, workers int,
	summarize func(ctx context.Context, path string) snapshot.RankSummary, progress func(float64)) []snapshot.RankSummary {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if limit <= 0 {
		limit = DefaultRankBudget
	}
	b := newBudget(limit)
	out := make([]snapshot.RankSummary, len(paths))
	var done atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(1, len(paths))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i] = summarizeOne(ctx, paths[i], b, summarize)
				if progress != nil {
					progress(float64(done.Add(1)) / float64(len(paths)))
				}
			}
		}()
	}
	for i := range paths {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

func summarizeOne(ctx context.Context, path string, b *budget,
	summarize func(ctx context.Context, path string) snapshot.RankSummary) (r snapshot.RankSummary) {
	fail := func(err error) snapshot.RankSummary {
		return snapshot.RankSummary{Path: path, Label: snapshot.ParseLabel(path), Device: -1, Err: err}
	}
	st, err := os.Stat(path)
	if err != nil {
		return fail(err)
	}
	n, err := b.acquire(ctx, footprint(path, st.Size()))
	if err != nil {
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	defer b.release(n)
	defer func() {
		if v := recover(); v != nil {
			r = fail(fmt.Errorf("%s: internal error while summarising: %v", path, v))
		}
	}()
	r = summarize(ctx, path)
	r.Path, r.Label = path, snapshot.ParseLabel(path)
	return r
}

// summarizeSnapshot decodes and analyses one snapshot and keeps its row.
func summarizeSnapshot(rules []snapshot.Rule) func(ctx context.Context, path string) snapshot.RankSummary {
	return func(ctx context.Context, path string) snapshot.RankSummary {
		res, err := Load(ctx, KindSnapshot, []string{path}, snapshot.NewCategorizer(rules), nil)
		if err != nil {
			return snapshot.RankSummary{Err: err, Device: -1}
		}
		return snapshot.Summarize(path, res.Analysis)
	}
}

// RankFiles finds the per-rank snapshots of a folder, or nil when it is
// not a rank set (see snapshot.IsRankSet). report and the explorer both
// ask it.
func RankFiles(dir string) []string {
	found, err := snapshot.Discover(dir)
	if err != nil || !snapshot.IsRankSet(found) {
		return nil
	}
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = filepath.Clean(f.Path)
	}
	return out
}
