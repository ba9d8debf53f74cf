package tui

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
	"memscope/internal/units"
	"memscope/model"
	"memscope/trace"
	"memscope/tui/widget"
)

type traceRow struct {
	rank          int
	real, sim     *trace.Rank
	realIt, simIt *trace.Iteration
	realPeak      float64
	simPeak       float64
	errPct        float64
	curvePct      float64
	durRatio      float64
	// Static and theoretical memory per side (Unset or NaN when unknown).
	realStatic, simStatic float64
	realTheo, simTheo     float64
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
	list      widget.Scroller
	sortErr   bool
	mode      tracesMode
	showTheo  bool
	showResv  bool
	iterIdx   int // index into the detail rank's real iterations
	lo, hi    float64
	heatSim   bool
	relTime   bool // detail chart: 0-100% of each iteration instead of seconds
	sparkW    int
	sparkMemo map[sparkKey]string
	// The time axis shared by sparklines and heatmap rows: seconds since
	// each iteration's start up to the longest iteration (span), or steps
	// from stepLo to stepHi for step-based sources.
	span           float64
	stepLo, stepHi float64
	// all holds every rank; rows the ones the filter (/) keeps.
	all      []traceRow
	filterOn bool
	filter   textinput.Model
	query    string
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
	tkRelTime = key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "detail: seconds / % of each iteration"))
	tkFilter  = key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter ranks (number, or text of the file path)"))
)

func newTracesTab() *tracesTab {
	ti := textinput.New()
	ti.Prompt = "/"
	ti.Placeholder = "rank number or file path"
	return &tracesTab{sparkMemo: map[sparkKey]string{}, filter: ti}
}

func (t *tracesTab) id() tabID { return tabTraces }

func (t *tracesTab) name() string { return "Traces" }

func (t *tracesTab) capturing() bool { return t.filterOn }

func (t *tracesTab) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyHome, widget.KeyEnd, tkSort, tkDetail, widget.KeyBack, tkHeat, tkHeatSrc, tkTheo, tkResv, tkIterP, tkIterN, tkRelTime, tkFilter, kExport}
}

func (t *tracesTab) resize(w, h int) {
	t.w, t.h = w, h
	t.list.SetHeight(h - 3)
}

func (t *tracesTab) setSource(c *tabContext, s *model.Source) {
	if s == t.src && (s == nil || s.Generation == t.gen) {
		return
	}
	if sameData(t.src, t.gen, s) {
		t.src = s
		return
	}
	keepRank := -1
	if len(t.rows) > 0 && t.list.Cursor < len(t.rows) {
		keepRank = t.rows[t.list.Cursor].rank
	}
	t.src = s
	t.rows = nil
	t.sparkMemo = map[sparkKey]string{}
	if s == nil || s.State != model.Loaded {
		t.list.SetN(0)
		return
	}
	t.gen = s.Generation
	t.build()
	t.list.SetN(len(t.rows))
	for i, r := range t.rows {
		if r.rank == keepRank {
			t.list.Cursor = i
			t.list.Clamp()
		}
	}
}

func (t *tracesTab) build() {
	s := t.src
	nan := math.NaN()
	if s.Comparison != nil {
		for _, rc := range s.Comparison.Ranks {
			r := traceRow{rank: rc.Rank, errPct: rc.PeakErrorPct, curvePct: rc.CurveErrorPct, durRatio: rc.DurationRatio,
				realPeak: nan, simPeak: nan, realStatic: nan, simStatic: nan, realTheo: nan, simTheo: nan}
			if rc.Real != nil {
				r.real, r.realIt, r.realPeak = s.Real.Rank(rc.Rank), rc.Real.It, rc.Real.Peak
				r.realStatic, r.realTheo = rc.Real.Static, rc.Real.Theoretical
			}
			if rc.Sim != nil {
				r.simIt, r.simPeak = rc.Sim.It, rc.Sim.Peak
				r.simStatic, r.simTheo = rc.Sim.Static, rc.Sim.Theoretical
				for _, sr := range s.Sim.Ranks {
					if sr.Path == rc.Sim.Path {
						r.sim = sr
					}
				}
			}
			t.rows = append(t.rows, r)
		}
	} else if s.Real != nil {
		for _, rk := range s.Real.Ranks {
			it := rk.Last()
			r := traceRow{rank: rk.Rank, real: rk, realIt: it, errPct: nan, curvePct: nan, durRatio: nan, simPeak: nan, realPeak: nan,
				realStatic: nan, simStatic: nan, realTheo: nan, simTheo: nan}
			if it != nil {
				r.realPeak, r.realStatic, r.realTheo = it.Peak(), it.Static, it.Theoretical
			}
			t.rows = append(t.rows, r)
		}
	}
	t.lo, t.hi = math.Inf(1), math.Inf(-1)
	t.span, t.stepLo, t.stepHi = 0, math.Inf(1), math.Inf(-1)
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
			if it.X == trace.Steps {
				for _, x := range it.T {
					t.stepLo, t.stepHi = math.Min(t.stepLo, x), math.Max(t.stepHi, x)
				}
			} else {
				t.span = math.Max(t.span, it.Duration())
			}
		}
	}
	t.all = t.rows
	t.applyFilter()
}

// applyFilter keeps the ranks the query names: a number is a rank, other
// text is looked for in the real and simulated file paths.
func (t *tracesTab) applyFilter() {
	q := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t.query), "rank")))
	t.rows = t.rows[:0:0]
	for _, r := range t.all {
		if q == "" || t.matches(&r, q) {
			t.rows = append(t.rows, r)
		}
	}
	t.sortRows()
	t.list.SetN(len(t.rows))
}

func (t *tracesTab) matches(r *traceRow, q string) bool {
	if n, err := strconv.Atoi(q); err == nil {
		return r.rank == n
	}
	for _, rk := range []*trace.Rank{r.real, r.sim} {
		if rk != nil && strings.Contains(strings.ToLower(rk.Path), q) {
			return true
		}
	}
	return false
}

// columns reduces an iteration to w columns on the shared time axis.
func (t *tracesTab) columns(it *trace.Iteration, w int) []float64 {
	if it.X == trace.Steps {
		return trace.TimeColumns(it.T, it.Allocated, w, t.stepLo, t.stepHi-t.stepLo)
	}
	origin := math.NaN()
	for _, x := range it.T {
		if !math.IsNaN(x) {
			origin = x
			break
		}
	}
	return trace.TimeColumns(it.T, it.Allocated, w, origin, t.span)
}

// axisLabel names the shared time axis's end, for list and heatmap headers.
func (t *tracesTab) axisLabel() string {
	if t.stepHi >= t.stepLo && t.span == 0 {
		return fmt.Sprintf("steps %.0f-%.0f", t.stepLo, t.stepHi)
	}
	return fmt.Sprintf("0-%.2fs", t.span)
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
	if t.list.Cursor < 0 || t.list.Cursor >= len(t.rows) {
		return nil
	}
	return &t.rows[t.list.Cursor]
}

func (t *tracesTab) update(c *tabContext, msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case openRankMsg:
		t.openRank(c, m)
		return nil
	case exportMsg:
		return exportTraces(c, t)
	case tea.MouseWheelMsg:
		d := 3
		if m.Button == tea.MouseWheelUp {
			d = -3
		}
		t.list.Scroll(d)
		return nil
	case tea.MouseClickMsg:
		if t.mode == modeList && m.Y >= 2 {
			if t.list.Click(m.Y-2) && m.Button == tea.MouseLeft {
				return nil
			}
		}
		return nil
	case tea.KeyPressMsg:
		if t.filterOn {
			switch m.String() {
			case "esc", "enter":
				t.filterOn = false
				t.filter.Blur()
				if m.String() == "esc" {
					t.query = ""
					t.applyFilter()
				}
				return nil
			}
			var cmd tea.Cmd
			t.filter, cmd = t.filter.Update(msg)
			if v := t.filter.Value(); v != t.query {
				t.query = v
				t.applyFilter()
				t.list.Home()
			}
			return cmd
		}
		if t.mode == modeDetail {
			return t.detailKey(c, m)
		}
		if key.Matches(m, tkFilter) {
			t.filterOn = true
			t.filter.SetValue(t.query)
			return t.filter.Focus()
		}
		if widget.ListMove(&t.list, m) {
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
					t.list.Cursor = i
					t.list.Clamp()
				}
			}
			if t.sortErr {
				c.setStatus("sorted by |peak error|, largest first")
			} else {
				c.setStatus("sorted by rank")
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
		case key.Matches(m, widget.KeyBack):
			t.mode = modeList
		case key.Matches(m, kExport):
			return exportTraces(c, t)
		}
	}
	return nil
}

func (t *tracesTab) detailKey(c *tabContext, m tea.KeyPressMsg) tea.Cmd {
	r := t.cur()
	switch {
	case key.Matches(m, widget.KeyBack):
		t.mode = modeList
	case key.Matches(m, tkTheo):
		t.showTheo = !t.showTheo
	case key.Matches(m, tkResv):
		t.showResv = !t.showResv
	case key.Matches(m, tkRelTime):
		t.relTime = !t.relTime
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
	case key.Matches(m, widget.KeyUp):
		t.list.Move(-1)
		t.iterIdx = -1
	case key.Matches(m, widget.KeyDown):
		t.list.Move(1)
		t.iterIdx = -1
	case key.Matches(m, kExport):
		return exportTraces(c, t)
	}
	return nil
}

func (t *tracesTab) view(c *tabContext) string {
	th := c.th
	if t.src == nil {
		return t.emptyView(c)
	}
	if t.src.State != model.Loaded {
		return th.Dim.Render("loading " + t.src.Name() + "…")
	}
	switch t.mode {
	case modeDetail:
		return t.detailView(c)
	case modeHeatmap:
		return t.heatmapView(c)
	}
	return t.listView(c)
}

func (t *tracesTab) emptyView(c *tabContext) string {
	var b strings.Builder
	b.WriteString(c.th.Title.Render("No traces loaded") + "\n\n")
	b.WriteString("Open per-rank memory traces: memscope DIR (memory_trace_rank*.json, torchtitan\n")
	b.WriteString("memory exports or training logs), or a parent holding memory_traces/ and\n")
	b.WriteString("memory_traces_scaling/ to compare a real run with its simulation.\n")
	// Paths that could not be opened at all (missing, unreadable, nothing
	// known inside) are said here, where the user looks first.
	for _, s := range c.sources {
		if (s.Kind.IsTrace() || s.Kind == model.KindUnknown) && s.State == model.Failed {
			b.WriteString("\n" + c.th.Err.Render("✗ "+safe(s.Name())+": ") + safe(s.Err.Error()))
		}
	}
	return b.String()
}

func (t *tracesTab) header(c *tabContext) string {
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
			parts = append(parts, c.th.Err.Render(fmt.Sprintf("▼ %s underestimated by the simulation", plural(n, "rank"))))
		}
	} else {
		parts = append(parts, plural(len(t.rows), "rank")+" (one run: no simulation to compare)")
	}
	if n := s.ErrorCount(); n > 0 {
		parts = append(parts, c.th.Err.Render(fmt.Sprintf("✗ %s (o)", plural(n, "file error"))))
	}
	order := "rank"
	if t.sortErr {
		order = "|error|"
	}
	parts = append(parts, "sort: "+order)
	return c.th.Bold.Render(s.Name()) + "  " + strings.Join(parts, " · ")
}

// errStyle colours a peak error by sign and size: below zero (the plan
// would OOM) is the alarm, large overestimates a warning.
func errStyle(th widget.Theme, e float64) (string, lipgloss.Style) {
	if math.IsNaN(e) {
		return "—", th.Dim
	}
	s := fmt.Sprintf("%+.2f%%", e)
	switch {
	case e < -0.005:
		return "▼" + s, th.Err
	case math.Abs(e) >= 10:
		return "▲" + s, th.Warn
	case math.Abs(e) >= 2:
		return "▲" + s, th.Warn
	}
	return " " + s, th.OK
}

func (t *tracesTab) spark(it *trace.Iteration, w int, st lipgloss.Style) string {
	if it == nil {
		return strings.Repeat(" ", w)
	}
	k := sparkKey{it, w}
	if s, ok := t.sparkMemo[k]; ok {
		return s
	}
	s := widget.Spark(t.columns(it, w), t.lo, t.hi, st)
	t.sparkMemo[k] = s
	return s
}

func (t *tracesTab) listView(c *tabContext) string {
	th := c.th
	fixed := 6 + 11 + 11 + 10 + 8 + 12 + 7 + 3
	sw := max(4, (t.w-fixed)/2)
	var b strings.Builder
	b.WriteString(widget.Fit(t.header(c), t.w) + "\n")
	// Narrow sparklines get short whole words, not "REAL …" and "SIMUL…".
	realHdr, simHdr := "REAL allocated, "+t.axisLabel(), "SIMULATED, same axis"
	if sw < len(simHdr) {
		realHdr, simHdr = "REAL", "SIM"
	}
	hdr := fmt.Sprintf("%4s  %-*s %-*s %10s %10s %9s %7s %11s %6s", "RANK", sw, widget.Fit(realHdr, sw), sw, widget.Fit(simHdr, sw),
		"REAL PEAK", "SIM PEAK", "ERROR", "CURVE", "TIME R/S", "S/R")
	b.WriteString(th.Header.Render(widget.Fit(hdr, t.w)) + "\n")
	realSt, simSt := th.Fg(palette.Real), th.Fg(palette.Sim)
	from, to := t.list.Visible()
	for i := from; i < to; i++ {
		r := &t.rows[i]
		es, est := errStyle(th, r.errPct)
		line := fmt.Sprintf("%4d  %s %s %10s %10s %s %7s %11s %6s", r.rank, t.spark(r.realIt, sw, realSt), t.spark(r.simIt, sw, simSt),
			mibStr(r.realPeak), mibStr(r.simPeak), est.Render(widget.FitLeft(es, 9)), pctStr(r.curvePct), durPair(r.realIt, r.simIt), ratioStr(r.durRatio))
		if i == t.list.Cursor {
			line = th.Sel.Render(widget.Fit(stripStyle(line), t.w))
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	if len(t.rows) == 0 {
		b.WriteString(th.Dim.Render("no ranks") + "\n")
	}
	for i := to - from; i < t.list.Height; i++ {
		b.WriteString("\n")
	}
	hint := "TIME R/S = real and simulated iteration seconds, S/R their ratio · enter detail · s sort · h heatmap · / filter · o sources"
	if h := t.list.Hint(); h != "" {
		hint = h + " · " + hint
	}
	switch {
	case t.filterOn:
		b.WriteString(widget.Fit(t.filter.View()+th.Dim.Render("  (enter keeps, esc clears)"), t.w))
	case t.query != "":
		b.WriteString(th.Dim.Render(widget.Fit(fmt.Sprintf("filter %q: %d of %d ranks · / changes, esc in the filter clears · ", t.query, len(t.rows), len(t.all))+hint, t.w)))
	default:
		b.WriteString(th.Dim.Render(widget.Fit(hint, t.w)))
	}
	return b.String()
}

// durPair shows the real and simulated iterations' durations in seconds
// (blank for step-based sources, whose x is not time).
func durPair(r, s *trace.Iteration) string {
	d := func(it *trace.Iteration) string {
		if it == nil || it.X == trace.Steps {
			return "—"
		}
		return fmt.Sprintf("%.2f", it.Duration())
	}
	if (r == nil || r.X == trace.Steps) && (s == nil || s.X == trace.Steps) {
		return "—"
	}
	return d(r) + "/" + d(s)
}

func ratioStr(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return fmt.Sprintf("%.2fx", v)
}

// stripStyle drops ANSI styling (for the reverse-video selected row).
func stripStyle(s string) string { return ansiStrip(s) }

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

// openRank shows rank n's detail (:rank N); without such a rank it passes
// the request on when the message says where.
func (t *tracesTab) openRank(c *tabContext, m openRankMsg) {
	for i, r := range t.rows {
		if r.rank == m.n {
			c.send(switchTabMsg{tabTraces})
			t.list.Cursor = i
			t.list.Clamp()
			t.mode, t.iterIdx = modeDetail, -1
			return
		}
	}
	if m.orElse != nil {
		c.send(toTab{*m.orElse, openRankMsg{n: m.n}})
		return
	}
	c.setStatus("no rank %d among the traces", m.n)
}

// rankNumbers lists the ranks of the traces shown.
func (t *tracesTab) rankNumbers() []int {
	var out []int
	for _, r := range t.rows {
		out = append(out, r.rank)
	}
	return out
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
