package nvml

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"memscope/trace"
)

// stepSource returns known values: device d at round r has d*1000+r MiB
// used and half of that held by its process.
// stepTotal is each step GPU's memory: 80 GB less the driver's share.
const stepTotal = 81559 << 20

type stepSource struct {
	n, round int
	start    time.Time
}

func (s *stepSource) Name() string    { return "step" }
func (s *stepSource) Simulated() bool { return true }
func (s *stepSource) Devices() []Device {
	return []Device{{Index: 0, Parent: -1, Name: "Step GPU"}, {Index: 1, Parent: -1, Name: "Step GPU"}, {Index: 2, Parent: -1, Name: "Step GPU"}}[:s.n]
}
func (s *stepSource) Close() error { return nil }
func (s *stepSource) Sample(context.Context) ([]Sample, error) {
	s.round++
	var out []Sample
	for d := 0; d < s.n; d++ {
		used := int64(d*1000+s.round) << 20
		out = append(out, Sample{Time: s.start.Add(time.Duration(s.round) * 100 * time.Millisecond), Device: d, Used: used, Total: stepTotal,
			Processes: []Process{{PID: 100 + d, GPU: d, Used: used / 2, Visible: true}, {PID: 999, GPU: d, Used: 1 << 20, Visible: true}}})
	}
	return out, nil
}

// TestRecordRoundTrip records from a known source and reads the files
// back with the trace package: the values are the ones sampled.
func TestRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := &stepSource{n: 3, start: time.Now()}
	var status bytes.Buffer
	err := Record(context.Background(), src, RecordOptions{OutDir: dir, Interval: 20 * time.Millisecond,
		Duration: 300 * time.Millisecond, Devices: []int{0, 2}, PIDs: []int{100, 102}, FlushEvery: 50 * time.Millisecond, Status: &status})
	if err != nil {
		t.Fatal(err)
	}
	if s := status.String(); !strings.HasPrefix(s, "\rrecording 2 GPU(s) · 1 samples") || !strings.Contains(s, "\rrecorded 2 GPU(s)") || !strings.HasSuffix(s, "\n") {
		t.Errorf("status line: %q", s)
	}
	set, err := trace.LoadDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Ranks) != 2 || set.Ranks[0].Rank != 0 || set.Ranks[1].Rank != 2 || len(set.Errors) > 0 {
		t.Fatalf("ranks: %+v errors %v", set.Ranks, set.Errors)
	}
	for _, r := range set.Ranks {
		it := r.Iterations[0]
		if it.Source != "fake" || it.Key != "0" || len(it.T) < 5 {
			t.Fatalf("rank %d: %+v", r.Rank, it)
		}
		for i := range it.T {
			round := float64(i + 1)
			wantUsed := float64(r.Rank*1000) + round
			if it.Reserved[i] != wantUsed || it.Allocated[i] != wantUsed/2 {
				t.Fatalf("rank %d sample %d: reserved %v allocated %v, want %v and %v", r.Rank, i, it.Reserved[i], it.Allocated[i], wantUsed, wantUsed/2)
			}
		}
		if it.PeakAllocated != trace.Max(it.Allocated) {
			t.Errorf("peak %v", it.PeakAllocated)
		}
	}
	// The GPU's total memory, the interval and its name are saved, and a
	// replay uses them: the real size, every recorded sample.
	for _, r := range set.Ranks {
		it := r.Iterations[0]
		if it.TotalMemory != float64(stepTotal)/(1<<20) || it.IntervalS != 0.02 || it.DeviceName == "" {
			t.Errorf("rank %d: total %v interval %v name %q", r.Rank, it.TotalMemory, it.IntervalS, it.DeviceName)
		}
	}
	for _, speed := range []float64{1, 4} {
		rp, err := newPlaybackOf(t, dir, nil, speed)
		if err != nil {
			t.Fatal(err)
		}
		smp, _ := rp.Sample(context.Background())
		if smp[0].Total != stepTotal || strings.Contains(rp.Devices()[0].Name, "estimated") {
			t.Errorf("replayed total %d, want the recorded %d (%s)", smp[0].Total, stepTotal, rp.Devices()[0].Name)
		}
		if want := max(50*time.Millisecond, time.Duration(float64(20*time.Millisecond)/speed)); rp.Interval() != want {
			t.Errorf("speed %v: replay samples every %v, want %v", speed, rp.Interval(), want)
		}
	}
	// And compare reads them (real vs itself: no error).
	c := trace.Compare(set, set, -1, nil)
	if c.Summary.Paired != 2 || c.Ranks[0].PeakErrorPct != 0 {
		t.Errorf("compare: %+v", c.Summary)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(m) > 0 {
		t.Errorf("temporary files left behind: %v", m)
	}
}

func TestRecordNoDevice(t *testing.T) {
	err := Record(context.Background(), &stepSource{n: 1}, RecordOptions{OutDir: t.TempDir(), Devices: []int{7}})
	if err == nil {
		t.Fatal("recording a GPU that does not exist must fail")
	}
}

func TestFakeAndSampler(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	f := NewFake(8, clock)
	s := NewSampler(f, time.Second, 5)
	for i := 0; i < 7; i++ {
		s.Once(context.Background())
	}
	st := s.State()
	if len(st.Devices) != 8 || len(st.Latest) != 8 || st.Samples != 7 {
		t.Fatalf("state: %d devices, %d latest, %d rounds", len(st.Devices), len(st.Latest), st.Samples)
	}
	if h := s.History(3); len(h) != 5 || !h[0].Time.Before(h[4].Time) || st.HistoryLen != 5 {
		t.Errorf("ring keeps the newest 5, oldest first: %d", len(h))
	}
	ago, used := s.Series(3, 2)
	if len(ago) < 2 || len(ago) > 3 || ago[len(ago)-1] > 0 || used[0] <= 0 {
		t.Errorf("series: %v %v", ago, used)
	}
	for _, smp := range st.Latest {
		if smp.Used <= 0 || smp.Used > smp.Total || math.IsNaN(smp.UtilGPU) {
			t.Errorf("fake sample: %+v", smp)
		}
	}
	if !f.Simulated() {
		t.Error("the fake is labelled simulated")
	}
}

func TestPlayback(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	r, err := newPlaybackOf(t, "../testdata/traces/megatron_trace_memory/sim", clock, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Devices()) != 4 {
		t.Fatalf("devices: %d", len(r.Devices()))
	}
	// Megatron traces hold no total: it is estimated, and says so.
	if !strings.Contains(r.Devices()[0].Name, "total estimated") {
		t.Errorf("device name %q", r.Devices()[0].Name)
	}
	first, _ := r.Sample(context.Background())
	now = now.Add(200 * time.Millisecond)
	later, _ := r.Sample(context.Background())
	if first[0].Used == 0 || first[0].Total < first[0].Used {
		t.Errorf("replayed sample: %+v", first[0])
	}
	if first[0].Used == later[0].Used && first[0].Processes[0].Used == later[0].Processes[0].Used {
		t.Error("playback should move with the clock")
	}
}

func BenchmarkSampleFake8(b *testing.B) {
	f := NewFake(8, nil)
	for i := 0; i < b.N; i++ {
		if _, err := f.Sample(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
