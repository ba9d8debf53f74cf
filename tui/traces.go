package tui

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
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
	sparkMemo map[sparkKey]string
	// The time axis shared by sparklines and heatmap rows: seconds since
	// each iteration's start up to the longest iteration (span), or steps
	// from stepLo to stepHi for step-based sources.
	span           float64
	stepLo, stepHi float64
	// all holds every rank; rows the ones the filter (/) keeps.
	all    []traceRow
	filter widget.Filter
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
	return &tracesTab{sparkMemo: map[sparkKey]string{}, filter: widget.NewFilter("rank number or file path")}
}

func (t *tracesTab) id() tabID { return tabTraces }

func (t *tracesTab) name() string { return "Traces" }

func (t *tracesTab) capturing() bool { return t.filter.Typing() }

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
	q := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t.filter.Query()), "rank")))
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
		if t.filter.Typing() {
			cmd, changed := t.filter.Update(msg)
			if changed {
				t.applyFilter()
				t.list.Home()
			}
			return cmd
		}
		if t.mode == modeDetail {
			return t.detailKey(c, m)
		}
		if key.Matches(m, tkFilter) {
			return t.filter.Start()
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
	if t.src == nil {
		return t.emptyView(c)
	}
	if t.src.State != model.Loaded {
		return loadingView(c, t.src)
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
	return c.th.Bold.Render(srcName(s)) + "  " + strings.Join(parts, " · ")
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
	case t.filter.Typing():
		b.WriteString(widget.Fit(t.filter.View()+th.Dim.Render("  (enter keeps, esc clears)"), t.w))
	case t.filter.Query() != "":
		b.WriteString(th.Dim.Render(widget.Fit(fmt.Sprintf("filter %q: %d of %d ranks · / changes, esc in the filter clears · ", t.filter.Query(), len(t.rows), len(t.all))+hint, t.w)))
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
