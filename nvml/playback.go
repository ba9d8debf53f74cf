package nvml

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"memscope/trace"
)

// Playback plays recorded traces back as if live (memscope --replay): each rank becomes a GPU,
// reserved_memory_MB its used memory and allocated_memory_MB its process's
// memory, at the recorded pace (looping at the end).
type Playback struct {
	name   string
	devs   []Device
	series []playbackSeries
	start  time.Time
	now    func() time.Time
	span   float64
	speed  float64
	// mu guards the playback position: the sampler reads it, the Live
	// tab's keys pause and seek it.
	mu sync.Mutex
	// offset is recording seconds added to the elapsed wall time (seeks);
	// pausedAt, when set, is the wall time playback stopped at.
	offset   float64
	pausedAt time.Time
	// interval is the recorded sampling interval (seconds).
	interval float64
}

type playbackSeries struct {
	t, used, alloc []float64
	// total is the GPU's memory in bytes: recorded, or estimated.
	total int64
}

// NewPlayback plays a recording (memscope record's traces, or any run's)
// back: set is the loaded run, dir names it. now is the clock (nil: real
// time); speed scales the recorded pace (1: as recorded; <= 0 means 1).
func NewPlayback(set *trace.Set, dir string, now func() time.Time, speed float64) (*Playback, error) {
	if set == nil || len(set.Ranks) == 0 {
		return nil, fmt.Errorf("%s: no trace could be read", dir)
	}
	if now == nil {
		now = time.Now
	}
	if !(speed > 0) {
		speed = 1
	}
	r := &Playback{name: "replay of " + dir, start: now(), now: now, speed: speed}
	var gaps []float64
	for _, rk := range set.Ranks {
		var s playbackSeries
		var maxUsed, total float64
		name := fmt.Sprintf("replayed rank %d", rk.Rank)
		for _, it := range rk.Iterations {
			if it.TotalMemory > 0 {
				total = it.TotalMemory
			}
			if it.IntervalS > 0 && r.interval == 0 {
				r.interval = it.IntervalS
			}
			if it.DeviceName != "" {
				name = fmt.Sprintf("%s (rank %d, replayed)", it.DeviceName, rk.Rank)
			}
			for i := range it.T {
				s.t = append(s.t, it.T[i])
				s.used = append(s.used, it.Reserved[i])
				s.alloc = append(s.alloc, it.Allocated[i])
				if it.Reserved[i] > maxUsed {
					maxUsed = it.Reserved[i]
				}
			}
		}
		idx := make([]int, len(s.t))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return s.t[idx[a]] < s.t[idx[b]] })
		var o playbackSeries
		for _, i := range idx {
			o.t, o.used, o.alloc = append(o.t, s.t[i]), append(o.used, s.used[i]), append(o.alloc, s.alloc[i])
		}
		if len(o.t) > 1 {
			r.span = math.Max(r.span, o.t[len(o.t)-1]-o.t[0])
			for i := 1; i < len(o.t); i++ {
				gaps = append(gaps, o.t[i]-o.t[i-1])
			}
		}
		o.total = int64(total * (1 << 20))
		if total <= 0 {
			// Older recordings hold no total: round the largest use up to
			// 8 GiB, and say so in the device name.
			o.total = int64(math.Max(1, math.Ceil(maxUsed/1024/8))*8) << 30
			name += " (total estimated)"
		}
		r.series = append(r.series, o)
		r.devs = append(r.devs, Device{Index: rk.Rank, Name: name, Parent: -1})
	}
	if r.interval == 0 && len(gaps) > 0 {
		sort.Float64s(gaps)
		r.interval = gaps[len(gaps)/2]
	}
	return r, nil
}

// Interval is how often to sample the replay to see every recorded sample
// at the chosen speed (never below 50 ms).
func (r *Playback) Interval() time.Duration {
	if r.interval <= 0 {
		return time.Second
	}
	return max(50*time.Millisecond, time.Duration(r.interval/r.speed*float64(time.Second)))
}

// Name describes the source.
func (r *Playback) Name() string { return r.name }

// Simulated is true: the data is recorded, not live.
func (r *Playback) Simulated() bool { return true }

// Devices lists one device per replayed rank.
func (r *Playback) Devices() []Device { return append([]Device(nil), r.devs...) }

// played is the recording seconds played since the start (seeks and
// pauses included, loops not folded). Called with mu held.
func (r *Playback) played(now time.Time) float64 {
	if !r.pausedAt.IsZero() {
		now = r.pausedAt
	}
	return max(0, now.Sub(r.start).Seconds()*r.speed+r.offset)
}

// Position says where playback is: seconds into the recording, its span,
// how many times it has looped and whether it is paused.
func (r *Playback) Position() (at, span float64, loop int, paused bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.played(r.now())
	if r.span > 0 {
		loop, at = int(p/r.span), math.Mod(p, r.span)
	}
	return at, r.span, loop, !r.pausedAt.IsZero()
}

// TogglePause stops playback where it is, or resumes it.
func (r *Playback) TogglePause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.pausedAt.IsZero() {
		r.pausedAt = now
		return
	}
	// Resume from where it stopped: the pause's wall time is not played.
	r.offset -= now.Sub(r.pausedAt).Seconds() * r.speed
	r.pausedAt = time.Time{}
}

// Seek moves playback by d recording seconds (never before the start).
func (r *Playback) Seek(d float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.played(r.now())
	r.offset += max(d, -p)
}

// Sample returns each rank's recorded values at the current playback time.
func (r *Playback) Sample(ctx context.Context) ([]Sample, error) {
	now := r.now()
	r.mu.Lock()
	el := r.played(now)
	r.mu.Unlock()
	if r.span > 0 {
		el = math.Mod(el, r.span)
	}
	out := make([]Sample, 0, len(r.series))
	for i, s := range r.series {
		if len(s.t) == 0 {
			continue
		}
		t := s.t[0] + el
		j := sort.SearchFloat64s(s.t, t)
		if j >= len(s.t) {
			j = len(s.t) - 1
		}
		mib := func(v float64) int64 {
			if math.IsNaN(v) {
				return 0
			}
			return int64(v * (1 << 20))
		}
		d := r.devs[i].Index
		out = append(out, Sample{Time: now, Device: d, Used: mib(s.used[j]), Total: s.total, Reserved: 0,
			UtilGPU: NA, UtilMem: NA, TempC: NA, PowerW: NA, PowerLimitW: NA, SMClockMHz: NA,
			Processes: []Process{{PID: 0, GPU: d, Used: mib(s.alloc[j]), Command: "(recorded allocated memory)", Visible: true}}})
	}
	return out, nil
}

// Close does nothing.
func (r *Playback) Close() error { return nil }
