package trace

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
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
	// MaxActive is NaN unless the source gives active memory apart.
	MaxActive   float64
	Static      float64 // Unset when absent
	Theoretical float64 // Unset when absent
	// It is the compared iteration.
	It *Iteration
	// Warnings are the file's (skipped samples, a cumulative peak, fields
	// not understood).
	Warnings []string
}

// RankComparison is one row of a comparison. Real or Sim is nil when that
// side has no trace for the rank; the errors are NaN when undefined.
type RankComparison struct {
	Rank          int
	Real, Sim     *SideStats
	PeakErrorPct  float64
	CurveErrorPct float64
	// DurationRatio is the simulated iteration's duration over the real
	// one's.
	DurationRatio float64
	// SimRank is the simulated rank paired with Rank (equal unless --pair
	// said otherwise).
	SimRank int
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

// Pairing maps real ranks to the simulated ranks they are compared with,
// for runs whose rank numbers differ. Ranks not in it pair by equal numbers.
type Pairing map[int]int

// ParsePairing reads "R:S[,R:S...]" (real rank R against simulated rank S).
func ParsePairing(s string) (Pairing, error) {
	p := Pairing{}
	if s == "" {
		return p, nil
	}
	usedSim := map[int]int{}
	for _, part := range strings.Split(s, ",") {
		var r, sim int
		if n, err := fmt.Sscanf(strings.TrimSpace(part), "%d:%d", &r, &sim); n != 2 || err != nil || r < 0 || sim < 0 {
			return nil, fmt.Errorf("--pair: %q is not REAL:SIM (two rank numbers)", part)
		}
		if _, dup := p[r]; dup {
			return nil, fmt.Errorf("--pair: real rank %d is paired twice", r)
		}
		if prev, dup := usedSim[sim]; dup {
			return nil, fmt.Errorf("--pair: simulated rank %d is paired with real ranks %d and %d", sim, prev, r)
		}
		p[r], usedSim[sim] = sim, r
	}
	return p, nil
}

// Compare pairs the ranks of real and sim by rank number (or as pairs says)
// and compares them on one iteration: iteration (when >= 0, on each side
// that has it; a side with a single iteration uses that one) or else each
// side's last. Ranks are never paired by position: a real rank 0 and a
// simulated rank 3 stay apart unless pairs joins them.
func Compare(real, sim *Set, iteration int, pairs Pairing) *Comparison {
	c := &Comparison{}
	c.Errors = append(c.Errors, real.Errors...)
	c.Errors = append(c.Errors, sim.Errors...)
	simToReal := map[int]int{}
	for r, s := range pairs {
		simToReal[s] = r
	}
	byRank := map[int]*RankComparison{}
	get := func(n int) *RankComparison {
		if rc := byRank[n]; rc != nil {
			return rc
		}
		rc := &RankComparison{Rank: n, SimRank: n, PeakErrorPct: math.NaN(), CurveErrorPct: math.NaN(), DurationRatio: math.NaN()}
		byRank[n] = rc
		return rc
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
		if rr, ok := simToReal[n]; ok {
			n = rr
		} else if _, taken := pairs[n]; taken {
			// Real rank n is paired with another simulated rank: this one
			// stands alone, under its own number but apart.
			n = -1 - n
		}
		rc := get(n)
		rc.Sim, rc.SimRank = st, r.Rank
		if n < 0 {
			rc.Rank = r.Rank
		}
	}
	for r, s := range pairs {
		if rc := byRank[r]; rc == nil || rc.Real == nil || rc.Sim == nil {
			c.Notes = append(c.Notes, fmt.Sprintf("--pair %d:%d: no such real or simulated rank", r, s))
		} else if r != s {
			c.Notes = append(c.Notes, fmt.Sprintf("real rank %d compared with simulated rank %d (--pair)", r, s))
		}
	}
	slices.Sort(c.Notes)
	for _, rc := range byRank {
		c.Ranks = append(c.Ranks, *rc)
	}
	slices.SortFunc(c.Ranks, func(a, b RankComparison) int {
		if a.Rank != b.Rank {
			return a.Rank - b.Rank
		}
		return a.SimRank - b.SimRank
	})
	for i := range c.Ranks {
		rc := &c.Ranks[i]
		if rc.Real == nil || rc.Sim == nil {
			continue
		}
		rc.PeakErrorPct, rc.CurveErrorPct, rc.DurationRatio = CompareIterations(rc.Real.It, rc.Sim.It)
	}
	c.Summary = summarize(c.Ranks)
	return c
}

// CompareIterations gives the peak error (simulated over real peak, minus
// one, in percent), the curve error and the duration ratio (simulated over
// real duration) of two iterations; NaN where undefined.
func CompareIterations(real, sim *Iteration) (peakErrPct, curveErrPct, durRatio float64) {
	peakErrPct, curveErrPct, durRatio = math.NaN(), math.NaN(), math.NaN()
	if real == nil || sim == nil {
		return
	}
	// Step-based series (logs, exports) have no time: no ratio.
	if d := real.Duration(); d > 0 && real.X == Seconds && sim.X == Seconds {
		durRatio = sim.Duration() / d
	}
	rp, sp := real.Peak(), sim.Peak()
	if rp > 0 && !math.IsNaN(sp) {
		peakErrPct = (sp - rp) / rp * 100
		curveErrPct = curveError(real, sim, rp)
	}
	return
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
	dur := it.Duration()
	if it.X == Steps {
		dur = math.NaN() // steps, not seconds
	}
	return &SideStats{
		Path: r.Path, Iteration: it.Num, Samples: len(it.T), Duration: dur, Peak: it.Peak(),
		MaxAllocated: maxOf(it.Allocated), MaxReserved: maxOf(it.Reserved), MaxActive: maxOf(it.Active),
		Static: it.Static, Theoretical: it.Theoretical, It: it, Warnings: r.Warnings,
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
			if !math.IsNaN(rc.PeakErrorPct) && rc.Sim.Peak < rc.Real.Peak {
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
