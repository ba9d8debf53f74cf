package tui

import (
	"fmt"
	"math"
	"strings"

	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
	"memscope/snapshot"
	"memscope/trace"
	"memscope/tui/widget"
)

// The Timeline tab's chart: its columns of events, the series drawn in
// them (stacked by band, or the active and reserved lines), and the
// totals at the cursor.

func (t *timelineTab) xv(i int) float64 {
	tl := t.tl
	if t.byTime && tl.Events[i].TimeUS > 0 {
		return float64(tl.Events[i].TimeUS-tl.Events[0].TimeUS) / 1e6
	}
	return float64(i)
}

// series returns the window's allocated and reserved series, decimated to
// a few points per column with peaks kept, cached while the window stays.
func (t *timelineTab) prepareSeries(cols int) {
	tl := t.tl
	k := [4]int{t.x0, t.x1, map[bool]int{true: 1}[t.byTime], cols}
	if k == t.chartKey && t.chartS != nil {
		return
	}
	x0, x1 := t.x0, t.x1
	// pick downsamples the levels of events [x0, x1).
	pick := func(src []int64) ([]float64, []float64, float64) {
		ys := make([]float64, x1-x0)
		mx := 0.0
		for i := range ys {
			ys[i] = float64(src[i])
			mx = math.Max(mx, ys[i])
		}
		idx := trace.MinMax(ys, max(1, cols*2))
		xs, out := make([]float64, len(idx)), make([]float64, len(idx))
		for n, i := range idx {
			xs[n], out[n] = t.xv(x0+i), ys[i]
		}
		return xs, out, mx
	}
	ax, ay, am := pick(tl.Active[x0:x1])
	rx, ry, rm := pick(tl.ReservedRange(x0, x1))
	// Styled when drawn: the theme may change after.
	t.chartS = []widget.Series{{Xs: rx, Ys: ry}, {Xs: ax, Ys: ay}}
	t.chartMax = math.Max(am, rm)
	t.chartKey = k
}

// columnEvents picks the event each of cols columns shows over events
// [x0, x1): the one with the most active memory in the column's range, so
// no peak is lost. The ranges are equal runs of events, or with byTime
// equal slices of time, so events bunch and idle gaps show: a column with
// no event in its slice shows the level left by the last event before
// it. byTime needs times that grow along the trace; ok says whether the
// columns are slices of time.
func columnEvents(tl *snapshot.Timeline, x0, x1, cols int, byTime bool) (out []int, ok bool) {
	times := eventTimes(tl)
	return columnEventsOf(times, tl.Active, x0, x1, cols, byTime && sortedTimes(times[x0:x1]))
}

// columnEventsOf is columnEvents over the events' times (sorted: they grow
// over [x0, x1)) and active memory.
func columnEventsOf(times, active []int64, x0, x1, cols int, sorted bool) (out []int, ok bool) {
	out = make([]int, cols)
	if sorted && times[x0] > 0 && times[x1-1] > times[x0] {
		t0, t1 := times[x0], times[x1-1]
		e := x0
		for c := range cols {
			end := t0 + int64(c+1)*(t1-t0)/int64(cols)
			if c == cols-1 {
				end = t1 + 1
			}
			best := -1
			for ; e < x1 && times[e] < end; e++ {
				if best < 0 || active[e] > active[best] {
					best = e
				}
			}
			if best < 0 {
				best = max(x0, e-1) // idle: the level the last event left
			}
			out[c] = best
		}
		return out, true
	}
	span := x1 - x0
	for c := range cols {
		lo := x0 + c*span/cols
		hi := max(lo+1, x0+(c+1)*span/cols)
		best := lo
		for e := lo; e < hi && e < x1; e++ {
			if active[e] > active[best] {
				best = e
			}
		}
		out[c] = best
	}
	return out, false
}

// eventTimes copies the events' times into one array: a window's scans
// read 8 bytes an event instead of striding over whole trace entries.
func eventTimes(tl *snapshot.Timeline) []int64 {
	out := make([]int64, len(tl.Events))
	for i := range tl.Events {
		out[i] = tl.Events[i].TimeUS
	}
	return out
}

func sortedTimes(ts []int64) bool {
	for i := 1; i < len(ts); i++ {
		if ts[i] < ts[i-1] {
			return false
		}
	}
	return true
}

// maxBands is how many bands the stacked chart names (the rest: other).
const maxBands = 8

// stacked draws active memory stacked in bands over the window, the
// reserved line over it, the bands at the cursor named in the legend.
func (t *timelineTab) stacked(c *tabContext, h int) string {
	th := c.th
	tl := t.tl
	names := t.bands.Names
	styles := make([]lipgloss.Style, len(names))
	glyphs := make([]string, len(names))
	for i, n := range names {
		glyphs[i] = "█"
		switch {
		case th.NoColor:
			glyphs[i] = widget.BandGlyphs[i%len(widget.BandGlyphs)]
		case t.bandBy == snapshot.BandSite:
			styles[i] = th.Fg(palette.Band(i))
		default:
			styles[i] = th.Category(n)
		}
	}
	// The legend names each band with its bytes at the cursor.
	atCursor := t.atCursor
	var legend []string
	for i, n := range names {
		if atCursor[i] == 0 {
			continue
		}
		label := n
		if t.bandBy == snapshot.BandSite {
			label = widget.FitTail(safe(n), 40)
		}
		legend = append(legend, styles[i].Render(glyphs[i])+" "+label+" "+bytesStr(atCursor[i]))
	}
	legend = append(legend, th.Fg(palette.Reserved).Render("─")+" reserved")
	cursorCol := -1
	for c, e := range t.stackEvent {
		if e == t.cursor || (e > t.cursor && c > 0 && t.stackEvent[c-1] < t.cursor) {
			cursorCol = c
			break
		}
	}
	var ticks []widget.XTick
	if !t.stackByTime && len(t.stackEvent) > 0 {
		// Columns are evenly spaced events: label round event numbers.
		ticks = widget.RoundTicks(float64(t.x0), float64(t.x1), len(t.stackEvent), true)
	}
	chart := widget.Stacked(widget.StackedSpec{W: t.w, H: h - 1, Cols: t.stackCols, Reserved: t.stackResv, YMax: t.stackMax * 1.05, XTicks: ticks,
		Styles: styles, Glyphs: glyphs, Line: th.Fg(palette.Reserved), Axis: th.Dim, Cursor: cursorCol, CursorStyle: th.Accent,
		XLabel: func(c int) string {
			if t.stackByTime {
				// Where the column starts in time: columns are equal slices.
				t0, t1 := tl.Events[t.x0].TimeUS, tl.Events[t.x1-1].TimeUS
				at := t0 + int64(c)*(t1-t0)/int64(len(t.stackEvent))
				return fmt.Sprintf("%.2fs", float64(at-tl.Events[0].TimeUS)/1e6)
			}
			return fmt.Sprint(t.x0 + c*(t.x1-t.x0)/len(t.stackEvent)) // where the column starts
		},
		YLabel: func(v float64) string { return bytesStr(int64(v)) }})
	return widget.Fit(strings.Join(legend, "  "), t.w) + "\n" + chart
}

func (t *timelineTab) chart(c *tabContext, h int) string {
	if !t.lines {
		return t.stacked(c, h)
	}
	th := c.th
	tl := t.tl
	x0, x1 := t.x0, t.x1
	if x1 <= x0 {
		return ""
	}
	series := []widget.Series{t.chartS[0], t.chartS[1]}
	series[0].Style, series[1].Style = th.Fg(palette.Reserved), th.Fg(palette.Real)
	ymax := t.chartMax
	lines := []widget.Line{}
	for _, m := range tl.Markers {
		if m.Index < x0 || m.Index >= x1 {
			continue
		}
		st := th.Dim
		if m.Kind == snapshot.MarkOOM {
			st = th.Fg(palette.OOM)
		}
		lines = append(lines, widget.Line{At: t.xv(m.Index), Vert: true, Dotted: true, Style: st})
	}
	if p := tl.Peak.EventIndex; p >= x0 && p < x1 {
		lines = append(lines, widget.Line{At: t.xv(p), Vert: true, Dotted: true, Style: th.Fg(palette.Peak)})
	}
	if t.cursor >= x0 && t.cursor < x1 {
		lines = append(lines, widget.Line{At: t.xv(t.cursor), Vert: true, Style: th.Accent})
	}
	xfmt := func(_ int, v float64) string {
		if t.byTime {
			return fmt.Sprintf("%.2fs", v)
		}
		return fmt.Sprintf("%.0f", v)
	}
	yfmt := func(_ int, v float64) string { return bytesStr(int64(v)) }
	return widget.Chart(widget.ChartSpec{W: t.w, H: h, Xmin: t.xv(x0), Xmax: t.xv(x1 - 1), Ymin: 0, Ymax: ymax * 1.05, XFmt: xfmt, YFmt: yfmt,
		Series: series, Lines: lines, Axis: th.Dim, Label: th.Dim})
}

// prepare does the work the view needs for the cursor, window, size and
// grouping now (bands, columns, the live set), so that view only draws.
// Each piece is cached by what it depends on. The App calls it after each
// message while the tab is in front (preparer): a Timeline nobody looks at
// costs nothing when a watched file reloads.
func (t *timelineTab) prepare() {
	if t.tl == nil || len(t.tl.Events) == 0 || t.x1 <= t.x0 {
		return
	}
	tl := t.tl
	if t.lines {
		t.prepareSeries(t.w)
	} else {
		if k := [2]any{tl, t.bandBy}; t.bands == nil || t.bandsKey != k {
			if t.bandsOf == nil {
				t.bandsOf = map[snapshot.BandBy]*snapshot.Bands{}
			}
			if t.bandsOf[t.bandBy] == nil {
				t.bandsOf[t.bandBy] = tl.Bands(t.bandBy, maxBands)
			}
			t.bands, t.bandsKey = t.bandsOf[t.bandBy], k
			t.stackCols = nil
		}
		cols := max(1, t.w-11)
		if k := [5]int{t.x0, t.x1, cols, int(t.bandBy), map[bool]int{true: 1}[t.byTime]}; t.stackCols == nil || t.stackKey != k {
			sorted := false
			if t.byTime {
				if t.times == nil {
					t.times = eventTimes(tl)
					t.timesSorted = sortedTimes(t.times)
				}
				sorted = t.timesSorted || sortedTimes(t.times[t.x0:t.x1])
			}
			// times is nil until the axis is time; unsorted, it is not read.
			t.stackEvent, t.stackByTime = columnEventsOf(t.times, tl.Active, t.x0, t.x1, cols, sorted)
			t.stackCols = tl.Totals(t.bands, t.stackEvent)
			t.stackResv = make([]int64, cols)
			t.stackMax = 0
			for c, e := range t.stackEvent {
				t.stackResv[c] = tl.ReservedAt(e)
				t.stackMax = max(t.stackMax, float64(t.stackResv[c]), float64(tl.ActiveAt(e)))
			}
			t.stackKey = k
			t.atCursorAt = -2
		}
		if t.atCursorAt != t.cursor {
			t.atCursor, t.atCursorAt = cursorTotals(tl, t.bands, t.stackEvent, t.stackCols, t.cursor), t.cursor
		}
	}
	if t.showState {
		t.stateList.SetHeight(max(1, t.h-t.chartHeight()-6))
		if t.state != nil {
			t.stateList.SetN(len(t.state.Segments))
		}
		return
	}
	t.ensureLive()
}

// cursorTotals is the bytes of each band right after event cursor, counted
// from the chart column whose event is nearest (a few thousand intervals
// start or end between them), not by a sweep of every interval.
func cursorTotals(tl *snapshot.Timeline, b *snapshot.Bands, events []int, cols [][]int64, cursor int) []int64 {
	near := -1
	for c, e := range events {
		if near < 0 || abs(e-cursor) < abs(events[near]-cursor) {
			near = c
		}
	}
	if near < 0 {
		return tl.Totals(b, []int{cursor})[0]
	}
	return tl.TotalsFrom(b, cols[near], events[near], cursor)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
