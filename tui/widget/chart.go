package widget

import (
	"fmt"
	"math"

	"charm.land/lipgloss/v2"
	"github.com/NimbleMarkets/ntcharts/v2/canvas"
	"github.com/NimbleMarkets/ntcharts/v2/canvas/graph"
	"github.com/NimbleMarkets/ntcharts/v2/linechart"

	"memscope/trace"
)

// Series is one line of a chart.
type Series struct {
	Xs, Ys []float64
	Style  lipgloss.Style
	// Dash draws the line broken, so series stay apart without colour
	// (NO_COLOR, colour blindness): 0 solid, dashDashed, dashDotted.
	Dash int
}

const (
	DashDashed = 1 // two braille columns on, two off: ┄ in legends
	DashDotted = 2 // one on, three off: ┈ in legends
)

// Line is a horizontal (h) or vertical (!h) reference line.
type Line struct {
	At     float64
	Style  lipgloss.Style
	Vert   bool
	Dotted bool
}

// ChartSpec describes a braille line chart drawn with ntcharts.
type ChartSpec struct {
	W, H                   int
	Xmin, Xmax, Ymin, Ymax float64
	XFmt, YFmt             linechart.LabelFormatter
	Series                 []Series
	Lines                  []Line
	Axis, Label            lipgloss.Style
}

// Chart draws the chart. Each series is decimated to a few points per
// braille column with min/max kept, so large series draw in bounded time and
// keep their peaks.
func Chart(c ChartSpec) string {
	if c.W < 10 || c.H < 3 {
		return ""
	}
	if !(c.Xmax > c.Xmin) {
		c.Xmax = c.Xmin + 1
	}
	if !(c.Ymax > c.Ymin) {
		c.Ymax = c.Ymin + 1
	}
	opts := []linechart.Option{linechart.WithXYSteps(max(4, c.W/8), 2), linechart.WithStyles(c.Axis, c.Label, lipgloss.NewStyle())}
	if c.XFmt != nil {
		opts = append(opts, linechart.WithXLabelFormatter(c.XFmt))
	}
	if c.YFmt != nil {
		opts = append(opts, linechart.WithYLabelFormatter(c.YFmt))
	}
	lc := linechart.New(c.W, c.H, c.Xmin, c.Xmax, c.Ymin, c.Ymax, opts...)
	lc.DrawXYAxisAndLabel()
	gw, gh := lc.GraphWidth(), lc.GraphHeight()
	if gw <= 0 || gh <= 0 {
		return lc.View()
	}
	origin := canvas.Point{X: lc.Origin().X + 1, Y: 0}
	// draw joins the points of each stroke (or only dots them) on one
	// braille grid, so strokes of one style cost one grid.
	draw := func(strokes [][]canvas.Float64Point, st lipgloss.Style, connect bool, dash int) {
		g := graph.NewBrailleGrid(gw, gh, c.Xmin, c.Xmax, c.Ymin, c.Ymax)
		set := func(p canvas.Point) {
			switch dash {
			case DashDashed:
				if p.X%4 >= 2 {
					return
				}
			case DashDotted:
				if p.X%4 != 0 {
					return
				}
			}
			g.Set(p)
		}
		for _, pts := range strokes {
			for i := range pts {
				if !connect || i == 0 {
					set(g.GridPoint(pts[i]))
					continue
				}
				for _, p := range graph.GetLinePoints(g.GridPoint(pts[i-1]), g.GridPoint(pts[i])) {
					set(p)
				}
			}
		}
		graph.DrawBraillePatterns(&lc.Canvas, origin, g.BraillePatterns(), st)
	}
	// Reference lines are grouped by look (style and dotted), in the order
	// each look first appears: a trace with thousands of annotations draws
	// them on one grid, not one grid each.
	type look struct {
		st      lipgloss.Style
		dotted  bool
		strokes [][]canvas.Float64Point
	}
	var looks []*look
	byLook := map[string]*look{}
	for _, l := range c.Lines {
		var pts []canvas.Float64Point
		if l.Vert {
			if l.At < c.Xmin || l.At > c.Xmax {
				continue
			}
			pts = []canvas.Float64Point{{X: l.At, Y: c.Ymin}, {X: l.At, Y: c.Ymax}}
		} else {
			if l.At < c.Ymin || l.At > c.Ymax {
				continue
			}
			pts = []canvas.Float64Point{{X: c.Xmin, Y: l.At}, {X: c.Xmax, Y: l.At}}
		}
		if l.Dotted {
			// Every other braille column/row: a dashed reference line.
			n := gw
			if l.Vert {
				n = gh
			}
			var ds []canvas.Float64Point
			for k := 0; k < n; k += 2 {
				f := float64(k) / float64(n)
				if l.Vert {
					ds = append(ds, canvas.Float64Point{X: l.At, Y: c.Ymin + f*(c.Ymax-c.Ymin)})
				} else {
					ds = append(ds, canvas.Float64Point{X: c.Xmin + f*(c.Xmax-c.Xmin), Y: l.At})
				}
			}
			pts = ds
		}
		key := fmt.Sprint(l.Dotted, l.Style.GetForeground(), l.Style.GetBold())
		lk := byLook[key]
		if lk == nil {
			lk = &look{st: l.Style, dotted: l.Dotted}
			byLook[key] = lk
			looks = append(looks, lk)
		}
		lk.strokes = append(lk.strokes, pts)
	}
	for _, lk := range looks {
		draw(lk.strokes, lk.st, !lk.dotted, 0)
	}
	for _, s := range c.Series {
		idx := trace.MinMax(s.Ys, gw*2)
		pts := make([]canvas.Float64Point, 0, len(idx))
		for _, i := range idx {
			x, y := s.Xs[i], s.Ys[i]
			if math.IsNaN(x) || math.IsNaN(y) || x < c.Xmin || x > c.Xmax {
				continue
			}
			pts = append(pts, canvas.Float64Point{X: x, Y: clampF(y, c.Ymin, c.Ymax)})
		}
		draw([][]canvas.Float64Point{pts}, s.Style, true, s.Dash)
	}
	return lc.View()
}

func clampF(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
