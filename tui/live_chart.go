package tui

import (
	"fmt"
	"math"
	"strings"

	"charm.land/bubbles/v2/key"

	"memscope/internal/textsafe"
	"memscope/nvml"
	"memscope/tui/widget"
)

// liveMetric is what the Live chart plots.
type liveMetric int

const (
	lmMemory liveMetric = iota
	lmUtil
	lmPower
	lmCount
)

func (m liveMetric) String() string {
	return [...]string{"memory", "utilisation", "power"}[m]
}

var (
	lkMetric = key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "chart: memory / utilisation / power"))
	lkView   = key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "chart: the selected GPU over the others (faint) / one small chart per GPU"))
)

// fig reads the chart's figure from a sample (NaN: not supported).
func (m liveMetric) fig(s *nvml.Sample) float64 {
	switch m {
	case lmUtil:
		return s.UtilGPU
	case lmPower:
		return s.PowerW
	}
	return float64(s.Used)
}

// yRange is the chart's vertical range: memory up to the largest GPU,
// utilisation to 100%, power to the highest limit (or reading).
func (t *liveTab) yRange(devs []nvml.Device) (float64, func(int, float64) string) {
	switch t.metric {
	case lmUtil:
		return 100, func(_ int, v float64) string { return fmt.Sprintf("%.0f%%", v) }
	case lmPower:
		top := 0.0
		for _, d := range devs {
			if s := t.latest(d.Index); s != nil {
				for _, v := range []float64{s.PowerLimitW, s.PowerW} {
					if !math.IsNaN(v) {
						top = math.Max(top, v)
					}
				}
			}
		}
		return math.Max(top, 1), func(_ int, v float64) string { return fmt.Sprintf("%.0fW", v) }
	}
	top := 0.0
	for _, d := range devs {
		if s := t.latest(d.Index); s != nil {
			top = math.Max(top, float64(s.Total))
		}
	}
	return math.Max(top, 1), func(_ int, v float64) string { return bytesStr(int64(v)) }
}

// timeAxis picks one unit for every x label from the span shown: seconds
// up to three minutes, minutes up to three hours, then hours.
func timeAxis(span float64) (unit string, fmtX func(int, float64) string) {
	div := 1.0
	unit = "s"
	switch {
	case span > 3*3600:
		div, unit = 3600, "h"
	case span > 180:
		div, unit = 60, "m"
	}
	// Whole units once the axis spans five of them.
	whole := span/div >= 5
	return unit, func(_ int, v float64) string {
		x := v / div
		if math.Abs(x) < 0.05 {
			return "now"
		}
		if whole || math.Abs(x-math.Round(x)) < 0.05 {
			return fmt.Sprintf("%.0f%s", math.Round(x), unit)
		}
		return fmt.Sprintf("%.1f%s", x, unit)
	}
}

// chartSpan is the seconds of history the x axis covers: all of it once it
// is longer than the ten seconds the axis starts with.
func chartSpan(series ...[]float64) float64 {
	span := 10.0
	for _, xs := range series {
		if len(xs) > 0 {
			span = math.Max(span, -xs[0])
		}
	}
	return span
}

// chart draws the Live chart in h lines, its legend included: the focused
// GPU's processes, one small chart per GPU, or every GPU in one chart with
// the selected one drawn over the others (faint and dotted).
func (t *liveTab) chart(c *tabContext, devs []nvml.Device, h int) string {
	switch {
	case t.focus && t.metric == lmMemory && len(devs) == 1:
		return t.processChart(c, devs[0], h)
	case t.multiples && len(devs) > 1:
		if s, ok := t.smallMultiples(c, devs, h); ok {
			return s
		}
		// Asked for, but no room: say so where the switch is named.
		return t.overlayChart(c, devs, h, c.th.Warn.Render("v: one chart per GPU needs a taller window"))
	}
	return t.overlayChart(c, devs, h, "v: a chart per GPU")
}

// overlayChart draws every GPU in one chart; view names what v does.
func (t *liveTab) overlayChart(c *tabContext, devs []nvml.Device, h int, view string) string {
	th := c.th
	sel := t.state.Devices[t.sel].Index
	var series []widget.Series
	var xss [][]float64
	var selSeries *widget.Series
	var selLast float64
	for i, d := range devs {
		xs, ys := t.sampler.SeriesOf(d.Index, 2*t.w, t.metric.figOf())
		if len(xs) == 0 {
			continue
		}
		xss = append(xss, xs)
		s := widget.Series{Xs: xs, Ys: ys, Style: th.Fg(gpuColor(i))}
		if d.Index == sel || len(devs) == 1 {
			selSeries, selLast = &s, ys[len(ys)-1]
			continue
		}
		// The others stay visible as context, quietly.
		s.Style, s.Dash = th.Dim, widget.DashDotted
		series = append(series, s)
	}
	if selSeries != nil {
		series = append(series, *selSeries) // drawn last: on top
	}
	ymax, yfmt := t.yRange(devs)
	span := chartSpan(xss...)
	unit, xfmt := timeAxis(span)
	out := widget.Chart(widget.ChartSpec{W: t.w, H: h - 1, Xmin: -span, Xmax: 0, Ymin: 0, Ymax: ymax, XFmt: xfmt, YFmt: yfmt,
		Series: series, Axis: th.Dim, Label: th.Dim})
	// Legend: what each line is, told apart by pattern as well as colour.
	selName := fmt.Sprintf("GPU %d", sel)
	legend := t.metric.String() + " · " + th.Fg(gpuColor(t.sel)).Render("━ "+selName) + " " + t.metricValue(selLast)
	if len(devs) > 1 {
		if view != "v: a chart per GPU" {
			legend = view + " · " + legend // first: a narrow window cuts the end
		} else {
			legend += " · " + th.Dim.Render(fmt.Sprintf("┈ the other %d GPUs", len(series)-1)) + " · ←/→ selects · " + view
		}
	}
	legend += fmt.Sprintf(" · x: %s ago · m: %s", unitName(unit), nextMetric(t.metric))
	return out + "\n" + widget.Fit(legend, t.w)
}

func (m liveMetric) figOf() func(*nvml.Sample) float64 { return m.fig }

func nextMetric(m liveMetric) liveMetric { return (m + 1) % lmCount }

func unitName(u string) string {
	return map[string]string{"s": "seconds", "m": "minutes", "h": "hours"}[u]
}

func (t *liveTab) metricValue(v float64) string {
	switch t.metric {
	case lmUtil:
		return fmt.Sprintf("%.0f%%", v)
	case lmPower:
		return fmt.Sprintf("%.0fW", v)
	}
	return bytesStr(int64(v))
}

// smallMultiples draws one small chart per GPU on a grid, all to the same
// scale; ok is false when the space cannot hold a readable chart for each.
func (t *liveTab) smallMultiples(c *tabContext, devs []nvml.Device, h int) (string, bool) {
	th := c.th
	cols := max(1, min(len(devs), t.w/36))
	rows := (len(devs) + cols - 1) / cols
	cellH := (h - 1) / rows
	if cellH < 4 {
		return "", false
	}
	cellW := t.w / cols
	ymax, yfmt := t.yRange(devs)
	type cell struct {
		xs, ys []float64
	}
	cells := make([]cell, len(devs))
	var xss [][]float64
	for i, d := range devs {
		cells[i].xs, cells[i].ys = t.sampler.SeriesOf(d.Index, 2*cellW, t.metric.figOf())
		xss = append(xss, cells[i].xs)
	}
	span := chartSpan(xss...)
	unit, xfmt := timeAxis(span)
	var lines []string
	for r := 0; r < rows; r++ {
		block := make([]string, cellH)
		for c := 0; c < cols; c++ {
			i := r*cols + c
			var part []string
			if i < len(devs) {
				d := devs[i]
				title := fmt.Sprintf("GPU %d", d.Index)
				if n := len(cells[i].ys); n > 0 {
					title += " " + t.metricValue(cells[i].ys[n-1])
				}
				st := th.Fg(gpuColor(i))
				if i == t.sel {
					title = th.Sel.Render(title)
				} else {
					title = st.Render(title)
				}
				var series []widget.Series
				if len(cells[i].xs) > 0 {
					series = []widget.Series{{Xs: cells[i].xs, Ys: cells[i].ys, Style: st}}
				}
				chart := widget.Chart(widget.ChartSpec{W: cellW - 1, H: cellH - 1, Xmin: -span, Xmax: 0, Ymin: 0, Ymax: ymax,
					XFmt: xfmt, YFmt: yfmt, Series: series, Axis: th.Dim, Label: th.Dim})
				part = append([]string{title}, strings.Split(chart, "\n")...)
			}
			for k := range block {
				s := ""
				if k < len(part) {
					s = part[k]
				}
				block[k] += widget.Fit(s, cellW)
			}
		}
		lines = append(lines, block...)
	}
	legend := fmt.Sprintf("%d GPUs, one chart each, one scale · %s · x: %s ago · v: one chart · m: %s", len(devs), t.metric,
		unitName(unit), nextMetric(t.metric))
	for len(lines) < h-1 {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n") + "\n" + widget.Fit(th.Dim.Render(legend), t.w), true
}

// processChart draws the memory of the focused GPU's largest processes,
// each its own colour and line pattern, under the GPU's total.
func (t *liveTab) processChart(c *tabContext, d nvml.Device, h int) string {
	th := c.th
	procs := t.sampler.ProcessSeries(d.Index, 2*t.w, 6)
	xs, ys := t.sampler.Series(d.Index, 2*t.w)
	var series []widget.Series
	var legend []string
	if len(xs) > 0 {
		series = append(series, widget.Series{Xs: xs, Ys: ys, Style: th.Dim, Dash: widget.DashDotted})
		legend = append(legend, th.Dim.Render("┈ GPU "+fmt.Sprint(d.Index)+" total "+bytesStr(int64(ys[len(ys)-1]))))
	}
	xss := [][]float64{xs}
	glyph := []string{"━", "┄", "╍", "━", "┄", "╍"}
	for i, p := range procs {
		st := th.Fg(gpuColor(i + 1))
		series = append(series, widget.Series{Xs: p.Ago, Ys: p.Bytes, Style: st, Dash: i % 3})
		xss = append(xss, p.Ago)
		cmd := p.Command
		if f := strings.Fields(cmd); len(f) > 1 {
			cmd = f[0] + " " + f[1] // "python train.py": the rest is flags
		}
		legend = append(legend, st.Render(fmt.Sprintf("%s %d %s %s", glyph[i], p.PID, textsafe.Safe(cmd), bytesStr(p.Used))))
	}
	ymax, yfmt := t.yRange([]nvml.Device{d})
	span := chartSpan(xss...)
	unit, xfmt := timeAxis(span)
	out := widget.Chart(widget.ChartSpec{W: t.w, H: h - 1, Xmin: -span, Xmax: 0, Ymin: 0, Ymax: ymax, XFmt: xfmt, YFmt: yfmt,
		Series: series, Axis: th.Dim, Label: th.Dim})
	if len(procs) == 0 {
		legend = append(legend, "no process holds memory on this GPU")
	}
	tail := fmt.Sprintf(" · x: %s ago · esc: all GPUs", unitName(unit))
	return out + "\n" + widget.Fit(fmt.Sprintf("GPU %d memory per process: ", d.Index)+strings.Join(legend, "  ")+th.Dim.Render(tail), t.w)
}
