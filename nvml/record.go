package nvml

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"memscope/trace"
)

// DefaultFlush is how often recordings are appended to unless told
// otherwise: the most a crash can lose.
const DefaultFlush = 3 * time.Second

// RecordOptions configure Record.
type RecordOptions struct {
	OutDir   string
	Interval time.Duration
	// Duration stops the recording after this long (0: until ctx is done).
	Duration time.Duration
	// Devices limits the GPUs recorded (nil: all).
	Devices []int
	// PIDs chooses the processes whose memory counts as allocated (nil:
	// every compute process on the GPU).
	PIDs []int
	// FlushEvery is how often new samples are appended to the files; 0
	// means DefaultFlush.
	FlushEvery time.Duration
	// Log receives progress lines (may be nil).
	Log io.Writer
	// Status, when set, gets a one-line status rewritten in place (GPUs,
	// samples, last flush): give it a terminal.
	Status io.Writer
	// MaxPending bounds the samples kept per GPU while writes fail
	// (default DefaultMaxPending); past it the oldest unwritten ones are
	// dropped, and the count is said at the end.
	MaxPending int
	// open opens a recording's file (tests play a full disk); nil opens it
	// on disk.
	open func(path string) (trace.AppendFile, error)
}

// DefaultMaxPending is about 14 hours of one GPU at 1 s (24 MB), or 40
// minutes at 50 ms, of samples kept while the disk refuses them.
const DefaultMaxPending = 1 << 20

// Record samples src into one memory_trace_rank{i}.json per GPU, in the
// Megatron format the Traces tab and `compare` read: reserved_memory_MB is
// the device's used memory, allocated_memory_MB the memory of the chosen
// processes, iteration "0" spans the recording and carries "source". A
// flusher beside the sampling loop appends the new samples every
// FlushEvery (trace.Appender: a flush costs what it adds, and the file is
// valid between flushes) and once more when ctx ends (SIGINT/SIGTERM), so
// a crash loses at most FlushEvery of samples. When writing fails the
// samples stay in memory (up to MaxPending per GPU) and the next flush
// tries again; nothing flushed is ever lost.
func Record(ctx context.Context, src Source, opt RecordOptions) error {
	if opt.Interval <= 0 {
		opt.Interval = time.Second
	}
	if opt.FlushEvery <= 0 {
		opt.FlushEvery = DefaultFlush
	}
	if err := os.MkdirAll(opt.OutDir, 0o755); err != nil {
		return err
	}
	devs := src.Devices()
	var chosen []Device
	for _, d := range devs {
		if opt.Devices == nil || slices.Contains(opt.Devices, d.Index) {
			chosen = append(chosen, d)
		}
	}
	if len(chosen) == 0 {
		return fmt.Errorf("no GPU to record (devices: %v)", indices(devs))
	}
	kind := "nvml"
	if src.Simulated() {
		kind = "fake"
	}
	path := func(d int) string { return filepath.Join(opt.OutDir, fmt.Sprintf("memory_trace_rank%d.json", d)) }
	open := opt.open
	if open == nil {
		open = func(p string) (trace.AppendFile, error) {
			return os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		}
	}
	logf := func(format string, args ...any) {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, format+"\n", args...)
		}
	}
	// pending holds each GPU's samples not yet in its file, with the
	// iteration's fields (total memory, the interval and the GPU's name go
	// in the file, so a replay shows the real GPU size and plays at the
	// recorded pace). The sampling loop adds; the flusher takes.
	var mu sync.Mutex
	pending := map[int]*trace.Iteration{}
	files := map[int]*trace.Appender{}
	for _, d := range chosen {
		it := &trace.Iteration{Key: "0", Num: 0, PeakAllocated: trace.Unset, Static: trace.Unset, Theoretical: trace.Unset,
			Source: kind, IntervalS: opt.Interval.Seconds(), DeviceName: d.Name}
		pending[d.Index] = it
		f, err := open(path(d.Index))
		if err != nil {
			return err
		}
		// A full disk at the start is no reason to stop: the flusher
		// writes the opening with the first samples it can.
		a, _ := trace.NewAppender(f, it)
		defer a.Close()
		files[d.Index] = a
	}
	maxPending := opt.MaxPending
	if maxPending <= 0 {
		maxPending = DefaultMaxPending
	}
	var lost int64 // samples dropped while the disk refused them
	failing := false
	// flush appends what each GPU gained since the last flush. A GPU whose
	// write fails keeps its samples for the next try; the first failure of
	// a streak and the recovery are said on the log.
	flush := func() error {
		var firstErr error
		for _, d := range chosen {
			mu.Lock()
			it := pending[d.Index]
			batch := *it
			it.T, it.Reserved, it.Allocated = nil, nil, nil
			mu.Unlock()
			if err := files[d.Index].Append(&batch); err != nil {
				mu.Lock()
				it.T = append(batch.T, it.T...)
				it.Reserved = append(batch.Reserved, it.Reserved...)
				it.Allocated = append(batch.Allocated, it.Allocated...)
				if drop := len(it.T) - maxPending; drop > 0 {
					it.T, it.Reserved, it.Allocated = it.T[drop:], it.Reserved[drop:], it.Allocated[drop:]
					atomic.AddInt64(&lost, int64(drop))
				}
				mu.Unlock()
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: %w", path(d.Index), err)
				}
			}
		}
		switch {
		case firstErr != nil && !failing:
			failing = true
			logf("writing failed (samples stay in memory, retrying every %v): %v", opt.FlushEvery, firstErr)
		case firstErr == nil && failing:
			failing = false
			logf("writing works again: every kept sample is in the files")
		}
		return firstErr
	}
	logf("recording %d GPU(s) from %s every %v into %s (Ctrl-C stops)", len(chosen), src.Name(), opt.Interval, opt.OutDir)
	start := time.Now()
	var lastFlush atomic.Int64 // unix nanoseconds of the last successful flush
	lastFlush.Store(start.UnixNano())
	// The flusher writes beside the sampling loop, which never waits on
	// the disk.
	stopFlush := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		t := time.NewTicker(opt.FlushEvery)
		defer t.Stop()
		for {
			select {
			case <-stopFlush:
				return
			case <-t.C:
				if flush() == nil {
					lastFlush.Store(time.Now().UnixNano())
				}
			}
		}
	}()
	// finish stops the flusher and writes what is left.
	finish := func() error {
		close(stopFlush)
		<-flushed
		err := flush()
		if n := atomic.LoadInt64(&lost); n > 0 {
			logf("%d samples were dropped while the disk refused them (more than %d kept per GPU)", n, maxPending)
		}
		if err != nil {
			mu.Lock()
			left := 0
			for _, it := range pending {
				left += len(it.T)
			}
			mu.Unlock()
			return fmt.Errorf("%w (%d samples could not be written)", err, left)
		}
		return nil
	}
	tick := time.NewTicker(opt.Interval)
	defer tick.Stop()
	var deadline <-chan time.Time
	if opt.Duration > 0 {
		t := time.NewTimer(opt.Duration)
		defer t.Stop()
		deadline = t.C
	}
	errs, samplesTaken := 0, 0
	status := func(final bool) {
		if opt.Status == nil {
			return
		}
		last := time.Since(time.Unix(0, lastFlush.Load())).Truncate(time.Second)
		line := fmt.Sprintf("\rrecording %d GPU(s) · %d samples · %s · last flush %s ago · %d sampling errors",
			len(chosen), samplesTaken, time.Since(start).Truncate(time.Second), last, errs)
		if final {
			line = fmt.Sprintf("\rrecorded %d GPU(s) · %d samples over %s into %s", len(chosen), samplesTaken,
				time.Since(start).Truncate(time.Second), opt.OutDir)
		}
		fmt.Fprintf(opt.Status, "%-100s", line)
		if final {
			fmt.Fprintln(opt.Status)
		}
	}
	defer status(true)
	lastStatus := time.Time{}
	peaks := map[int]float64{}
	for {
		samples, err := src.Sample(ctx)
		if err != nil && ctx.Err() == nil {
			errs++
			logf("sampling failed (will retry): %v", err)
		}
		mu.Lock()
		for _, s := range samples {
			it := pending[s.Device]
			if it == nil || s.Err != nil {
				continue
			}
			var alloc int64
			for _, p := range s.Processes {
				if p.Used > 0 && (opt.PIDs == nil || slices.Contains(opt.PIDs, p.PID)) {
					alloc += p.Used
				}
			}
			if it.TotalMemory <= 0 && s.Total > 0 {
				it.TotalMemory = float64(s.Total) / (1 << 20)
			}
			a := float64(alloc) / (1 << 20)
			if p, ok := peaks[s.Device]; !ok || a > p {
				peaks[s.Device] = a
				it.PeakAllocated = a
			}
			if len(it.T) >= maxPending {
				// The disk has refused samples for long: keep the newest.
				it.T, it.Reserved, it.Allocated = it.T[1:], it.Reserved[1:], it.Allocated[1:]
				atomic.AddInt64(&lost, 1)
			}
			it.T = append(it.T, s.Time.Sub(start).Seconds())
			it.Reserved = append(it.Reserved, float64(s.Used)/(1<<20))
			it.Allocated = append(it.Allocated, a)
		}
		mu.Unlock()
		if len(samples) > 0 {
			samplesTaken++
		}
		if time.Since(lastStatus) >= time.Second {
			status(false)
			lastStatus = time.Now()
		}
		select {
		case <-ctx.Done():
			logf("stopping: writing the final samples")
			return finish()
		case <-deadline:
			return finish()
		case <-tick.C:
		}
	}
}

func indices(ds []Device) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = d.Index
	}
	return out
}
