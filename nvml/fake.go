package nvml

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"sync"
	"time"
)

// Fake simulates N GPUs running a training job: memory climbs through the
// forward pass, falls through backward and steps down at the optimizer
// step, with per-rank skew and noise. It is always labelled simulated.
type Fake struct {
	n     int
	start time.Time
	now   func() time.Time
	mu    sync.Mutex
	rng   *rand.Rand
	// Period is the length of one simulated iteration.
	Period time.Duration
	// Host, when set, goes into the UUIDs and shifts the phase, so fakes
	// standing for different nodes differ.
	Host string
}

// NewFake returns n simulated 80 GiB H100s. now is the clock (nil: real time).
func NewFake(n int, now func() time.Time) *Fake {
	if now == nil {
		now = time.Now
	}
	return &Fake{n: n, start: now(), now: now, rng: rand.New(rand.NewSource(42)), Period: 6 * time.Second}
}

const fakeTotal = 80 << 30

// Name describes the source.
func (f *Fake) Name() string { return fmt.Sprintf("simulated: %d fake GPUs (no NVML)", f.n) }

// Simulated is always true.
func (f *Fake) Simulated() bool { return true }

// Devices lists the fake GPUs.
func (f *Fake) Devices() []Device {
	out := make([]Device, f.n)
	for i := range out {
		uuid := fmt.Sprintf("GPU-fake-%04d", i)
		if f.Host != "" {
			uuid = fmt.Sprintf("GPU-fake-%s-%04d", f.Host, i)
		}
		out[i] = Device{Index: i, UUID: uuid, Name: "Simulated H100 80GB HBM3", Parent: -1}
	}
	return out
}

// Level is the simulated used memory of device d at time t, in bytes.
func (f *Fake) Level(d int, t time.Time) int64 {
	el := t.Sub(f.start).Seconds()
	period := f.Period.Seconds()
	phase := math.Mod(el/period+float64(d)*0.07+hostPhase(f.Host), 1)
	static := 22.0 + float64(d%4)*0.8 // GiB: weights, grads, optimizer state
	act := 38.0 + float64(d%3)*2.5    // GiB of activations at the peak
	if d == f.n-1 && f.n > 1 {
		// One GPU runs close to its limit (the last pipeline stage often
		// does): about 78 of 80 GiB at its peak, as an OOM hunt starts.
		act = 73 - static
	}
	var level float64
	switch {
	case phase < 0.45: // forward: activations pile up
		level = static + act*(phase/0.45)
	case phase < 0.85: // backward: they are freed
		level = static + act*(1-(phase-0.45)/0.4) + 3
	default: // optimizer step
		level = static + 4*math.Sin((phase-0.85)/0.15*math.Pi)
	}
	return int64((level + 2) * (1 << 30))
}

// hostPhase is a fixed fraction of an iteration derived from a host name.
func hostPhase(h string) float64 {
	if h == "" {
		return 0
	}
	x := fnv.New32a()
	x.Write([]byte(h))
	return float64(x.Sum32()%1000) / 1000
}

// Sample reads every fake GPU.
func (f *Fake) Sample(ctx context.Context) ([]Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	out := make([]Sample, f.n)
	for d := range out {
		used := f.Level(d, now) + int64(f.rng.Intn(64<<20))
		util := 70 + 25*math.Sin(float64(now.UnixMilli())/700+float64(d))
		out[d] = Sample{
			Time: now, Device: d, Used: used, Reserved: 520 << 20, Total: fakeTotal,
			UtilGPU: math.Round(util), UtilMem: math.Round(util * 0.6),
			TempC: math.Round(55 + util/5), PowerW: math.Round(250 + 4*util), PowerLimitW: 700,
			SMClockMHz: 1980,
			Processes: []Process{{PID: 4100 + d, GPU: d, Used: used - 600<<20, User: "demo",
				Command: fmt.Sprintf("python pretrain_gpt.py --local-rank %d", d), Visible: true}},
		}
		if d%4 == 0 {
			// An evaluation job sharing the GPU, so per-process history
			// has more than one line to tell apart.
			eval := int64(1<<30) + int64(1<<30)*int64(now.Unix()/20%3)
			out[d].Processes[0].Used -= eval
			out[d].Processes = append(out[d].Processes, Process{PID: 5200 + d, GPU: d, Used: eval, User: "demo",
				Command: "python eval.py --ckpt latest", Visible: true})
		}
	}
	return out, nil
}

// Close does nothing.
func (f *Fake) Close() error { return nil }
