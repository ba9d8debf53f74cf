// Package trace reads per-rank memory traces of real and simulated training
// runs (Megatron memory_trace_rank*.json, torchtitan's structured memory
// export, Megatron and torchtitan logs), pairs the ranks of two runs and
// compares them.
package trace

import (
	"math"
	"slices"

	"memscope/format"
)

// Unset marks an optional figure the file does not give (Megatron writes -1).
const Unset = -1.0

// XUnit says what an iteration's X values are.
type XUnit uint8

// X units.
const (
	// Seconds: samples within one iteration, timed from the tracker start.
	Seconds XUnit = iota
	// Steps: one sample per training step or iteration (logs, exports).
	Steps
)

// Iteration is one iteration of a rank's trace, or, for step-based sources,
// the whole series over steps. Memory figures are in MiB, as the files
// write them ("MB" there means MiB).
type Iteration struct {
	// Key is the iteration key as written; Num its number.
	Key string
	Num int
	X   XUnit
	// T, Allocated and Reserved are the samples. T is seconds (X == Seconds)
	// or step numbers (X == Steps).
	T, Allocated, Reserved []float64
	// Active is max active memory where a source gives it apart from
	// Allocated (torchtitan exports with the fork's peak allocated); nil
	// otherwise.
	Active []float64
	// Marks are events at an X: allocation retries and OOMs.
	Marks []Mark
	// PeakAllocated, Static and Theoretical are Unset when absent.
	// PeakAllocated is the file's peak_allocated_MB unless that value is
	// cumulative (PeakCumulative), in which case it is Unset and FilePeak
	// keeps what the file wrote.
	PeakAllocated float64
	Static        float64
	Theoretical   float64
	// FilePeak is peak_allocated_MB as written (Unset when absent).
	FilePeak float64
	// PeakCumulative says the file's peak is torch.cuda.max_memory_allocated
	// never reset: the same value in neighbouring iterations and above this
	// iteration's own samples. Peak then uses the samples.
	PeakCumulative bool
	// Source is the "source" field of recorded traces ("nvml").
	Source string
	// TotalMemory (MiB) and IntervalS are what `memscope record` saves of
	// the GPU and the sampling; Unset when absent.
	TotalMemory float64
	IntervalS   float64
	// DeviceName is the recorded GPU's name ("" when absent).
	DeviceName string
}

// Mark is an event of a trace at one X (a step): allocation retries or an
// OOM.
type Mark struct {
	X     float64
	Label string
	OOM   bool
}

// Peak is peak_allocated_MB when the file gives it (>= 0), else the largest
// allocated sample; for sources that only know reserved memory (torchtitan
// logs), the largest reserved sample. NaN for an empty iteration.
func (it *Iteration) Peak() float64 {
	if it.PeakAllocated >= 0 {
		return it.PeakAllocated
	}
	if m := maxOf(it.Allocated); !math.IsNaN(m) {
		return m
	}
	return maxOf(it.Reserved)
}

// Duration is the time between the first and last sample with a finite
// time; 0 with fewer than two.
func (it *Iteration) Duration() float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, t := range it.T {
		if !math.IsNaN(t) && !math.IsInf(t, 0) {
			lo, hi = math.Min(lo, t), math.Max(hi, t)
		}
	}
	if hi <= lo {
		return 0
	}
	return hi - lo
}

// Rank is everything one file says about one rank.
type Rank struct {
	Rank       int
	Path       string
	Kind       format.Kind
	Iterations []Iteration // ascending by Num
	// Warnings name what was skipped or not understood.
	Warnings []string
}

// Last returns the iteration with the largest number, or nil.
func (r *Rank) Last() *Iteration {
	if len(r.Iterations) == 0 {
		return nil
	}
	return &r.Iterations[len(r.Iterations)-1]
}

// Iteration returns iteration n, or nil.
func (r *Rank) Iteration(n int) *Iteration {
	i, ok := slices.BinarySearchFunc(r.Iterations, n, func(it Iteration, n int) int { return it.Num - n })
	if !ok {
		return nil
	}
	return &r.Iterations[i]
}

// Samples counts samples over all iterations.
func (r *Rank) Samples() int {
	n := 0
	for i := range r.Iterations {
		n += len(r.Iterations[i].T)
	}
	return n
}

func maxOf(v []float64) float64 {
	m := math.NaN()
	for _, x := range v {
		if !math.IsNaN(x) && (math.IsNaN(m) || x > m) {
			m = x
		}
	}
	return m
}

// Max returns the largest non-NaN value, NaN when there is none.
func Max(v []float64) float64 { return maxOf(v) }
