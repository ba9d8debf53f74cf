package tui

import (
	"fmt"
	"math"
	"strings"

	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
	"memscope/internal/units"
	"memscope/trace"
	"memscope/tui/widget"
)

// The Traces tab's views of one rank (the detail, real against simulated)
// and of every rank at once (the heat map).

func (t *tracesTab) detailView(c *tabContext) string {
	th := c.th
	r := t.cur()
	if r == nil {
		t.mode = modeList
		return t.listView(c)
	}
	realIt := r.realIt
	if r.real != nil && t.iterIdx >= 0 && t.iterIdx < len(r.real.Iterations) {
		realIt = &r.real.Iterations[t.iterIdx]
	}
	simIt := r.simIt
	steps := (realIt != nil && realIt.X == trace.Steps) || (simIt != nil && simIt.X == trace.Steps)
	var series []widget.Series
	ymin, ymax := math.Inf(1), math.Inf(-1)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	add := func(it *trace.Iteration, ys []float64, st lipgloss.Style, dash int) {
		if it == nil || len(it.T) == 0 {
			return
		}
		xs := make([]float64, len(it.T))
		t0, t1 := it.T[0], it.T[len(it.T)-1]
		for i, x := range it.T {
			switch {
			case steps:
				xs[i] = x
			case t.relTime && t1 > t0:
				xs[i] = (x - t0) / (t1 - t0)
			case !t.relTime:
				xs[i] = x - t0
			}
		}
		for _, v := range ys {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
			}
		}
		xmin, xmax = math.Min(xmin, xs[0]), math.Max(xmax, xs[len(xs)-1])
		series = append(series, widget.Series{Xs: xs, Ys: ys, Style: st, Dash: dash})
	}
	if t.showResv {
		if realIt != nil {
			add(realIt, realIt.Reserved, th.Fg(palette.Reserved), 0)
		}
		if simIt != nil {
			add(simIt, simIt.Reserved, th.Fg(palette.Reserved).Faint(true), widget.DashDashed)
		}
	}
	if simIt != nil {
		add(simIt, simIt.Allocated, th.Fg(palette.Sim), widget.DashDashed)
	}
	if realIt != nil && realIt.Active != nil {
		add(realIt, realIt.Active, th.Fg(palette.Real).Faint(true), widget.DashDotted)
	}
	if realIt != nil {
		add(realIt, realIt.Allocated, th.Fg(palette.Real), 0)
	}
	// Static and theoretical memory per side: real solid, simulated
	// dotted; only values above 0 are lines.
	realStatic, realTheo := r.realStatic, r.realTheo
	if realIt != nil && realIt != r.realIt {
		realStatic, realTheo = realIt.Static, realIt.Theoretical
	}
	var lines []widget.Line
	var legendLines []string
	for _, l := range []struct {
		v      float64
		name   string
		color  string
		dotted bool
		show   bool
	}{
		{realStatic, "static (real)", palette.Static, false, true},
		{r.simStatic, "static (sim)", palette.Static, true, true},
		{realTheo, "theoretical (real)", palette.Theoretical, false, t.showTheo},
		{r.simTheo, "theoretical (sim)", palette.Theoretical, true, t.showTheo},
	} {
		if !l.show || !(l.v > 0) {
			continue
		}
		lines = append(lines, widget.Line{At: l.v, Style: th.Fg(l.color), Dotted: l.dotted})
		ymin, ymax = math.Min(ymin, l.v), math.Max(ymax, l.v)
		glyph := "━ "
		if l.dotted {
			glyph = "┄ "
		}
		legendLines = append(legendLines, th.Fg(l.color).Render(glyph+l.name+" "+mibStr(l.v)))
	}
	// Allocation retries and OOMs (torchtitan exports) at their steps.
	var marks []string
	for _, it := range []*trace.Iteration{realIt, simIt} {
		if it == nil || !steps {
			continue
		}
		for _, mk := range it.Marks {
			st := th.Warn
			if mk.OOM {
				st = th.Err
			}
			lines = append(lines, widget.Line{At: mk.X, Vert: true, Style: st, Dotted: !mk.OOM})
			marks = append(marks, st.Render(fmt.Sprintf("│ step %.0f: %s", mk.X, mk.Label)))
		}
	}
	ymin, ymax = niceRange(ymin, ymax)
	switch {
	case t.relTime && !steps:
		xmin, xmax = 0, 1
	case math.IsInf(xmin, 0):
		xmin, xmax = 0, 1
	}
	errPct, curvePct, durRatio := trace.CompareIterations(realIt, simIt)
	var b strings.Builder
	title := fmt.Sprintf("Rank %d", r.rank)
	dur := func(it *trace.Iteration) string {
		if steps {
			return fmt.Sprintf(" (%d samples)", len(it.T))
		}
		return fmt.Sprintf(" (%.2fs, %d samples)", it.Duration(), len(it.T))
	}
	if realIt != nil {
		title += fmt.Sprintf(" · real iteration %s", realIt.Key)
		if r.real != nil && len(r.real.Iterations) > 1 {
			title += fmt.Sprintf(" [ ] of %d", len(r.real.Iterations))
		}
		title += dur(realIt)
	}
	if simIt != nil {
		title += " · sim iteration " + simIt.Key + dur(simIt)
	}
	if !math.IsNaN(durRatio) && !steps {
		title += " · sim/real time " + ratioStr(durRatio)
	}
	b.WriteString(widget.Fit(th.Bold.Render(title), t.w) + "\n")
	legend := []string{th.Fg(palette.Real).Render("━ real allocated")}
	if simIt != nil {
		legend = append(legend, th.Fg(palette.Sim).Render("┄ simulated allocated"))
	}
	if realIt != nil && realIt.Active != nil {
		legend = append(legend, th.Fg(palette.Real).Faint(true).Render("┈ real max active"))
	}
	legend = append(legend, legendLines...)
	legend = append(legend, marks...)
	if t.showTheo && !(realTheo > 0) && !(r.simTheo > 0) {
		legend = append(legend, th.Dim.Render("theoretical: not in the files"))
	}
	if t.showResv {
		legend = append(legend, th.Fg(palette.Reserved).Render("━ reserved (device)"))
		if simIt != nil {
			legend = append(legend, th.Fg(palette.Reserved).Faint(true).Render("┄ simulated reserved"))
		}
	}
	b.WriteString(widget.Fit(strings.Join(legend, "  "), t.w) + "\n")
	xfmt := func(_ int, v float64) string { return fmt.Sprintf("%.2fs", v) }
	switch {
	case steps:
		xfmt = func(_ int, v float64) string { return fmt.Sprintf("%.0f", v) }
	case t.relTime:
		xfmt = func(_ int, v float64) string { return fmt.Sprintf("%.0f%%", v*100) }
	}
	yfmt := func(_ int, v float64) string { return units.BytesF(v * units.MiB) }
	chartH := max(4, t.h-6)
	b.WriteString(widget.Chart(widget.ChartSpec{W: t.w, H: chartH, Xmin: xmin, Xmax: xmax, Ymin: ymin, Ymax: ymax,
		XFmt: xfmt, YFmt: yfmt, Series: series, Lines: lines, Axis: th.Dim, Label: th.Dim}) + "\n")
	// The statistics are those of the iterations on screen.
	realPeak, simPeak := math.NaN(), math.NaN()
	if realIt != nil {
		realPeak = realIt.Peak()
	}
	if simIt != nil {
		simPeak = simIt.Peak()
	}
	es, est := errStyle(th, errPct)
	stats := fmt.Sprintf("real peak %s · sim peak %s · peak error %s · curve error %s", mibStr(realPeak), mibStr(simPeak),
		est.Render(strings.TrimSpace(es)), pctStr(curvePct))
	if realIt != nil && realIt.PeakCumulative {
		stats += th.Warn.Render(fmt.Sprintf(" · file peak %s is cumulative: max sample used", mibStr(realIt.FilePeak)))
	}
	b.WriteString(widget.Fit(stats, t.w) + "\n")
	xl := "x: seconds since each iteration's start (x: % of each)"
	switch {
	case steps:
		xl = "x: step / iteration"
	case t.relTime:
		xl = "x: % of each iteration (x: seconds)"
	}
	b.WriteString(th.Dim.Render(widget.Fit(xl+" · esc back · ↑↓ rank · t theoretical · r reserved · [ ] iteration", t.w)))
	return b.String()
}

func pctStr(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f%%", v)
}

var heatRunes = []rune(" ░▒▓█")

func (t *tracesTab) heatmapView(c *tabContext) string {
	th := c.th
	var b strings.Builder
	which := "real"
	if t.heatSim {
		which = "simulated"
	}
	b.WriteString(widget.Fit(th.Bold.Render("Rank × time heatmap")+fmt.Sprintf(" · %s allocated memory, %s (dark) … %s (bright) · v real/sim · h or esc back",
		which, mibStr(t.lo), mibStr(t.hi)), t.w) + "\n")
	cols := max(4, t.w-6)
	from, to := t.list.Visible()
	lo, hi := "0s", fmt.Sprintf("%.2fs", t.span)
	if t.span == 0 && t.stepHi >= t.stepLo {
		lo, hi = fmt.Sprintf("step %.0f", t.stepLo), fmt.Sprintf("step %.0f", t.stepHi)
	}
	b.WriteString(th.Dim.Render(widget.Fit(fmt.Sprintf("%4s  %s%s%s", "RANK", lo, strings.Repeat(" ", max(0, cols-len(lo)-len(hi))), hi), t.w)) + "\n")
	for i := from; i < to; i++ {
		r := &t.rows[i]
		it := r.realIt
		if t.heatSim {
			it = r.simIt
		}
		var cells strings.Builder
		if it == nil {
			cells.WriteString(th.Dim.Render(widget.Fit("(no trace)", cols)))
		} else {
			for _, v := range t.columns(it, cols) {
				cells.WriteString(heatCell(th, v, t.lo, t.hi))
			}
		}
		label := fmt.Sprintf("%4d  ", r.rank)
		if i == t.list.Cursor {
			label = th.Sel.Render(label)
		}
		b.WriteString(label + cells.String() + "\n")
	}
	for i := to - from; i < t.list.Height; i++ {
		b.WriteString("\n")
	}
	b.WriteString(th.Dim.Render(t.list.Hint()))
	return b.String()
}

// heatCell draws one heatmap cell: a colour ramp, or shade characters
// under NO_COLOR.
func heatCell(th widget.Theme, v, lo, hi float64) string {
	if math.IsNaN(v) {
		return " "
	}
	f := 0.0
	if hi > lo {
		f = (v - lo) / (hi - lo)
	}
	f = max(0, min(1, f))
	if th.NoColor {
		return string(heatRunes[int(math.Round(f*float64(len(heatRunes)-1)))])
	}
	return lipgloss.NewStyle().Foreground(lipgloss.Color(ramp(f))).Render("█")
}

// ramp maps 0..1 onto a perceptual colour ramp (viridis-like).
func ramp(f float64) string {
	stops := [][3]float64{{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}
	x := f * float64(len(stops)-1)
	i := int(x)
	if i >= len(stops)-1 {
		i = len(stops) - 2
	}
	u := x - float64(i)
	c := [3]int{}
	for k := 0; k < 3; k++ {
		c[k] = int(stops[i][k] + (stops[i+1][k]-stops[i][k])*u)
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

// niceRange pads [lo, hi] a little so lines do not run along the frame.
func niceRange(lo, hi float64) (float64, float64) {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return 0, 1
	}
	if hi <= lo {
		return lo - 1, hi + 1
	}
	pad := (hi - lo) * 0.05
	return math.Max(0, lo-pad), hi + pad
}
