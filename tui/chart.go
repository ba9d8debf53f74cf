package tui

import (
	"math"

	"charm.land/lipgloss/v2"
	"github.com/NimbleMarkets/ntcharts/v2/canvas"
	"github.com/NimbleMarkets/ntcharts/v2/canvas/graph"
	"github.com/NimbleMarkets/ntcharts/v2/linechart"

	"memscope/trace"
)

// chartSeries is one line of a chart.
type chartSeries struct {
	xs, ys []float64
	style  lipgloss.Style
	// dash draws the line broken, so series stay apart without colour
	// (NO_COLOR, colour blindness): 0 solid, dashDashed, dashDotted.
	dash int
}

const (
	dashDashed = 1 // two braille columns on, two off: ┄ in legends
	dashDotted = 2 // one on, three off: ┈ in legends
)

// chartLine is a horizontal (h) or vertical (!h) reference line.
type chartLine struct {
	at     float64
	style  lipgloss.Style
	vert   bool
	dotted bool
}

// chartSpec describes a braille line chart drawn with ntcharts.
type chartSpec struct {
	w, h                   int
	xmin, xmax, ymin, ymax float64
	xfmt, yfmt             linechart.LabelFormatter
	series                 []chartSeries
	lines                  []chartLine
	axis, label            lipgloss.Style
}

// renderChart draws the chart. Each series is decimated to a few points per
// braille column with min/max kept, so large series draw in bounded time and
// keep their peaks.
func renderChart(c chartSpec) string {
	if c.w < 10 || c.h < 3 {
		return ""
	}
	if !(c.xmax > c.xmin) {
		c.xmax = c.xmin + 1
	}
	if !(c.ymax > c.ymin) {
		c.ymax = c.ymin + 1
	}
	opts := []linechart.Option{linechart.WithXYSteps(max(4, c.w/8), 2), linechart.WithStyles(c.axis, c.label, lipgloss.NewStyle())}
	if c.xfmt != nil {
		opts = append(opts, linechart.WithXLabelFormatter(c.xfmt))
	}
	if c.yfmt != nil {
		opts = append(opts, linechart.WithYLabelFormatter(c.yfmt))
	}
	lc := linechart.New(c.w, c.h, c.xmin, c.xmax, c.ymin, c.ymax, opts...)
	lc.DrawXYAxisAndLabel()
	gw, gh := lc.GraphWidth(), lc.GraphHeight()
	if gw <= 0 || gh <= 0 {
		return lc.View()
	}
	origin := canvas.Point{X: lc.Origin().X + 1, Y: 0}
	// draw joins the points (or only dots them) on one braille grid.
	draw := func(pts []canvas.Float64Point, st lipgloss.Style, connect bool, dash int) {
		g := graph.NewBrailleGrid(gw, gh, c.xmin, c.xmax, c.ymin, c.ymax)
		set := func(p canvas.Point) {
			switch dash {
			case dashDashed:
				if p.X%4 >= 2 {
					return
				}
			case dashDotted:
				if p.X%4 != 0 {
					return
				}
			}
			g.Set(p)
		}
		for i := range pts {
			if !connect || i == 0 {
				set(g.GridPoint(pts[i]))
				continue
			}
			for _, p := range graph.GetLinePoints(g.GridPoint(pts[i-1]), g.GridPoint(pts[i])) {
				set(p)
			}
		}
		graph.DrawBraillePatterns(&lc.Canvas, origin, g.BraillePatterns(), st)
	}
	for _, l := range c.lines {
		var pts []canvas.Float64Point
		if l.vert {
			if l.at < c.xmin || l.at > c.xmax {
				continue
			}
			pts = []canvas.Float64Point{{X: l.at, Y: c.ymin}, {X: l.at, Y: c.ymax}}
		} else {
			if l.at < c.ymin || l.at > c.ymax {
				continue
			}
			pts = []canvas.Float64Point{{X: c.xmin, Y: l.at}, {X: c.xmax, Y: l.at}}
		}
		if l.dotted {
			// Every other braille column/row: a dashed reference line.
			n := gw
			if l.vert {
				n = gh
			}
			var ds []canvas.Float64Point
			for k := 0; k < n; k += 2 {
				f := float64(k) / float64(n)
				if l.vert {
					ds = append(ds, canvas.Float64Point{X: l.at, Y: c.ymin + f*(c.ymax-c.ymin)})
				} else {
					ds = append(ds, canvas.Float64Point{X: c.xmin + f*(c.xmax-c.xmin), Y: l.at})
				}
			}
			draw(ds, l.style, false, 0)
			continue
		}
		draw(pts, l.style, true, 0)
	}
	for _, s := range c.series {
		idx := trace.MinMax(s.ys, gw*2)
		pts := make([]canvas.Float64Point, 0, len(idx))
		for _, i := range idx {
			x, y := s.xs[i], s.ys[i]
			if math.IsNaN(x) || math.IsNaN(y) || x < c.xmin || x > c.xmax {
				continue
			}
			pts = append(pts, canvas.Float64Point{X: x, Y: clampF(y, c.ymin, c.ymax)})
		}
		draw(pts, s.style, true, s.dash)
	}
	return lc.View()
}

func clampF(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

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
