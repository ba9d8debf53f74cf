package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"memscope/fleet"
	"memscope/internal/textsafe"
	"memscope/internal/units"
	"memscope/tui/widget"
)

// Used-fraction levels: a glyph and a colour each, so the grid reads the
// same under NO_COLOR.
var fleetLevels = []struct {
	below float64
	glyph string
	color string
}{
	{0.10, "·", "#5FAF5F"}, {0.40, "░", "#87D75F"}, {0.70, "▒", "#D7D75F"}, {0.90, "▓", "#FFAF00"}, {math.Inf(1), "█", "#FF5F5F"},
}

func (t *fleetTab) cell(c *tabContext, g *fleet.GPU) string {
	fr := g.UsedFraction()
	if math.IsNaN(fr) {
		return c.th.Dim.Render("?")
	}
	for _, l := range fleetLevels {
		if fr < l.below {
			return c.th.Fg(l.color).Render(l.glyph)
		}
	}
	return "?"
}

func (t *fleetTab) legend(c *tabContext) string {
	parts := []string{}
	lo := 0.0
	for _, l := range fleetLevels {
		label := fmt.Sprintf("<%.0f%%", 100*l.below)
		if math.IsInf(l.below, 1) {
			label = fmt.Sprintf("≥%.0f%%", 100*lo)
		}
		parts = append(parts, c.th.Fg(l.color).Render(l.glyph)+" "+label)
		lo = l.below
	}
	parts = append(parts, "? no reading")
	return strings.Join(parts, "  ")
}

func (t *fleetTab) view(c *tabContext) string {
	if t.data == nil {
		var b strings.Builder
		b.WriteString(c.th.Title.Render("Fleet") + " · " + textsafe.Safe(t.src.Options().URL) + "\n\n")
		switch {
		case t.err != nil:
			b.WriteString(c.th.Err.Render("✗ "+textsafe.Safe(t.err.Error())) + "\n\n")
			b.WriteString(fmt.Sprintf("retrying every %s; r retries now", t.interval()))
		default:
			b.WriteString("asking Prometheus for the fleet's GPUs…")
		}
		return b.String()
	}
	switch t.level {
	case 1:
		if h := t.openHost(); h != nil {
			return t.hostView(c, h)
		}
	case 2:
		if g := t.selectedGPU(); g != nil {
			return t.gpuView(c, g)
		}
	}
	return t.gridView(c)
}

// header is the first line: the source, the totals and the freshness.
func (t *fleetTab) header(c *tabContext) string {
	var used, total int64
	for i := range t.data.GPUs {
		g := &t.data.GPUs[i]
		if g.Used >= 0 && g.Total > 0 {
			used += g.Used
			total += g.Total
		}
	}
	parts := []string{c.th.Title.Render("Fleet"), fmt.Sprintf("%d hosts", len(t.data.Hosts())), plural(len(t.data.GPUs), "GPU")}
	if total > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s used (%.0f%%)", units.Bytes(used), units.Bytes(total), 100*float64(used)/float64(total)))
	}
	age := time.Since(t.gotAt).Truncate(time.Second)
	fresh := fmt.Sprintf("%s ago, every %s", age, t.interval())
	if t.busy {
		fresh = "refreshing…"
	}
	parts = append(parts, fresh)
	return strings.Join(parts, " · ")
}

// errLine is the last refresh's error (the figures shown are older).
func (t *fleetTab) errLine(c *tabContext) []string {
	if t.err == nil {
		return nil
	}
	return []string{widget.Fit(c.th.Err.Render(fmt.Sprintf("✗ %s ago: %s", time.Since(t.errAt).Truncate(time.Second), textsafe.Safe(t.err.Error()))), t.w)}
}

// controls says the sort and the filter, so neither is ever hidden.
func (t *fleetTab) controls(c *tabContext) string {
	f := c.th.Dim.Render("none (/)")
	switch {
	case t.filter.Typing():
		f = t.filter.View()
	case t.filter.Query() != "":
		f = c.th.Warn.Render(fmt.Sprintf("%q", textsafe.Safe(t.filter.Query()))) + c.th.Dim.Render(fmt.Sprintf(" %d of %d hosts (esc clears)", len(t.hosts), len(t.data.Hosts())))
	}
	return fmt.Sprintf("sort %s (s) · filter %s", c.th.Bold.Render(fleetSorts[t.sortBy]), f)
}

func (t *fleetTab) gridView(c *tabContext) string {
	lines := append([]string{widget.Fit(t.header(c), t.w)}, t.errLine(c)...)
	lines = append(lines, widget.Fit(t.controls(c), t.w))
	cells := 0
	nameW := 8
	for _, h := range t.hosts {
		cells = max(cells, len(h.gpus))
		w := lipgloss.Width(textsafe.Safe(h.name))
		if h.local > 0 {
			w += 2
		}
		nameW = max(nameW, w)
	}
	cells = min(cells, 64)
	nameW = min(nameW, max(12, t.w/4))
	cellW := max(cells, 4)
	usedW := 22
	hdr := widget.Fit("HOST", nameW) + " " + widget.Fit("GPUS", cellW) + " " + widget.FitLeft("USED / TOTAL", usedW) + "  " + widget.FitLeft("USED", 5) + "  " + widget.FitLeft("IMBAL", 5) + "  POD"
	lines = append(lines, c.th.Header.Render(widget.Fit(hdr, t.w)))
	bodyH := max(1, t.h-len(lines)-1)
	t.list.SetHeight(bodyH)
	t.top = len(lines)
	lo, hi := t.list.Visible()
	for i := lo; i < hi; i++ {
		h := &t.hosts[i]
		var cb strings.Builder
		for k, g := range h.gpus {
			if k == cells {
				break
			}
			cb.WriteString(t.cell(c, g))
		}
		pct, imb := "-", "-"
		if h.sum.Total > 0 {
			pct = fmt.Sprintf("%.0f%%", 100*float64(h.sum.Used)/float64(h.sum.Total))
		}
		if h.sum.Imbalance > 0 {
			imb = fmt.Sprintf("%.2f", h.sum.Imbalance)
		}
		name := widget.FitMiddle(textsafe.Safe(h.name), nameW)
		if h.local > 0 {
			name = widget.FitMiddle(textsafe.Safe(h.name), nameW-2) + " ◆"
		}
		row := name + " " + widget.Fit(cb.String(), cellW) + " " +
			widget.FitLeft(units.Bytes(h.sum.Used)+" / "+units.Bytes(h.sum.Total), usedW) + "  " + widget.FitLeft(pct, 5) + "  " + widget.FitLeft(imb, 5) + "  " + textsafe.Safe(h.pods)
		if h.sum.Unknown > 0 {
			row += c.th.Warn.Render(fmt.Sprintf(" %d without a reading", h.sum.Unknown))
		}
		row = widget.Fit(row, t.w)
		if i == t.list.Cursor {
			row = c.th.Sel.Render(ansiStrip(row))
		}
		lines = append(lines, row)
	}
	if len(t.hosts) == 0 {
		lines = append(lines, c.th.Dim.Render("no host matches the filter (esc clears it)"))
	}
	for len(lines) < t.h-1 {
		lines = append(lines, "")
	}
	foot := t.legend(c)
	if s := t.list.Hint(); s != "" {
		foot += c.th.Dim.Render("  · " + s)
	}
	foot += c.th.Dim.Render("  · ◆ local GPU · enter opens")
	lines = append(lines[:t.h-1], widget.Fit(foot, t.w))
	return strings.Join(lines, "\n")
}

func (t *fleetTab) hostView(c *tabContext, h *fleetHost) string {
	title := c.th.Title.Render(textsafe.Safe(h.name)) + " · " + plural(len(h.gpus), "GPU")
	if len(h.gpus) > 0 && h.gpus[0].Model != "" {
		title += " · " + textsafe.Safe(h.gpus[0].Model)
	}
	title += fmt.Sprintf(" · %s of %s used", units.Bytes(h.sum.Used), units.Bytes(h.sum.Total))
	if h.sum.Imbalance > 0 {
		title += fmt.Sprintf(" · imbalance %.2f", h.sum.Imbalance)
	}
	lines := append([]string{widget.Fit(title, t.w)}, t.errLine(c)...)
	lines = append(lines, widget.Fit(t.controlsHost(c), t.w))
	barW := 10
	histW := max(0, t.w-(4+barW+6+18+10+6+7+14+8))
	rng := model0(t.data.Range)
	hdr := widget.Fit("GPU", 4) + widget.Fit("USED", barW+6) + widget.FitLeft("USED / TOTAL", 18) + widget.FitLeft("MAX "+rng, 10) + widget.FitLeft("UTIL", 6) + widget.FitLeft("POWER", 7) + "  " + widget.Fit("POD", 12)
	if histW >= 8 {
		hdr += "  HISTORY " + rng
	}
	lines = append(lines, c.th.Header.Render(widget.Fit(hdr, t.w)))
	t.gpus.SetHeight(max(1, t.h-len(lines)-1))
	t.top = len(lines)
	lo, hi := t.gpus.Visible()
	for i := lo; i < hi; i++ {
		g := h.gpus[i]
		fr := g.UsedFraction()
		pct := "   -"
		if !math.IsNaN(fr) {
			pct = fmt.Sprintf("%4.0f%%", 100*fr)
		}
		idx := textsafe.Safe(g.Index)
		if g.Stale {
			idx += "!"
		}
		pod := g.Pod
		if g.Namespace != "" && pod != "" {
			pod = g.Namespace + "/" + pod
		}
		row := widget.Fit(idx, 4) + t.cell(c, g) + widget.HBar(fr, barW-1, t.levelStyle(c, fr)) + " " + pct + " " +
			widget.FitLeft(usedOfTotal(g.Used, g.Total), 18) + widget.FitLeft(bytesOrDash(g.MaxUsed), 10) +
			widget.FitLeft(naPct(g.Util), 6) + widget.FitLeft(naW(g.Power), 7) + "  " + widget.FitMiddle(textsafe.Safe(pod), 12)
		if histW >= 8 {
			row += "  " + t.sparkline(c, g, histW-2)
		}
		row = widget.Fit(row, t.w)
		if i == t.gpus.Cursor {
			row = c.th.Sel.Render(ansiStrip(row))
		}
		lines = append(lines, row)
	}
	for len(lines) < t.h-1 {
		lines = append(lines, "")
	}
	foot := c.th.Dim.Render("enter: chart · esc: all hosts · ! stale (no sample in 5 min)")
	if g := t.selectedGPU(); g != nil && t.isLocal(g) {
		foot = c.th.Accent.Render("◆ this GPU is local: L shows it on the Live tab") + c.th.Dim.Render(" · esc: all hosts")
	}
	lines = append(lines[:t.h-1], widget.Fit(foot, t.w))
	return strings.Join(lines, "\n")
}

func (t *fleetTab) controlsHost(c *tabContext) string {
	pods := map[string]bool{}
	h := t.openHost()
	var names []string
	for _, g := range h.gpus {
		if g.Pod != "" && !pods[g.Pod] {
			pods[g.Pod] = true
			names = append(names, g.Pod)
		}
	}
	if len(names) == 0 {
		return c.th.Dim.Render("no pod labels (dcgm-exporter adds them on Kubernetes)")
	}
	return "pods: " + textsafe.Safe(strings.Join(names, ", "))
}

func (t *fleetTab) isLocal(g *fleet.GPU) bool { return g.UUID != "" && t.local[g.UUID] }

func (t *fleetTab) levelStyle(c *tabContext, fr float64) lipgloss.Style {
	for _, l := range fleetLevels {
		if fr < l.below {
			return c.th.Fg(l.color)
		}
	}
	return c.th.Dim
}

// sparkline draws FB_USED over the whole range in w columns, scaled from
// 0 to the GPU's total, so rows compare.
func (t *fleetTab) sparkline(c *tabContext, g *fleet.GPU, w int) string {
	if len(g.History) == 0 || w <= 0 {
		if !t.data.HasHistory {
			return c.th.Dim.Render("…")
		}
		return c.th.Dim.Render("no history")
	}
	end := t.data.At
	start := end.Add(-t.data.Range)
	cols := make([]float64, w)
	for i := range cols {
		cols[i] = math.NaN()
	}
	span := end.Sub(start).Seconds()
	for _, p := range g.History {
		c := int(p.T.Sub(start).Seconds() / span * float64(w))
		c = max(0, min(w-1, c))
		if math.IsNaN(cols[c]) || float64(p.Bytes) > cols[c] {
			cols[c] = float64(p.Bytes)
		}
	}
	hi := float64(g.Total)
	if hi <= 0 {
		hi = float64(g.MaxUsed)
	}
	return widget.Spark(cols, 0, hi, c.th.Accent)
}

func (t *fleetTab) gpuView(c *tabContext, g *fleet.GPU) string {
	title := fmt.Sprintf("%s · GPU %s · %s", c.th.Title.Render(textsafe.Safe(g.Host)), textsafe.Safe(g.Index), textsafe.Safe(g.Model))
	sub := fmt.Sprintf("used %s of %s · max %s over %s · UUID %s", bytesOrDash(g.Used), bytesOrDash(g.Total), bytesOrDash(g.MaxUsed),
		model0(t.data.Range), textsafe.Safe(g.UUID))
	lines := []string{widget.Fit(title, t.w), widget.Fit(sub, t.w)}
	chartH := max(3, t.h-len(lines)-1)
	if len(g.History) == 0 {
		lines = append(lines, c.th.Dim.Render("no history in the range (yet)"))
	} else {
		xs := make([]float64, len(g.History))
		ys := make([]float64, len(g.History))
		ymax := max(float64(g.Total), float64(g.MaxUsed))
		for i, p := range g.History {
			xs[i] = p.T.Sub(t.data.At).Minutes()
			ys[i] = float64(p.Bytes) / (1 << 30)
			ymax = max(ymax, float64(p.Bytes))
		}
		// The x axis spans the data, not the whole range asked for: a
		// GPU seen for 1.5 minutes of an hour fills the chart.
		xmin := max(-t.data.Range.Minutes(), xs[0])
		if xmin >= 0 {
			xmin = -1
		}
		spec := widget.ChartSpec{W: t.w, H: chartH, Xmin: xmin, Xmax: 0, Ymin: 0, Ymax: ymax / (1 << 30) * 1.05,
			XFmt: func(_ int, v float64) string { return fmt.Sprintf("%.0fm", v) },
			YFmt: func(_ int, v float64) string { return fmt.Sprintf("%.0f GiB", v) },
			Axis: c.th.Dim, Label: c.th.Dim,
			Series: []widget.Series{{Xs: xs, Ys: ys, Style: c.th.Accent}}}
		if g.Total > 0 {
			spec.Lines = append(spec.Lines, widget.Line{At: float64(g.Total) / (1 << 30), Style: c.th.Err, Dotted: true})
		}
		if g.MaxUsed > 0 {
			// The maximum over the range, which the chart's samples (one a
			// step) can miss: drawn, so the "max" above is on the chart.
			spec.Lines = append(spec.Lines, widget.Line{At: float64(g.MaxUsed) / (1 << 30), Style: c.th.Warn, Dotted: true})
		}
		lines = append(lines, widget.Chart(spec))
	}
	foot := "x: minutes before now · y: GiB · dotted: total (red) and the range's max (amber), which samples one a step can miss · esc: back"
	if t.isLocal(g) {
		foot = "◆ local: L shows it on the Live tab · " + foot
	}
	body := strings.Join(lines, "\n")
	return widget.Block(body, t.w, t.h-1) + "\n" + widget.Fit(c.th.Dim.Render(foot), t.w)
}

func bytesOrDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return units.Bytes(n)
}

// usedOfTotal prints "49.79/80.00 GiB": one unit, the total's.
func usedOfTotal(used, total int64) string {
	if used < 0 || total <= 0 {
		return bytesOrDash(used) + " / " + bytesOrDash(total)
	}
	t := units.Bytes(total)
	i := strings.LastIndexByte(t, ' ')
	if i < 0 {
		return units.Bytes(used) + " / " + t
	}
	unit := t[i+1:]
	scale := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}[unit]
	if scale == 0 {
		return units.Bytes(used) + " / " + t
	}
	return fmt.Sprintf("%.2f/%s", float64(used)/scale, t)
}

func naPct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", v)
}

func naW(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0fW", v)
}

// model0 prints a duration the Prometheus way ("1h", "30m").
func model0(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
