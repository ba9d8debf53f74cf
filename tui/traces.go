package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
	"memscope/internal/units"
	"memscope/model"
	"memscope/trace"
)

type traceRow struct {
	rank          int
	real, sim     *trace.Rank
	realIt, simIt *trace.Iteration
	realPeak      float64
	simPeak       float64
	errPct        float64
	curvePct      float64
	static, theo  float64
}

type tracesMode int

const (
	modeList tracesMode = iota
	modeDetail
	modeHeatmap
)

// tracesTab shows per-rank real vs simulated memory.
type tracesTab struct {
	w, h      int
	src       *model.Source
	gen       int
	rows      []traceRow
	list      scroller
	sortErr   bool
	mode      tracesMode
	showTheo  bool
	showResv  bool
	iterIdx   int // index into the detail rank's real iterations
	lo, hi    float64
	heatSim   bool
	sparkW    int
	sparkMemo map[sparkKey]string
}

type sparkKey struct {
	it *trace.Iteration
	w  int
}

var (
	tkSort    = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort by rank / |error|"))
	tkDetail  = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "rank detail chart"))
	tkHeat    = key.NewBinding(key.WithKeys("h"), key.WithHelp("h", "rank × time heatmap"))
	tkTheo    = key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "theoretical memory line (red)"))
	tkResv    = key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reserved memory"))
	tkIterP   = key.NewBinding(key.WithKeys("["), key.WithHelp("[", "previous iteration"))
	tkIterN   = key.NewBinding(key.WithKeys("]"), key.WithHelp("]", "next iteration"))
	tkHeatSrc = key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "heatmap: real / simulated"))
)

func newTracesTab() *tracesTab { return &tracesTab{sparkMemo: map[sparkKey]string{}} }

func (t *tracesTab) name() string { return "Traces" }

func (t *tracesTab) capturing() bool { return false }

func (t *tracesTab) help() []key.Binding {
	return []key.Binding{kUp, kDown, kPgUp, kPgDn, kHome, kEnd, tkSort, tkDetail, kBack, tkHeat, tkHeatSrc, tkTheo, tkResv, tkIterP, tkIterN, kExport}
}

func (t *tracesTab) resize(w, h int) {
	t.w, t.h = w, h
	t.list.setHeight(h - 3)
}

func (t *tracesTab) setSource(a *App, s *model.Source) {
	if s == t.src && (s == nil || s.Generation == t.gen) {
		return
	}
	keepRank := -1
	if len(t.rows) > 0 && t.list.cursor < len(t.rows) {
		keepRank = t.rows[t.list.cursor].rank
	}
	t.src = s
	t.rows = nil
	t.sparkMemo = map[sparkKey]string{}
	if s == nil || s.State != model.Loaded {
		t.list.setN(0)
		return
	}
	t.gen = s.Generation
	t.build()
	t.list.setN(len(t.rows))
	for i, r := range t.rows {
		if r.rank == keepRank {
			t.list.cursor = i
			t.list.clamp()
		}
	}
}

func (t *tracesTab) build() {
	s := t.src
	nan := math.NaN()
	if s.Comparison != nil {
		for _, rc := range s.Comparison.Ranks {
			r := traceRow{rank: rc.Rank, errPct: rc.PeakErrorPct, curvePct: rc.CurveErrorPct, realPeak: nan, simPeak: nan, static: nan, theo: nan}
			if rc.Real != nil {
				r.real, r.realIt, r.realPeak = s.Real.Rank(rc.Rank), rc.Real.It, rc.Real.Peak
				r.static, r.theo = rc.Real.Static, rc.Real.Theoretical
			}
			if rc.Sim != nil {
				r.simIt, r.simPeak = rc.Sim.It, rc.Sim.Peak
				for _, sr := range s.Sim.Ranks {
					if sr.Path == rc.Sim.Path {
						r.sim = sr
					}
				}
				if r.static < 0 || math.IsNaN(r.static) {
					r.static = rc.Sim.Static
				}
				if r.theo < 0 || math.IsNaN(r.theo) {
					r.theo = rc.Sim.Theoretical
				}
			}
			t.rows = append(t.rows, r)
		}
	} else if s.Real != nil {
		for _, rk := range s.Real.Ranks {
			it := rk.Last()
			r := traceRow{rank: rk.Rank, real: rk, realIt: it, errPct: nan, curvePct: nan, simPeak: nan, realPeak: nan, static: nan, theo: nan}
			if it != nil {
				r.realPeak, r.static, r.theo = it.Peak(), it.Static, it.Theoretical
			}
			t.rows = append(t.rows, r)
		}
	}
	t.lo, t.hi = math.Inf(1), math.Inf(-1)
	for _, r := range t.rows {
		for _, it := range []*trace.Iteration{r.realIt, r.simIt} {
			if it == nil {
				continue
			}
			for _, v := range it.Allocated {
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					t.lo, t.hi = math.Min(t.lo, v), math.Max(t.hi, v)
				}
			}
		}
	}
	t.sortRows()
}

func (t *tracesTab) sortRows() {
	slices.SortStableFunc(t.rows, func(a, b traceRow) int {
		if t.sortErr {
			if c := trace.ByAbsError(a.errPct, b.errPct); c != 0 {
				return c
			}
		}
		return a.rank - b.rank
	})
}

func (t *tracesTab) cur() *traceRow {
	if t.list.cursor < 0 || t.list.cursor >= len(t.rows) {
		return nil
	}
	return &t.rows[t.list.cursor]
}

func (t *tracesTab) update(a *App, msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		d := 3
		if m.Button == tea.MouseWheelUp {
			d = -3
		}
		t.list.scroll(d)
		return nil
	case tea.MouseClickMsg:
		if t.mode == modeList && m.Y >= 2 {
			if t.list.click(m.Y-2) && m.Button == tea.MouseLeft {
				return nil
			}
		}
		return nil
	case tea.KeyPressMsg:
		if t.mode == modeDetail {
			return t.detailKey(a, m)
		}
		if listMove(&t.list, m) {
			return nil
		}
		switch {
		case key.Matches(m, tkSort):
			t.sortErr = !t.sortErr
			rank := -1
			if r := t.cur(); r != nil {
				rank = r.rank
			}
			t.sortRows()
			for i := range t.rows {
				if t.rows[i].rank == rank {
					t.list.cursor = i
					t.list.clamp()
				}
			}
			if t.sortErr {
				a.setStatus("sorted by |peak error|, largest first")
			} else {
				a.setStatus("sorted by rank")
			}
		case key.Matches(m, tkDetail):
			if r := t.cur(); r != nil {
				t.mode = modeDetail
				t.iterIdx = -1
			}
		case key.Matches(m, tkHeat):
			if t.mode == modeHeatmap {
				t.mode = modeList
			} else {
				t.mode = modeHeatmap
			}
		case key.Matches(m, tkHeatSrc):
			t.heatSim = !t.heatSim
		case key.Matches(m, kBack):
			t.mode = modeList
		case key.Matches(m, kExport):
			return exportTraces(a, t)
		}
	}
	return nil
}

func (t *tracesTab) detailKey(a *App, m tea.KeyPressMsg) tea.Cmd {
	r := t.cur()
	switch {
	case key.Matches(m, kBack):
		t.mode = modeList
	case key.Matches(m, tkTheo):
		t.showTheo = !t.showTheo
	case key.Matches(m, tkResv):
		t.showResv = !t.showResv
	case key.Matches(m, tkIterP), key.Matches(m, tkIterN):
		if r == nil || r.real == nil || len(r.real.Iterations) == 0 {
			return nil
		}
		n := len(r.real.Iterations)
		if t.iterIdx < 0 {
			t.iterIdx = n - 1
		}
		if key.Matches(m, tkIterP) {
			t.iterIdx = (t.iterIdx + n - 1) % n
		} else {
			t.iterIdx = (t.iterIdx + 1) % n
		}
	case key.Matches(m, kUp):
		t.list.move(-1)
		t.iterIdx = -1
	case key.Matches(m, kDown):
		t.list.move(1)
		t.iterIdx = -1
	case key.Matches(m, kExport):
		return exportTraces(a, t)
	}
	return nil
}

func (t *tracesTab) view(a *App) string {
	th := a.th
	if t.src == nil {
		return t.emptyView(a)
	}
	if t.src.State != model.Loaded {
		return th.dim.Render("loading " + t.src.Name() + "…")
	}
	switch t.mode {
	case modeDetail:
		return t.detailView(a)
	case modeHeatmap:
		return t.heatmapView(a)
	}
	return t.listView(a)
}

func (t *tracesTab) emptyView(a *App) string {
	var b strings.Builder
	b.WriteString(a.th.title.Render("No traces loaded") + "\n\n")
	b.WriteString("Open per-rank memory traces: memscope DIR (memory_trace_rank*.json, torchtitan\n")
	b.WriteString("memory exports or training logs), or a parent holding memory_traces/ and\n")
	b.WriteString("memory_traces_scaling/ to compare a real run with its simulation.\n")
	for _, s := range a.sources {
		if s.Kind.IsTrace() && s.State == model.Failed {
			b.WriteString("\n" + a.th.errS.Render("✗ "+s.Name()+": ") + s.Err.Error())
		}
	}
	return b.String()
}

func (t *tracesTab) header(a *App) string {
	s := t.src
	var parts []string
	if s.Comparison != nil {
		sum := s.Comparison.Summary
		parts = append(parts, fmt.Sprintf("%d ranks, %d paired", sum.Ranks, sum.Paired))
		if sum.WorstRank >= 0 {
			for _, r := range t.rows {
				if r.rank == sum.WorstRank {
					parts = append(parts, fmt.Sprintf("worst rank %d (%+.2f%%)", r.rank, r.errPct))
				}
			}
		}
		if n := len(sum.Underestimated); n > 0 {
			parts = append(parts, a.th.errS.Render(fmt.Sprintf("▼ %s underestimated by the simulation", plural(n, "rank"))))
		}
	} else {
		parts = append(parts, plural(len(t.rows), "rank")+" (one run: no simulation to compare)")
	}
	if n := s.ErrorCount(); n > 0 {
		parts = append(parts, a.th.errS.Render(fmt.Sprintf("✗ %s (o)", plural(n, "file error"))))
	}
	order := "rank"
	if t.sortErr {
		order = "|error|"
	}
	parts = append(parts, "sort: "+order)
	return a.th.bold.Render(s.Name()) + "  " + strings.Join(parts, " · ")
}

// errStyle colours a peak error by sign and size: below zero (the plan
// would OOM) is the alarm, large overestimates a warning.
func errStyle(th theme, e float64) (string, lipgloss.Style) {
	if math.IsNaN(e) {
		return "—", th.dim
	}
	s := fmt.Sprintf("%+.2f%%", e)
	switch {
	case e < -0.005:
		return "▼" + s, th.errS
	case math.Abs(e) >= 10:
		return "▲" + s, th.warn
	case math.Abs(e) >= 2:
		return "▲" + s, th.warn
	}
	return " " + s, th.ok
}

func (t *tracesTab) spark(it *trace.Iteration, w int, st lipgloss.Style) string {
	if it == nil {
		return strings.Repeat(" ", w)
	}
	k := sparkKey{it, w}
	if s, ok := t.sparkMemo[k]; ok {
		return s
	}
	_, maxs := trace.Columns(it.Allocated, w)
	s := spark(maxs, t.lo, t.hi, st)
	t.sparkMemo[k] = s
	return s
}

func (t *tracesTab) listView(a *App) string {
	th := a.th
	fixed := 6 + 11 + 11 + 10 + 4
	sw := max(4, (t.w-fixed)/2)
	var b strings.Builder
	b.WriteString(fit(t.header(a), t.w) + "\n")
	hdr := fmt.Sprintf("%4s  %-*s %-*s %10s %10s %9s", "RANK", sw, fit("REAL allocated (compared iteration)", sw), sw, fit("SIMULATED", sw), "REAL PEAK", "SIM PEAK", "ERROR")
	b.WriteString(th.header.Render(fit(hdr, t.w)) + "\n")
	realSt, simSt := th.fg(palette.Real), th.fg(palette.Sim)
	from, to := t.list.visible()
	for i := from; i < to; i++ {
		r := &t.rows[i]
		es, est := errStyle(th, r.errPct)
		line := fmt.Sprintf("%4d  %s %s %10s %10s %s", r.rank, t.spark(r.realIt, sw, realSt), t.spark(r.simIt, sw, simSt),
			mibStr(r.realPeak), mibStr(r.simPeak), est.Render(fitLeft(es, 9)))
		if i == t.list.cursor {
			line = th.sel.Render(fit(stripStyle(line), t.w))
		}
		b.WriteString(fit(line, t.w) + "\n")
	}
	if len(t.rows) == 0 {
		b.WriteString(th.dim.Render("no ranks") + "\n")
	}
	for i := to - from; i < t.list.height; i++ {
		b.WriteString("\n")
	}
	hint := "enter detail · s sort · h heatmap · o sources"
	if h := t.list.hint(); h != "" {
		hint = h + " · " + hint
	}
	b.WriteString(th.dim.Render(hint))
	return b.String()
}

// stripStyle drops ANSI styling (for the reverse-video selected row).
func stripStyle(s string) string { return ansiStrip(s) }

func (t *tracesTab) detailView(a *App) string {
	th := a.th
	r := t.cur()
	if r == nil {
		t.mode = modeList
		return t.listView(a)
	}
	realIt := r.realIt
	if r.real != nil && t.iterIdx >= 0 && t.iterIdx < len(r.real.Iterations) {
		realIt = &r.real.Iterations[t.iterIdx]
	}
	simIt := r.simIt
	steps := (realIt != nil && realIt.X == trace.Steps) || (simIt != nil && simIt.X == trace.Steps)
	var series []chartSeries
	ymin, ymax := math.Inf(1), math.Inf(-1)
	add := func(it *trace.Iteration, ys []float64, st lipgloss.Style) {
		if it == nil || len(it.T) == 0 {
			return
		}
		xs := make([]float64, len(it.T))
		t0, t1 := it.T[0], it.T[len(it.T)-1]
		for i, x := range it.T {
			if steps {
				xs[i] = x
			} else if t1 > t0 {
				xs[i] = (x - t0) / (t1 - t0)
			}
		}
		for _, v := range ys {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
			}
		}
		series = append(series, chartSeries{xs: xs, ys: ys, style: st})
	}
	if t.showResv {
		if realIt != nil {
			add(realIt, realIt.Reserved, th.fg(palette.Reserved))
		}
		if simIt != nil {
			add(simIt, simIt.Reserved, th.fg(palette.Reserved).Faint(true))
		}
	}
	if simIt != nil {
		add(simIt, simIt.Allocated, th.fg(palette.Sim))
	}
	if realIt != nil {
		add(realIt, realIt.Allocated, th.fg(palette.Real))
	}
	var lines []chartLine
	static, theo := r.static, r.theo
	if realIt != nil && realIt != r.realIt {
		static, theo = realIt.Static, realIt.Theoretical
	}
	if static >= 0 {
		lines = append(lines, chartLine{at: static, style: th.fg(palette.Static)})
		ymin = math.Min(ymin, static)
	}
	if t.showTheo && theo >= 0 {
		lines = append(lines, chartLine{at: theo, style: th.fg(palette.Theoretical), dotted: true})
		ymax = math.Max(ymax, theo)
	}
	ymin, ymax = niceRange(ymin, ymax)
	xmin, xmax := 0.0, 1.0
	if steps {
		xmin, xmax = math.Inf(1), math.Inf(-1)
		for _, s := range series {
			if len(s.xs) > 0 {
				xmin, xmax = math.Min(xmin, s.xs[0]), math.Max(xmax, s.xs[len(s.xs)-1])
			}
		}
	}
	var b strings.Builder
	title := fmt.Sprintf("Rank %d", r.rank)
	if realIt != nil {
		title += fmt.Sprintf(" · real iteration %s", realIt.Key)
		if r.real != nil && len(r.real.Iterations) > 1 {
			title += fmt.Sprintf(" ([ ] of %d)", len(r.real.Iterations))
		}
	}
	if simIt != nil {
		title += " · sim iteration " + simIt.Key
	}
	b.WriteString(fit(th.bold.Render(title), t.w) + "\n")
	legend := []string{th.fg(palette.Real).Render("━ real allocated"), th.fg(palette.Sim).Render("━ simulated allocated")}
	if static >= 0 {
		legend = append(legend, th.fg(palette.Static).Render("━ static "+mibStr(static)))
	}
	if t.showTheo {
		if theo >= 0 {
			legend = append(legend, th.fg(palette.Theoretical).Render("┄ theoretical "+mibStr(theo)))
		} else {
			legend = append(legend, th.dim.Render("theoretical: not in the file"))
		}
	}
	if t.showResv {
		legend = append(legend, th.fg(palette.Reserved).Render("━ reserved (device)"))
	}
	b.WriteString(fit(strings.Join(legend, "  "), t.w) + "\n")
	xfmt := func(_ int, v float64) string { return fmt.Sprintf("%.0f%%", v*100) }
	if steps {
		xfmt = func(_ int, v float64) string { return fmt.Sprintf("%.0f", v) }
	}
	yfmt := func(_ int, v float64) string { return units.BytesF(v * units.MiB) }
	chartH := max(4, t.h-6)
	b.WriteString(renderChart(chartSpec{w: t.w, h: chartH, xmin: xmin, xmax: xmax, ymin: ymin, ymax: ymax,
		xfmt: xfmt, yfmt: yfmt, series: series, lines: lines, axis: th.dim, label: th.dim}) + "\n")
	es, est := errStyle(th, r.errPct)
	stats := fmt.Sprintf("real peak %s · sim peak %s · peak error %s · curve error %s", mibStr(r.realPeak), mibStr(r.simPeak),
		est.Render(strings.TrimSpace(es)), pctStr(r.curvePct))
	if realIt != nil {
		stats += fmt.Sprintf(" · %d samples over %.2fs", len(realIt.T), realIt.Duration())
	}
	b.WriteString(fit(stats, t.w) + "\n")
	xl := "x: time relative to each iteration's start"
	if steps {
		xl = "x: step / iteration"
	}
	b.WriteString(th.dim.Render(fit(xl+" · esc back · ↑↓ rank · t theoretical · r reserved · [ ] iteration", t.w)))
	return b.String()
}

func pctStr(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f%%", v)
}

var heatRunes = []rune(" ░▒▓█")

func (t *tracesTab) heatmapView(a *App) string {
	th := a.th
	var b strings.Builder
	which := "real"
	if t.heatSim {
		which = "simulated"
	}
	b.WriteString(fit(th.bold.Render("Rank × time heatmap")+fmt.Sprintf(" · %s allocated memory, %s (dark) … %s (bright) · v real/sim · h or esc back",
		which, mibStr(t.lo), mibStr(t.hi)), t.w) + "\n")
	cols := max(4, t.w-6)
	from, to := t.list.visible()
	b.WriteString(th.dim.Render(fit(fmt.Sprintf("%4s  0%%%s100%%", "RANK", strings.Repeat(" ", max(0, cols-7))), t.w)) + "\n")
	for i := from; i < to; i++ {
		r := &t.rows[i]
		it := r.realIt
		if t.heatSim {
			it = r.simIt
		}
		var cells strings.Builder
		if it == nil {
			cells.WriteString(th.dim.Render(fit("(no trace)", cols)))
		} else {
			_, maxs := trace.Columns(it.Allocated, cols)
			for _, v := range maxs {
				cells.WriteString(heatCell(th, v, t.lo, t.hi))
			}
		}
		label := fmt.Sprintf("%4d  ", r.rank)
		if i == t.list.cursor {
			label = th.sel.Render(label)
		}
		b.WriteString(label + cells.String() + "\n")
	}
	for i := to - from; i < t.list.height; i++ {
		b.WriteString("\n")
	}
	b.WriteString(th.dim.Render(t.list.hint()))
	return b.String()
}

// heatCell draws one heatmap cell: a colour ramp, or shade characters
// under NO_COLOR.
func heatCell(th theme, v, lo, hi float64) string {
	if math.IsNaN(v) {
		return " "
	}
	f := 0.0
	if hi > lo {
		f = (v - lo) / (hi - lo)
	}
	f = clampF(f, 0, 1)
	if th.noColor {
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
