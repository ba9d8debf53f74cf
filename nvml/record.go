package nvml

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"memscope/trace"
)

// DefaultFlush is how often recordings are rewritten unless told
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
	// FlushEvery is how often the files are rewritten (atomically); 0 means
	// DefaultFlush.
	FlushEvery time.Duration
	// Log receives progress lines (may be nil).
	Log io.Writer
	// Status, when set, gets a one-line status rewritten in place (GPUs,
	// samples, last flush): give it a terminal.
	Status io.Writer
}

// Record samples src into one memory_trace_rank{i}.json per GPU, in the
// Megatron format the Traces tab and `compare` read: reserved_memory_MB is
// the device's used memory, allocated_memory_MB the memory of the chosen
// processes, iteration "0" spans the recording and carries "source". Files
// are flushed atomically every FlushEvery and once more when ctx ends
// (SIGINT/SIGTERM), so a crash loses at most FlushEvery of samples.
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
	its := map[int]*trace.Iteration{}
	for _, d := range chosen {
		// Total memory, the interval and the GPU's name go in the file, so
		// a replay shows the real GPU size and plays at the recorded pace.
		its[d.Index] = &trace.Iteration{Key: "0", Num: 0, PeakAllocated: trace.Unset, Static: trace.Unset, Theoretical: trace.Unset,
			Source: kind, IntervalS: opt.Interval.Seconds(), DeviceName: d.Name}
	}
	path := func(d int) string { return filepath.Join(opt.OutDir, fmt.Sprintf("memory_trace_rank%d.json", d)) }
	flush := func() error {
		for _, d := range chosen {
			it := its[d.Index]
			peak := trace.Max(it.Allocated)
			if peak == peak { // not NaN
				it.PeakAllocated = peak
			}
			if err := trace.WriteMegatron(path(d.Index), []trace.Iteration{*it}); err != nil {
				return err
			}
		}
		return nil
	}
	logf := func(format string, args ...any) {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, format+"\n", args...)
		}
	}
	logf("recording %d GPU(s) from %s every %v into %s (Ctrl-C stops)", len(chosen), src.Name(), opt.Interval, opt.OutDir)
	start := time.Now()
	tick := time.NewTicker(opt.Interval)
	defer tick.Stop()
	lastFlush := start
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
		line := fmt.Sprintf("\rrecording %d GPU(s) · %d samples · %s · last flush %s ago · %d sampling errors",
			len(chosen), samplesTaken, time.Since(start).Truncate(time.Second), time.Since(lastFlush).Truncate(time.Second), errs)
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
	for {
		samples, err := src.Sample(ctx)
		if err != nil && ctx.Err() == nil {
			errs++
			logf("sampling failed (will retry): %v", err)
		}
		for _, s := range samples {
			it := its[s.Device]
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
			it.T = append(it.T, s.Time.Sub(start).Seconds())
			it.Reserved = append(it.Reserved, float64(s.Used)/(1<<20))
			it.Allocated = append(it.Allocated, float64(alloc)/(1<<20))
		}
		if len(samples) > 0 {
			samplesTaken++
		}
		if time.Since(lastFlush) >= opt.FlushEvery {
			if err := flush(); err != nil {
				return err
			}
			lastFlush = time.Now()
		}
		if time.Since(lastStatus) >= time.Second {
			status(false)
			lastStatus = time.Now()
		}
		select {
		case <-ctx.Done():
			logf("stopping: writing the final files")
			return flush()
		case <-deadline:
			return flush()
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
