package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"memscope/internal/textsafe"
	"memscope/internal/units"
)

// JSON shapes of `memscope compare --json`, documented in the README.
type jsonCompare struct {
	Ranks   []jsonRank  `json:"ranks"`
	Summary jsonSummary `json:"summary"`
	Errors  []jsonError `json:"errors"`
}

type jsonRank struct {
	Rank          int       `json:"rank"`
	Real          *jsonSide `json:"real"`
	Sim           *jsonSide `json:"sim"`
	PeakErrorPct  *float64  `json:"peak_error_pct"`
	CurveErrorPct *float64  `json:"curve_error_pct"`
	DurationRatio *float64  `json:"duration_ratio"`
}

type jsonSide struct {
	Path             string   `json:"path"`
	Iteration        int      `json:"iteration"`
	Samples          int      `json:"samples"`
	DurationS        *float64 `json:"duration_s"`
	PeakBytes        *int64   `json:"peak_bytes"`
	FilePeakBytes    *int64   `json:"file_peak_bytes"`
	PeakCumulative   bool     `json:"peak_cumulative"`
	MaxAllocated     *int64   `json:"max_allocated_bytes"`
	MaxReserved      *int64   `json:"max_reserved_bytes"`
	MaxActive        *int64   `json:"max_active_bytes"`
	StaticBytes      *int64   `json:"static_bytes"`
	TheoreticalBytes *int64   `json:"theoretical_bytes"`
	Warnings         []string `json:"warnings"`
}

type jsonSummary struct {
	Ranks               int      `json:"ranks"`
	Paired              int      `json:"paired"`
	WorstRank           *int     `json:"worst_rank"`
	MeanAbsPeakErrorPct *float64 `json:"mean_abs_peak_error_pct"`
	Underestimated      []int    `json:"underestimated_ranks"`
}

type jsonError struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// bytesOf converts MiB to whole bytes (rounded); nil for NaN or negative
// (unset) values.
func bytesOf(mib float64) *int64 {
	if math.IsNaN(mib) || math.IsInf(mib, 0) || mib < 0 {
		return nil
	}
	b := units.MiBToBytes(mib)
	return &b
}

func floatOrNil(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// secondsOrNil rounds a time in seconds to microseconds (the samples'
// own precision), so 0.85 s is not written as 0.8499999999999996.
func secondsOrNil(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	r := math.Round(f*1e6) / 1e6
	return &r
}

func sideJSON(s *SideStats) *jsonSide {
	if s == nil {
		return nil
	}
	j := &jsonSide{Path: s.Path, Iteration: s.Iteration, Samples: s.Samples, DurationS: secondsOrNil(s.Duration),
		PeakBytes: bytesOf(s.Peak), MaxAllocated: bytesOf(s.MaxAllocated), MaxReserved: bytesOf(s.MaxReserved), MaxActive: bytesOf(s.MaxActive),
		StaticBytes: bytesOf(s.Static), TheoreticalBytes: bytesOf(s.Theoretical), Warnings: s.Warnings}
	if s.It != nil {
		j.FilePeakBytes, j.PeakCumulative = bytesOf(s.It.FilePeak), s.It.PeakCumulative
	}
	if j.Warnings == nil {
		j.Warnings = []string{}
	}
	return j
}

// WriteJSON writes the comparison as the documented JSON.
func (c *Comparison) WriteJSON(w io.Writer) error {
	out := jsonCompare{Ranks: []jsonRank{}, Errors: []jsonError{}}
	for _, rc := range c.Ranks {
		out.Ranks = append(out.Ranks, jsonRank{Rank: rc.Rank, Real: sideJSON(rc.Real), Sim: sideJSON(rc.Sim),
			PeakErrorPct: floatOrNil(rc.PeakErrorPct), CurveErrorPct: floatOrNil(rc.CurveErrorPct), DurationRatio: floatOrNil(rc.DurationRatio)})
	}
	s := c.Summary
	out.Summary = jsonSummary{Ranks: s.Ranks, Paired: s.Paired, MeanAbsPeakErrorPct: floatOrNil(s.MeanAbsPeakErrorPct),
		Underestimated: s.Underestimated}
	if s.WorstRank >= 0 {
		wr := s.WorstRank
		out.Summary.WorstRank = &wr
	}
	for _, e := range c.Errors {
		out.Errors = append(out.Errors, jsonError{Path: e.Path, Error: e.Err.Error()})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func mib(v float64) string {
	if math.IsNaN(v) || v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%+.2f%%", v)
}

func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return fmt.Sprintf("%.2fx", v)
}

// WriteText writes the comparison as a table, one row per rank, then the
// figures that differ per side, the summary and any errors.
func (c *Comparison) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	fmt.Fprintf(&b, "%7s  %12s %12s %9s %8s %8s  %12s %12s %12s  %s\n", "RANK", "REAL PEAK", "SIM PEAK", "ERROR", "CURVE", "TIME S/R",
		"STATIC", "THEORETICAL", "REAL RESV", "ITER (REAL/SIM), SAMPLES")
	fmt.Fprintf(&b, "%7s  %12s %12s %9s %8s %8s  %12s %12s %12s\n", "", "MiB", "MiB", "", "", "", "MiB", "MiB", "MiB")
	var sides []string
	for _, rc := range c.Ranks {
		rp, sp, st, th, rr := math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		iters := ""
		if rc.Real != nil {
			rp, st, th, rr = rc.Real.Peak, rc.Real.Static, rc.Real.Theoretical, rc.Real.MaxReserved
			iters = fmt.Sprintf("%d/", rc.Real.Iteration)
		} else {
			iters = "—/"
		}
		if rc.Sim != nil {
			sp = rc.Sim.Peak
			if st < 0 || math.IsNaN(st) {
				st = rc.Sim.Static
			}
			if th < 0 || math.IsNaN(th) {
				th = rc.Sim.Theoretical
			}
			iters += fmt.Sprint(rc.Sim.Iteration)
		} else {
			iters += "—"
		}
		var samples string
		switch {
		case rc.Real == nil:
			samples = fmt.Sprintf("%d  (simulation only)", rc.Sim.Samples)
		case rc.Sim == nil:
			samples = fmt.Sprintf("%d  (real only)", rc.Real.Samples)
		default:
			samples = fmt.Sprintf("%d/%d", rc.Real.Samples, rc.Sim.Samples)
		}
		label := fmt.Sprint(rc.Rank)
		if rc.Sim != nil && rc.SimRank != rc.Rank {
			label = fmt.Sprintf("%d:%d", rc.Rank, rc.SimRank)
		}
		fmt.Fprintf(&b, "%7s  %12s %12s %9s %8s %8s  %12s %12s %12s  %s, %s\n", label, mib(rp), mib(sp), pct(rc.PeakErrorPct),
			strings.TrimPrefix(pct(rc.CurveErrorPct), "+"), ratio(rc.DurationRatio), mib(st), mib(th), mib(rr), iters, samples)
		sides = append(sides, perSideNotes(rc)...)
	}
	if len(sides) > 0 {
		b.WriteString("\n")
		for _, l := range sides {
			b.WriteString(l + "\n")
		}
	}
	s := c.Summary
	fmt.Fprintf(&b, "\n%d ranks, %d paired", s.Ranks, s.Paired)
	if s.WorstRank >= 0 {
		for _, rc := range c.Ranks {
			if rc.Rank == s.WorstRank {
				fmt.Fprintf(&b, "; worst rank %d (%s)", s.WorstRank, pct(rc.PeakErrorPct))
			}
		}
		fmt.Fprintf(&b, "; mean |peak error| %s", strings.TrimPrefix(pct(s.MeanAbsPeakErrorPct), "+"))
	}
	b.WriteString("\n")
	if len(s.Underestimated) > 0 {
		fmt.Fprintf(&b, "UNDERESTIMATED by the simulation (the plan would run out of memory): ranks %s\n", joinInts(s.Underestimated))
	} else if s.Paired > 0 {
		b.WriteString("no rank is underestimated by the simulation\n")
	}
	for _, e := range c.Errors {
		fmt.Fprintf(&b, "error: %v\n", e.Err)
	}
	_, err := io.WriteString(w, textsafe.Lines(b.String()))
	return err
}

// perSideNotes says what the table's single columns hide: static or
// theoretical memory that differs between the sides, and a peak taken from
// the samples because the file's was cumulative.
func perSideNotes(rc RankComparison) []string {
	var out []string
	if rc.Real != nil && rc.Sim != nil {
		for _, f := range []struct {
			name string
			r, s float64
		}{{"static", rc.Real.Static, rc.Sim.Static}, {"theoretical", rc.Real.Theoretical, rc.Sim.Theoretical}} {
			if f.r != f.s {
				out = append(out, fmt.Sprintf("rank %d: %s memory real %s MiB, simulated %s MiB", rc.Rank, f.name, mib(f.r), mib(f.s)))
			}
		}
	}
	for _, sd := range []struct {
		name string
		s    *SideStats
	}{{"real", rc.Real}, {"simulated", rc.Sim}} {
		if sd.s != nil && sd.s.It != nil && sd.s.It.PeakCumulative {
			out = append(out, fmt.Sprintf("rank %d %s: peak_allocated_MB %s is cumulative (the same in the next or previous iteration, above this one's samples): the iteration's own maximum %s is used",
				rc.Rank, sd.name, mib(sd.s.It.FilePeak), mib(sd.s.Peak)))
		}
	}
	return out
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
