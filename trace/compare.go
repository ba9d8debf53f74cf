package trace

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
)

// CurvePoints is the number of points of the common relative-time axis the
// curve error is computed on.
const CurvePoints = 256

// SideStats summarises one side (real or simulated) of a rank for the
// compared iteration. Memory figures are MiB; NaN where unknown.
type SideStats struct {
	Path         string
	Iteration    int
	Samples      int
	Duration     float64
	Peak         float64
	MaxAllocated float64
	MaxReserved  float64
	Static       float64 // Unset when absent
	Theoretical  float64 // Unset when absent
	// It is the compared iteration.
	It *Iteration
}

// RankComparison is one row of a comparison. Real or Sim is nil when that
// side has no trace for the rank; the errors are NaN when undefined.
type RankComparison struct {
	Rank          int
	Real, Sim     *SideStats
	PeakErrorPct  float64
	CurveErrorPct float64
}

// Summary is the comparison's conclusion.
type Summary struct {
	Ranks  int
	Paired int
	// WorstRank has the largest |peak error|; -1 when no rank has one.
	WorstRank int
	// MeanAbsPeakErrorPct is NaN when no rank has a peak error.
	MeanAbsPeakErrorPct float64
	// Underestimated lists the ranks whose simulated peak is below the real
	// one: the dangerous case, where the plan would run out of memory.
	Underestimated []int
}

// Comparison compares two runs rank by rank.
type Comparison struct {
	Ranks   []RankComparison
	Summary Summary
	Errors  []FileError
	// Notes are remarks for the reader (how sides were chosen).
	Notes []string
}

// Compare pairs the ranks of real and sim by rank number and compares them
// on one iteration: iteration (when >= 0, on each side that has it; a side
// with a single iteration uses that one) or else each side's last. When both
// sets hold exactly one rank, they are paired whatever their numbers.
func Compare(real, sim *Set, iteration int) *Comparison {
	c := &Comparison{}
	c.Errors = append(c.Errors, real.Errors...)
	c.Errors = append(c.Errors, sim.Errors...)
	byRank := map[int]*RankComparison{}
	get := func(n int) *RankComparison {
		if rc := byRank[n]; rc != nil {
			return rc
		}
		rc := &RankComparison{Rank: n, PeakErrorPct: math.NaN(), CurveErrorPct: math.NaN()}
		byRank[n] = rc
		return rc
	}
	single := len(real.Ranks) == 1 && len(sim.Ranks) == 1 && real.Ranks[0].Rank != sim.Ranks[0].Rank
	if single {
		c.Notes = append(c.Notes, fmt.Sprintf("one trace on each side: paired real rank %d with simulated rank %d", real.Ranks[0].Rank, sim.Ranks[0].Rank))
	}
	for _, r := range real.Ranks {
		st, err := sideStats(r, iteration)
		if err != nil {
			c.Errors = append(c.Errors, FileError{Path: r.Path, Err: err})
			continue
		}
		get(r.Rank).Real = st
	}
	for _, r := range sim.Ranks {
		st, err := sideStats(r, iteration)
		if err != nil {
			c.Errors = append(c.Errors, FileError{Path: r.Path, Err: err})
			continue
		}
		n := r.Rank
		if single {
			n = real.Ranks[0].Rank
		}
		get(n).Sim = st
	}
	for _, rc := range byRank {
		c.Ranks = append(c.Ranks, *rc)
	}
	slices.SortFunc(c.Ranks, func(a, b RankComparison) int { return a.Rank - b.Rank })
	for i := range c.Ranks {
		rc := &c.Ranks[i]
		if rc.Real == nil || rc.Sim == nil {
			continue
		}
		rp, sp := rc.Real.Peak, rc.Sim.Peak
		if rp > 0 && !math.IsNaN(sp) {
			rc.PeakErrorPct = (sp - rp) / rp * 100
			rc.CurveErrorPct = curveError(rc.Real.It, rc.Sim.It, rp)
		}
	}
	c.Summary = summarize(c.Ranks)
	return c
}

func sideStats(r *Rank, iteration int) (*SideStats, error) {
	var it *Iteration
	switch {
	case len(r.Iterations) == 0:
		return nil, fmt.Errorf("%s: no iterations", r.Path)
	case iteration < 0 || len(r.Iterations) == 1:
		it = r.Last()
	default:
		it = r.Iteration(iteration)
		if it == nil {
			return nil, fmt.Errorf("%s: no iteration %d (has %s)", r.Path, iteration, iterRange(r))
		}
	}
	return &SideStats{
		Path: r.Path, Iteration: it.Num, Samples: len(it.T), Duration: it.Duration(), Peak: it.Peak(),
		MaxAllocated: maxOf(it.Allocated), MaxReserved: maxOf(it.Reserved),
		Static: it.Static, Theoretical: it.Theoretical, It: it,
	}, nil
}

func iterRange(r *Rank) string {
	if len(r.Iterations) == 0 {
		return "none"
	}
	return fmt.Sprintf("%d..%d", r.Iterations[0].Num, r.Last().Num)
}

func summarize(rows []RankComparison) Summary {
	s := Summary{Ranks: len(rows), WorstRank: -1, MeanAbsPeakErrorPct: math.NaN(), Underestimated: []int{}}
	worst := -1.0
	sum, n := 0.0, 0
	for _, rc := range rows {
		if rc.Real != nil && rc.Sim != nil {
			s.Paired++
			if rc.Sim.Peak < rc.Real.Peak {
				s.Underestimated = append(s.Underestimated, rc.Rank)
			}
		}
		if math.IsNaN(rc.PeakErrorPct) {
			continue
		}
		a := math.Abs(rc.PeakErrorPct)
		sum += a
		n++
		if a > worst {
			worst, s.WorstRank = a, rc.Rank
		}
	}
	if n > 0 {
		s.MeanAbsPeakErrorPct = sum / float64(n)
	}
	return s
}

// Resample returns allocated memory at CurvePoints evenly spaced points of
// relative time (0 = the iteration's first sample, 1 = its last), linearly
// interpolated. Samples with NaN time or value are dropped.
func Resample(it *Iteration, n int) []float64 {
	type pt struct{ t, y float64 }
	pts := make([]pt, 0, len(it.T))
	for i := range it.T {
		if !math.IsNaN(it.T[i]) && !math.IsNaN(it.Allocated[i]) {
			pts = append(pts, pt{it.T[i], it.Allocated[i]})
		}
	}
	if len(pts) == 0 || n <= 0 {
		return nil
	}
	sort.SliceStable(pts, func(a, b int) bool { return pts[a].t < pts[b].t })
	out := make([]float64, n)
	t0, t1 := pts[0].t, pts[len(pts)-1].t
	j := 0
	for k := 0; k < n; k++ {
		u := 0.0
		if n > 1 {
			u = float64(k) / float64(n-1)
		}
		x := t0 + u*(t1-t0)
		for j+1 < len(pts)-1 && pts[j+1].t <= x {
			j++
		}
		if len(pts) == 1 || t1 == t0 {
			out[k] = pts[0].y
			continue
		}
		a, b := pts[j], pts[j+1]
		if b.t == a.t {
			out[k] = b.y
			continue
		}
		out[k] = a.y + (b.y-a.y)*((x-a.t)/(b.t-a.t))
	}
	return out
}

// curveError is the mean absolute difference of the two allocated curves on
// a common relative-time axis, as a percentage of the real peak.
func curveError(real, sim *Iteration, realPeak float64) float64 {
	a, b := Resample(real, CurvePoints), Resample(sim, CurvePoints)
	if a == nil || b == nil || realPeak <= 0 {
		return math.NaN()
	}
	sum := 0.0
	for k := range a {
		sum += math.Abs(b[k] - a[k])
	}
	return sum / float64(len(a)) / realPeak * 100
}

// SortByError orders rows by |peak error|, largest first, rows without one
// last, then by rank.
func (c *Comparison) SortByError() {
	slices.SortStableFunc(c.Ranks, func(a, b RankComparison) int {
		if c := ByAbsError(a.PeakErrorPct, b.PeakErrorPct); c != 0 {
			return c
		}
		return a.Rank - b.Rank
	})
}

// ByAbsError orders peak errors largest |error| first, NaN (no error) last;
// 0 for ties.
func ByAbsError(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(math.Abs(b), math.Abs(a))
}
