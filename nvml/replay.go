package nvml

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"memscope/trace"
)

// Replay plays recorded traces back as if live: each rank becomes a GPU,
// reserved_memory_MB its used memory and allocated_memory_MB its process's
// memory, at the recorded pace (looping at the end).
type Replay struct {
	name    string
	devs    []Device
	series  []replaySeries
	start   time.Time
	now     func() time.Time
	span    float64
	totalGB int64
}

type replaySeries struct {
	t, used, alloc []float64
}

// NewReplay loads the traces of dir. now is the clock (nil: real time).
func NewReplay(ctx context.Context, dir string, now func() time.Time) (*Replay, error) {
	set, err := trace.LoadPath(ctx, dir)
	if err != nil {
		return nil, err
	}
	if len(set.Ranks) == 0 {
		return nil, fmt.Errorf("%s: no trace could be read", dir)
	}
	if now == nil {
		now = time.Now
	}
	r := &Replay{name: "replay of " + dir, start: now(), now: now}
	var maxUsed float64
	for _, rk := range set.Ranks {
		var s replaySeries
		for _, it := range rk.Iterations {
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
		var o replaySeries
		for _, i := range idx {
			o.t, o.used, o.alloc = append(o.t, s.t[i]), append(o.used, s.used[i]), append(o.alloc, s.alloc[i])
		}
		if len(o.t) > 1 {
			r.span = math.Max(r.span, o.t[len(o.t)-1]-o.t[0])
		}
		r.series = append(r.series, o)
		r.devs = append(r.devs, Device{Index: rk.Rank, Name: "replayed rank " + fmt.Sprint(rk.Rank), Parent: -1})
	}
	// Total memory is not recorded: round the largest use up to 8 GiB.
	r.totalGB = int64(math.Ceil(maxUsed/1024/8)) * 8
	if r.totalGB == 0 {
		r.totalGB = 8
	}
	return r, nil
}

// Name describes the source.
func (r *Replay) Name() string { return r.name }

// Simulated is true: the data is recorded, not live.
func (r *Replay) Simulated() bool { return true }

// Devices lists one device per replayed rank.
func (r *Replay) Devices() []Device { return append([]Device(nil), r.devs...) }

// Sample returns each rank's recorded values at the current playback time.
func (r *Replay) Sample(ctx context.Context) ([]Sample, error) {
	now := r.now()
	el := now.Sub(r.start).Seconds()
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
		out = append(out, Sample{Time: now, Device: d, Used: mib(s.used[j]), Total: r.totalGB << 30, Reserved: 0,
			UtilGPU: NA, UtilMem: NA, TempC: NA, PowerW: NA, PowerLimitW: NA, SMClockMHz: NA,
			Processes: []Process{{PID: 0, GPU: d, Used: mib(s.alloc[j]), Command: "(recorded allocated memory)", Visible: true}}})
	}
	return out, nil
}

// Close does nothing.
func (r *Replay) Close() error { return nil }
