package trace

import (
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"memscope/internal/fullfs"
)

func batch(from, n int) *Iteration {
	it := &Iteration{Key: "0", PeakAllocated: Unset, Static: Unset, Theoretical: Unset, Source: "fake", IntervalS: 0.05,
		DeviceName: "GPU \"0\"", TotalMemory: 81559}
	for i := from; i < from+n; i++ {
		it.T = append(it.T, float64(i)*0.05)
		it.Reserved = append(it.Reserved, float64(1000+i%97))
		it.Allocated = append(it.Allocated, float64(500+i%89)+0.25)
	}
	return it
}

func readBack(t *testing.T, path string) *Iteration {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseMegatron(path, data)
	if err != nil {
		t.Fatalf("the file is not a valid trace: %v\n%.300s", err, data)
	}
	if len(r.Iterations) != 1 {
		t.Fatalf("%d iterations", len(r.Iterations))
	}
	return &r.Iterations[0]
}

// TestAppenderKeepsAValidTrace: after every append the file parses as the
// Megatron trace WriteMegatron would write, with every sample so far, the
// trailer's fields current (a peak that shrinks in length trims the file).
func TestAppenderKeepsAValidTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory_trace_rank0.json")
	a, err := CreateAppender(path, batch(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := readBack(t, path); len(got.T) != 0 || got.Source != "fake" {
		t.Fatalf("empty recording: %+v", got)
	}
	total := 0
	for k, peak := range []float64{Unset, 123456.789, 7, 98765.4321, 1} {
		b := batch(total, 10*(k+1))
		b.PeakAllocated = peak
		if err := a.Append(b); err != nil {
			t.Fatal(err)
		}
		total += len(b.T)
		got := readBack(t, path)
		if len(got.T) != total || a.Samples() != total || got.T[total-1] != b.T[len(b.T)-1] ||
			got.Allocated[total-1] != b.Allocated[len(b.Allocated)-1] || got.DeviceName != `GPU "0"` {
			t.Fatalf("after append %d: %d samples (want %d)", k, len(got.T), total)
		}
		if (peak == Unset) != (got.PeakAllocated < 0) || (peak != Unset && got.PeakAllocated != peak) {
			t.Errorf("after append %d: peak %v, want %v", k, got.PeakAllocated, peak)
		}
	}
	// The same bytes as a whole-file write of the same samples.
	whole := batch(0, total)
	whole.PeakAllocated = 1
	other := filepath.Join(t.TempDir(), "memory_trace_rank0.json")
	if err := WriteMegatron(other, []Iteration{*whole}); err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(path)
	y, _ := os.ReadFile(other)
	if string(x) != string(y) {
		t.Errorf("appended file differs from WriteMegatron's:\n%.400s\n---\n%.400s", x, y)
	}
}

// TestAppenderFullDisk: a write that fails half-way leaves the file as it
// was (every sample flushed before stays readable); the next write after
// space returns adds the samples kept meanwhile.
func TestAppenderFullDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory_trace_rank0.json")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var full atomic.Bool
	fd := fullfs.File{File: f, Full: &full}
	a, err := NewAppender(fd, batch(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(batch(0, 100)); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	kept := batch(100, 50)
	if err := a.Append(kept); err == nil {
		t.Fatal("a full disk wrote")
	}
	if got := readBack(t, path); len(got.T) != 100 {
		t.Fatalf("after a failed write the file holds %d samples, want the 100 flushed", len(got.T))
	}
	full.Store(false)
	if err := a.Append(kept); err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, path); len(got.T) != 150 || math.Abs(got.T[149]-149*0.05) > 1e-9 {
		t.Fatalf("after recovery: %d samples", len(got.T))
	}
}

// BenchmarkAppend appends a second of samples at 50 ms to recordings one
// minute and 24 hours long: the time must not grow with the recording.
func BenchmarkAppend(b *testing.B) {
	for _, tc := range []struct {
		name    string
		samples int
	}{{"after_1min", 60 * 20}, {"after_24h", 24 * 3600 * 20}} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "memory_trace_rank0.json")
			a, err := CreateAppender(path, batch(0, 0))
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			for done := 0; done < tc.samples; done += 100_000 {
				if err := a.Append(batch(done, min(100_000, tc.samples-done))); err != nil {
					b.Fatal(err)
				}
			}
			next := batch(tc.samples, 20)
			b.ResetTimer()
			for range b.N {
				if err := a.Append(next); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(a.Samples()), "samples")
		})
	}
}
