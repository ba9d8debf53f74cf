// Package nvml is memscope's live GPU data: a small source interface with
// three implementations (NVML through go-nvml, a simulated fake for demos
// and tests, and the playback of a recording), a sampler that keeps a ring
// of history off the UI goroutine, and the recorder behind `memscope
// record`.
package nvml

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"
)

// Device describes one GPU (or MIG instance).
type Device struct {
	Index int
	UUID  string
	Name  string
	// Parent is the index of the physical GPU of a MIG instance, else -1.
	Parent int
	// MIG names the instance profile ("3g.40gb") of a MIG device.
	MIG string
}

// Process is a compute process on a GPU.
type Process struct {
	PID     int
	GPU     int
	Used    int64 // bytes; -1 when NVML does not say
	User    string
	Command string
	// Visible is false when the PID does not exist in this PID namespace
	// (NVML reports host PIDs; inside a container they may not exist).
	Visible bool
}

// NA marks a figure a device does not support (ERROR_NOT_SUPPORTED).
var NA = math.NaN()

// Sample is one reading of one device. Figures a device does not support
// are NaN (shown as n/a), never an error.
type Sample struct {
	Time   time.Time
	Device int
	// Memory in bytes: Used by all processes, Reserved by the driver, Total.
	Used, Reserved, Total int64
	// MemV1 is set when GetMemoryInfo_v2 was unavailable and the v1 call
	// (without a reserved figure) was used.
	MemV1       bool
	UtilGPU     float64 // percent
	UtilMem     float64 // percent
	TempC       float64
	PowerW      float64
	PowerLimitW float64
	SMClockMHz  float64
	Processes   []Process
	// Err is set when this device could not be read (it disappeared).
	Err error
}

// Source is where live GPU samples come from.
type Source interface {
	// Name says what the source is ("NVML, driver 550.54.15", "simulated").
	Name() string
	// Simulated is true for sources that are not real hardware.
	Simulated() bool
	Devices() []Device
	// Sample reads every device once.
	Sample(ctx context.Context) ([]Sample, error)
	Close() error
}

// Ring is a fixed-capacity history of one device's samples.
type Ring struct {
	buf   []Sample
	start int
	n     int
}

// NewRing returns a ring holding up to capacity samples.
func NewRing(capacity int) *Ring { return &Ring{buf: make([]Sample, max(1, capacity))} }

// Push adds a sample, dropping the oldest when full.
func (r *Ring) Push(s Sample) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = s
		r.n++
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % len(r.buf)
}

// Len is the number of samples held.
func (r *Ring) Len() int { return r.n }

// At returns the i-th oldest sample.
func (r *Ring) At(i int) Sample { return r.buf[(r.start+i)%len(r.buf)] }

// Slice copies the samples, oldest first.
func (r *Ring) Slice() []Sample {
	out := make([]Sample, r.n)
	for i := range out {
		out[i] = r.At(i)
	}
	return out
}

// State is what the sampler knows now.
type State struct {
	Source  string
	Devices []Device
	Latest  []Sample
	// HistoryLen is the number of samples held per device (the most).
	HistoryLen int
	// Err is the last sampling error (nil once sampling works again).
	Err   error
	ErrAt time.Time
	// Samples counts successful sampling rounds.
	Samples int
}

// Sampler reads a source at an interval into per-device rings.
type Sampler struct {
	src      Source
	interval time.Duration
	mu       sync.Mutex
	rings    map[int]*Ring
	latest   []Sample
	err      error
	errAt    time.Time
	rounds   int
	capacity int
	notify   chan struct{}
}

// HistoryFor returns the ring capacity that keeps d of history at interval.
func HistoryFor(d, interval time.Duration) int {
	if interval <= 0 {
		interval = time.Second
	}
	return int(d/interval) + 1
}

// NewSampler samples src every interval, keeping capacity samples per
// device.
func NewSampler(src Source, interval time.Duration, capacity int) *Sampler {
	return &Sampler{src: src, interval: interval, rings: map[int]*Ring{}, capacity: capacity, notify: make(chan struct{}, 1)}
}

// Updates delivers a value after each sampling round (coalesced).
func (s *Sampler) Updates() <-chan struct{} { return s.notify }

// Run samples until ctx is done. Errors are kept in the state and sampling
// is retried at the next tick: a driver reload must not stop the program.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.Once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once takes one sampling round.
func (s *Sampler) Once(ctx context.Context) {
	samples, err := s.sample(ctx)
	s.mu.Lock()
	if err != nil {
		s.err, s.errAt = err, time.Now()
	} else {
		s.err = nil
		s.rounds++
		s.latest = samples
		for _, smp := range samples {
			r := s.rings[smp.Device]
			if r == nil {
				r = NewRing(s.capacity)
				s.rings[smp.Device] = r
			}
			r.Push(smp)
		}
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Sampler) sample(ctx context.Context) (out []Sample, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("sampling failed: internal error")
		}
	}()
	return s.src.Sample(ctx)
}

// State returns a copy of what the sampler holds.
func (s *Sampler) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{Source: s.src.Name(), Devices: s.src.Devices(), Latest: append([]Sample(nil), s.latest...),
		Err: s.err, ErrAt: s.errAt, Samples: s.rounds}
	for _, r := range s.rings {
		st.HistoryLen = max(st.HistoryLen, r.Len())
	}
	return st
}

// History copies a device's samples, oldest first.
func (s *Sampler) History(dev int) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rings[dev]; r != nil {
		return r.Slice()
	}
	return nil
}

// Series returns a device's used memory over time (seconds relative to the
// newest sample, bytes), thinned to about maxPoints with every local peak
// kept; copying the whole history for each frame would cost more than
// drawing it.
func (s *Sampler) Series(dev int, maxPoints int) (ago, used []float64) {
	return s.SeriesOf(dev, maxPoints, func(smp *Sample) float64 { return float64(smp.Used) })
}

// SeriesOf is Series for any figure of a sample (utilisation, power); NaN
// figures (not supported) are left out.
func (s *Sampler) SeriesOf(dev int, maxPoints int, fig func(*Sample) float64) (ago, vals []float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rings[dev]
	if r == nil || r.Len() == 0 {
		return nil, nil
	}
	n := r.Len()
	newest := r.At(n - 1).Time
	step := 1
	if maxPoints > 0 && n > maxPoints {
		step = n / maxPoints
	}
	for i := 0; i < n; i += step {
		// The largest value of each step keeps the peaks.
		best, bestV := -1, 0.0
		for j := i; j < min(n, i+step); j++ {
			smp := &r.buf[(r.start+j)%len(r.buf)]
			if smp.Err != nil {
				continue
			}
			if v := fig(smp); !math.IsNaN(v) && (best < 0 || v > bestV) {
				best, bestV = j, v
			}
		}
		if best < 0 {
			continue
		}
		ago = append(ago, r.At(best).Time.Sub(newest).Seconds())
		vals = append(vals, bestV)
	}
	return ago, vals
}

// ProcessSeries is the memory of each process on a device over time
// (seconds relative to the newest sample, bytes; 0 while it held none),
// for the k processes holding the most in the newest sample, largest first.
func (s *Sampler) ProcessSeries(dev, maxPoints, k int) []ProcessSeries {
	s.mu.Lock()
	r := s.rings[dev]
	if r == nil || r.Len() == 0 {
		s.mu.Unlock()
		return nil
	}
	last := r.At(r.Len() - 1)
	s.mu.Unlock()
	var top []Process
	for _, p := range last.Processes {
		if p.Used > 0 {
			top = append(top, p)
		}
	}
	slices.SortFunc(top, func(a, b Process) int {
		if c := cmp.Compare(b.Used, a.Used); c != 0 {
			return c
		}
		return cmp.Compare(a.PID, b.PID)
	})
	if len(top) > k {
		top = top[:k]
	}
	out := make([]ProcessSeries, 0, len(top))
	for _, p := range top {
		pid := p.PID
		ago, used := s.SeriesOf(dev, maxPoints, func(smp *Sample) float64 {
			for i := range smp.Processes {
				if smp.Processes[i].PID == pid {
					return float64(max(0, smp.Processes[i].Used))
				}
			}
			return 0
		})
		out = append(out, ProcessSeries{Process: p, Ago: ago, Bytes: used})
	}
	return out
}

// ProcessSeries is one process's memory history on a device: Process is
// its newest reading.
type ProcessSeries struct {
	Process
	Ago, Bytes []float64
}
