package plot

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"memscope/internal/palette"
	"memscope/internal/units"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
	"memscope/trace"
)

// Options shape the trace pictures.
type Options struct {
	// ShowTheoretical adds the theoretical memory line (red), as the seed
	// tool's --show-theoretical did.
	ShowTheoretical bool
}

func relTime(it *trace.Iteration) []float64 {
	xs := make([]float64, len(it.T))
	if len(it.T) == 0 {
		return xs
	}
	t0 := it.T[0]
	for i, t := range it.T {
		xs[i] = t - t0
	}
	return xs
}

// RankFigure draws one rank: real allocated memory solid, simulated dashed,
// over time relative to each iteration's start; static memory as a green
// line when known; theoretical memory as a red line when asked.
func RankFigure(rc trace.RankComparison, opt Options) *Figure {
	maxB := 0.0
	for _, s := range []*trace.SideStats{rc.Real, rc.Sim} {
		if s != nil && s.It != nil {
			maxB = math.Max(maxB, trace.Max(s.It.Allocated)*units.MiB)
		}
	}
	unit, div := ByteUnit(maxB)
	conv := func(mib []float64) []float64 {
		out := make([]float64, len(mib))
		for i, v := range mib {
			out[i] = v * units.MiB / div
		}
		return out
	}
	f := &Figure{Kind: Lines, XLabel: "time since the iteration started (s)", YLabel: "allocated memory (" + unit + ")", YUnit: unit}
	f.Title = fmt.Sprintf("Rank %d: real vs simulated memory", rc.Rank)
	if !math.IsNaN(rc.PeakErrorPct) {
		f.Title += fmt.Sprintf(" (peak error %+.2f%%)", rc.PeakErrorPct)
	}
	if rc.Real != nil && rc.Real.It != nil {
		f.Series = append(f.Series, Series{Name: fmt.Sprintf("real (iteration %d)", rc.Real.Iteration), X: relTime(rc.Real.It), Y: conv(rc.Real.It.Allocated), Color: palette.Real})
	}
	if rc.Sim != nil && rc.Sim.It != nil {
		f.Series = append(f.Series, Series{Name: fmt.Sprintf("simulated (iteration %d)", rc.Sim.Iteration), X: relTime(rc.Sim.It), Y: conv(rc.Sim.It.Allocated), Color: palette.Sim, Dashed: true})
	}
	// Static and theoretical memory per side, as the fork's visualizer
	// draws them: real solid, simulated dashed; only values above 0.
	for _, sd := range []struct {
		name   string
		s      *trace.SideStats
		dashed bool
	}{{"Real", rc.Real, false}, {"Sim", rc.Sim, true}} {
		if sd.s == nil {
			continue
		}
		if v := sd.s.Static; v > 0 {
			f.HLines = append(f.HLines, Series{Name: fmt.Sprintf("Static Memory (%s) %s", sd.name, units.BytesF(v*units.MiB)), Y: []float64{v * units.MiB / div}, Color: palette.Static, Dashed: sd.dashed})
		}
		if v := sd.s.Theoretical; opt.ShowTheoretical && v > 0 {
			f.HLines = append(f.HLines, Series{Name: fmt.Sprintf("Theoretical Memory (%s) %s", sd.name, units.BytesF(v*units.MiB)), Y: []float64{v * units.MiB / div}, Color: palette.Theoretical, Dashed: sd.dashed})
		}
	}
	return f
}

// RankComparison saves RankFigure.
func RankComparison(path string, rc trace.RankComparison, opt Options) error {
	return Save(RankFigure(rc, opt), path)
}

// OverviewFigure draws peak real vs simulated memory per rank as bars.
func OverviewFigure(c *trace.Comparison) *Figure {
	maxB := 0.0
	for _, rc := range c.Ranks {
		for _, s := range []*trace.SideStats{rc.Real, rc.Sim} {
			if s != nil {
				maxB = math.Max(maxB, s.Peak*units.MiB)
			}
		}
	}
	unit, div := ByteUnit(maxB)
	f := &Figure{Kind: Bars, Title: "Peak memory per rank: real vs simulated", XLabel: "rank", YLabel: "peak allocated (" + unit + ")", YUnit: unit}
	real := Series{Name: "real", Color: palette.Real}
	sim := Series{Name: "simulated", Color: palette.Sim}
	for _, rc := range c.Ranks {
		f.Labels = append(f.Labels, strconv.Itoa(rc.Rank))
		rv, sv := math.NaN(), math.NaN()
		if rc.Real != nil {
			rv = rc.Real.Peak * units.MiB / div
		}
		if rc.Sim != nil {
			sv = rc.Sim.Peak * units.MiB / div
		}
		real.Y = append(real.Y, rv)
		sim.Y = append(sim.Y, sv)
	}
	f.Series = []Series{real, sim}
	if n := len(c.Summary.Underestimated); n > 0 {
		f.Note = fmt.Sprintf("%d ranks underestimated by the simulation", n)
		if n == 1 {
			f.Note = "1 rank underestimated by the simulation"
		}
	}
	return f
}

// ComparisonOverview saves OverviewFigure.
func ComparisonOverview(path string, c *trace.Comparison) error { return Save(OverviewFigure(c), path) }

// CompareDir writes memory_comparison_rank_{R}.EXT per rank (one-sided
// ranks too, as the fork's visualizer does) and
// memory_comparison_overview.EXT into dir.
func CompareDir(dir, ext string, c *trace.Comparison, opt Options) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for _, rc := range c.Ranks {
		name := fmt.Sprintf("memory_comparison_rank_%d%s", rc.Rank, ext)
		if rc.Sim != nil && rc.SimRank != rc.Rank {
			name = fmt.Sprintf("memory_comparison_rank_%d_sim_%d%s", rc.Rank, rc.SimRank, ext)
		}
		p := filepath.Join(dir, name)
		if err := RankComparison(p, rc, opt); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	p := filepath.Join(dir, "memory_comparison_overview"+ext)
	if err := ComparisonOverview(p, c); err != nil {
		return out, err
	}
	return append(out, p), nil
}

// SnapshotFigures builds the pictures of one device of an allocator
// snapshot: overview, top consumers, category breakdown, size
// distribution, efficiency, and the timeline when there is one. Keys are
// the file names (without extension).
func SnapshotFigures(d *snapshot.DeviceStats, tl *snapshot.Timeline) map[string]*Figure {
	figs := map[string]*Figure{}
	dev := fmt.Sprintf("cuda:%d", d.Device)
	unit, div := ByteUnit(float64(d.ReservedBytes))
	b := func(v int64) float64 { return float64(v) / div }

	// Overview: where the reserved memory went.
	ov := &Figure{Kind: Bars, Title: "Memory overview, " + dev, YLabel: unit, YUnit: unit,
		Labels: []string{"allocated", "cached free", "rounding waste", "pending free"}}
	ov.Series = []Series{{Name: "", Y: []float64{b(d.AllocatedBytes - d.RoundingWaste), b(d.InactiveBytes), b(d.RoundingWaste), b(d.PendingFreeBytes)},
		Colors: []string{palette.Allocated, palette.CachedFree, palette.Rounding, palette.PendingFree}}}
	ov.Note = fmt.Sprintf("reserved %s, allocated %s (%.1f%%)", units.Bytes(d.ReservedBytes), units.Bytes(d.AllocatedBytes), d.EfficiencyPct)
	figs["memory_overview"] = ov

	// Categories.
	// Bars of parts take the unit of their own largest part: 32 MiB
	// blocks on a 3 GiB device read "32 MiB", not "0.03 GiB".
	var catMax int64
	for _, c := range d.Categories {
		catMax = max(catMax, c.Bytes)
	}
	cunit, cdiv := ByteUnit(float64(catMax))
	cat := &Figure{Kind: HBars, Title: "Memory by category, " + dev, XLabel: cunit, YUnit: cunit}
	var cv []float64
	for i := len(d.Categories) - 1; i >= 0; i-- { // largest at the top
		c := d.Categories[i]
		cat.Labels = append(cat.Labels, c.Name)
		cv = append(cv, float64(c.Bytes)/cdiv)
	}
	cat.Series = []Series{{Y: cv, Colors: categoryColors(cat.Labels)}}
	figs["category_breakdown"] = cat

	// Roles: what the memory is, at the peak when there is a trace.
	roles, when := d.Roles, "at the snapshot"
	if tl != nil {
		roles, when = d.Peak.Roles, "at the peak"
	}
	var roleMax int64
	for _, c := range roles {
		roleMax = max(roleMax, c.Bytes)
	}
	runit, rdiv := ByteUnit(float64(roleMax))
	rf := &Figure{Kind: HBars, Title: "Memory by role " + when + ", " + dev, XLabel: runit, YUnit: runit}
	var rv []float64
	for i := len(roles) - 1; i >= 0; i-- {
		rf.Labels = append(rf.Labels, roles[i].Name)
		rv = append(rv, float64(roles[i].Bytes)/rdiv)
	}
	rf.Series = []Series{{Y: rv, Colors: categoryColors(rf.Labels)}}
	figs["role_breakdown"] = rf

	// Top consumers: the live set at the peak (the moment that decides an
	// OOM) when there is a trace, else the snapshot's active blocks.
	live := d.Allocations
	if tl != nil {
		live = tl.PeakLive()
	}
	var topMax int64
	for _, a := range live {
		topMax = max(topMax, a.Size)
	}
	tunit, tdiv := ByteUnit(float64(topMax))
	top := &Figure{Kind: HBars, Title: "Top allocations " + when + ", " + dev + " (role · site)", XLabel: tunit, YUnit: tunit}
	var tv []float64
	var tc []string
	n := min(30, len(live))
	for i := n - 1; i >= 0; i-- {
		a := &live[i]
		loc := a.Location()
		if loc == "" {
			loc = snapshot.NoFrames
		}
		top.Labels = append(top.Labels, shorten(a.Role.String()+" · "+loc, 72))
		tv = append(tv, float64(a.Size)/tdiv)
		tc = append(tc, palette.Category(a.Role.String()))
	}
	top.Series = []Series{{Y: tv, Colors: tc}}
	figs["top_consumers"] = top

	// Size distribution.
	sd := &Figure{Kind: Bars, Title: "Block sizes, " + dev, XLabel: "block size (power-of-two buckets)", YLabel: "blocks"}
	keys := map[int64]bool{}
	for _, h := range []snapshot.Histogram{d.ActiveHist, d.InactiveHist} {
		for _, bk := range h {
			keys[bk.Lo] = true
		}
	}
	var los []int64
	for k := range keys {
		los = append(los, k)
	}
	slices.Sort(los)
	act := Series{Name: "active", Color: palette.Allocated}
	ina := Series{Name: "cached free", Color: palette.CachedFree}
	for _, lo := range los {
		sd.Labels = append(sd.Labels, "≥"+bucketLabel(lo))
		act.Y = append(act.Y, float64(countOf(d.ActiveHist, lo)))
		ina.Y = append(ina.Y, float64(countOf(d.InactiveHist, lo)))
	}
	sd.Series = []Series{act, ina}
	figs["size_distribution"] = sd

	// Efficiency, judged at the peak when there is a trace (as the report
	// and the explorer judge it): memory cached after the peak is kept from
	// the peak, not wasted.
	ef := &Figure{Kind: Bars, Title: fmt.Sprintf("Memory efficiency, %s: %.1f%% (%s)", dev, d.EfficiencyPct, d.Rating), YLabel: unit, YUnit: unit,
		Labels: []string{"reserved", "allocated", "wasted (reserved − allocated)"}}
	ef.Series = []Series{{Y: []float64{b(d.ReservedBytes), b(d.AllocatedBytes), b(d.ReservedBytes - d.AllocatedBytes)},
		Colors: []string{palette.Reserved, palette.Allocated, palette.Rounding}}}
	if pk := &d.Peak; pk.FromTrace {
		ef.Title = fmt.Sprintf("Memory efficiency at the peak, %s: %.1f%% (%s)", dev, pk.EfficiencyPct, pk.Rating)
		ef.Labels = []string{"reserved at the peak", "active at the peak", "free at the peak"}
		ef.Series = []Series{{Y: []float64{b(pk.Reserved), b(pk.Active), b(max(0, pk.Reserved-pk.Active))},
			Colors: []string{palette.Reserved, palette.Allocated, palette.Rounding}}}
		ef.Note = fmt.Sprintf("at the snapshot %.1f%% (%s): %s cached, kept from the peak", d.EfficiencyPct, d.Rating,
			units.Bytes(d.ReservedBytes-d.AllocatedBytes))
	}
	figs["memory_efficiency"] = ef

	if tl != nil {
		figs["memory_timeline"] = TimelineFigure(tl)
	}
	return figs
}

func countOf(h snapshot.Histogram, lo int64) int {
	for _, b := range h {
		if b.Lo == lo {
			return b.Count
		}
	}
	return 0
}

// timelineColumns is how many events a timeline picture samples.
const timelineColumns = 1500

// TimelineFigure draws active memory over the trace events stacked in
// bands by category (as the explorer's Timeline does), the reserved line
// over it and the peak marked. Each of timelineColumns columns takes the
// event with the most active memory in its range, so the peak is drawn.
func TimelineFigure(tl *snapshot.Timeline) *Figure {
	maxB := 0.0
	reserved := tl.ReservedRange(0, len(tl.Active))
	for i := range tl.Active {
		maxB = math.Max(maxB, math.Max(float64(tl.Active[i]), float64(reserved[i])))
	}
	unit, div := ByteUnit(maxB)
	f := &Figure{Kind: Stacked, Title: fmt.Sprintf("Memory timeline, cuda:%d: peak %s at event %d", tl.Device, units.Bytes(tl.Peak.Active), tl.Peak.EventIndex),
		XLabel: "trace event", YLabel: unit, YUnit: unit, Note: timelineNote(tl)}
	n := len(tl.Events)
	cols := min(n, timelineColumns)
	events := make([]int, 0, cols)
	for c := 0; c < cols; c++ {
		lo, hi := c*n/cols, max(c*n/cols+1, (c+1)*n/cols)
		best := lo
		for e := lo; e < hi && e < n; e++ {
			if tl.Active[e] > tl.Active[best] {
				best = e
			}
		}
		events = append(events, best)
	}
	bands := tl.Bands(snapshot.BandCategory, 8)
	totals := tl.Totals(bands, events)
	xs := make([]float64, len(events))
	resv := make([]float64, len(events))
	for k, e := range events {
		xs[k], resv[k] = float64(e), float64(reserved[e])/div
	}
	for b, name := range bands.Names {
		ys := make([]float64, len(events))
		for k := range events {
			ys[k] = float64(totals[k][b]) / div
		}
		f.Series = append(f.Series, Series{Name: name, X: xs, Y: ys, Color: palette.Category(name)})
	}
	f.Overlay = []Series{{Name: "reserved", X: xs, Y: resv, Color: palette.Reserved}}
	f.VLines = []Series{{Name: "peak", X: []float64{float64(max(0, tl.Peak.EventIndex))}, Color: palette.Peak, Dashed: true}}
	return f
}

// Timeline saves TimelineFigure.
func Timeline(path string, tl *snapshot.Timeline) error { return Save(TimelineFigure(tl), path) }

// EstimateFigures builds the phase and merged-module pictures of one device
// of an estimate.
func EstimateFigures(e *estimate.DeviceStats) map[string]*Figure {
	unit, div := ByteUnit(float64(max(e.PeakBytes, e.ListedBytes)))
	ph := &Figure{Kind: HBars, Title: "Estimated memory by phase, " + e.Device, XLabel: unit, YUnit: unit,
		Note: fmt.Sprintf("peak %s; unlisted %s", units.Bytes(e.PeakBytes), units.Bytes(e.UnlistedBytes))}
	var pv []float64
	ph.Labels = append(ph.Labels, "(unlisted)")
	pv = append(pv, float64(e.UnlistedBytes)/div)
	for i := len(e.Phases) - 1; i >= 0; i-- {
		ph.Labels = append(ph.Labels, e.Phases[i].Name)
		pv = append(pv, float64(e.Phases[i].Bytes)/div)
	}
	ph.Series = []Series{{Y: pv, Color: palette.Real}}
	var modMax int64
	for _, m := range e.Modules {
		modMax = max(modMax, m.Bytes)
	}
	munit, mdiv := ByteUnit(float64(modMax))
	mod := &Figure{Kind: HBars, Title: "Estimated memory by module (merged), " + e.Device, XLabel: munit, YUnit: munit}
	var mv []float64
	n := min(30, len(e.Modules))
	for i := n - 1; i >= 0; i-- {
		m := e.Modules[i]
		mod.Labels = append(mod.Labels, fmt.Sprintf("%s ×%d", shorten(m.Pattern, 60), m.Instances))
		mv = append(mv, float64(m.Bytes)/mdiv)
	}
	mod.Series = []Series{{Y: mv, Color: palette.Sim}}
	return map[string]*Figure{"estimate_phases": ph, "estimate_modules": mod}
}

// saveAll writes figures as prefix+name+ext, in a stable order.
func saveAll(prefix, ext string, figs map[string]*Figure) ([]string, error) {
	var names []string
	for n := range figs {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		p := prefix + n + ext
		if err := Save(figs[n], p); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// SnapshotPlots writes the snapshot pictures as base_NAME.png.
func SnapshotPlots(base string, d *snapshot.DeviceStats, tl *snapshot.Timeline) ([]string, error) {
	return saveAll(base+"_", ".png", SnapshotFigures(d, tl))
}

// EstimatePlots writes the estimate pictures as base_NAME.png.
func EstimatePlots(base string, e *estimate.DeviceStats) ([]string, error) {
	return saveAll(base+"_", ".png", EstimateFigures(e))
}

// ReportDir writes the pictures of a report into dir: NAME.EXT for a single
// device, NAME_cudaN.EXT when there are several.
func ReportDir(dir, ext string, a *snapshot.Analysis, e *estimate.Analysis) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	if a != nil {
		for i := range a.Devices {
			d := &a.Devices[i]
			flame := filepath.Join(dir, "flame.svg")
			if len(a.Devices) > 1 {
				flame = filepath.Join(dir, fmt.Sprintf("flame_cuda%d.svg", d.Device))
			}
			when := "at the peak"
			if a.Timeline(d.Device) == nil {
				when = "at the snapshot"
			}
			title := fmt.Sprintf("Memory live %s, cuda:%d: %s by call stack", when, d.Device, units.Bytes(d.Peak.Active))
			if err := FlameFile(flame, snapshot.FlameTree(a.PeakLive(d)), title); err != nil {
				return out, err
			}
			out = append(out, flame)
			prefix := filepath.Join(dir, "")
			if len(a.Devices) > 1 {
				figs := SnapshotFigures(d, a.Timeline(d.Device))
				renamed := map[string]*Figure{}
				for k, v := range figs {
					renamed[fmt.Sprintf("%s_cuda%d", k, d.Device)] = v
				}
				ps, err := saveAll(prefix+string(filepath.Separator), ext, renamed)
				out = append(out, ps...)
				if err != nil {
					return out, err
				}
				continue
			}
			ps, err := saveAll(prefix+string(filepath.Separator), ext, SnapshotFigures(d, a.Timeline(d.Device)))
			out = append(out, ps...)
			if err != nil {
				return out, err
			}
		}
	}
	if e != nil {
		for i := range e.Devices {
			figs := EstimateFigures(&e.Devices[i])
			if len(e.Devices) > 1 {
				renamed := map[string]*Figure{}
				for k, v := range figs {
					renamed[k+"_"+sanitize(e.Devices[i].Device)] = v
				}
				figs = renamed
			}
			ps, err := saveAll(dir+string(filepath.Separator), ext, figs)
			out = append(out, ps...)
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func sanitize(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == ':' || r == '/' || r == ' ' {
			r = '_'
		}
		out = append(out, r)
	}
	return string(out)
}

func timelineNote(tl *snapshot.Timeline) string {
	switch {
	case tl.Complete:
		return "exact: the trace covers the whole run"
	case tl.EndActive != tl.SnapshotActive:
		return "memory changed after recording stopped; levels follow the trace"
	}
	return fmt.Sprintf("the trace starts mid-run: %s was allocated before it", units.Bytes(tl.BaseActive))
}

// bucketLabel names a power-of-two bucket's lower bound without decimals:
// "4 KiB", "256 KiB", "1 MiB".
func bucketLabel(lo int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if lo >= u.size && lo%u.size == 0 {
			return strconv.FormatInt(lo/u.size, 10) + " " + u.name
		}
	}
	return units.Bytes(lo)
}
