package plot

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"memscope/internal/textsafe"
	"memscope/internal/units"
)

// Layout of every picture, in points.
const (
	// margin is the blank border around a picture: nothing touches its edge.
	margin = vg.Length(12)
	// legendGap separates the data from the legend, which sits in its own
	// column right of the data and never covers it.
	legendGap = vg.Length(12)
	// labelGap separates a bar's end from its value label.
	labelGap = vg.Length(3)
	// maxBar is the widest a bar is drawn, however few there are.
	maxBar = vg.Length(40)
)

// Headroom above the largest value, as a fraction of the range, so no
// curve or bar touches the frame (matplotlib's default margin is 5%).
const (
	lineMargin = 0.05
	barMargin  = 0.12 // value labels sit above vertical bars
)

var labelColor = color.Gray{Y: 60}

// layout is a figure ready to draw: the plot and its legend, kept apart so
// the legend goes in its own column, and the picture's size.
type layout struct {
	f       *Figure
	p       *gplot.Plot
	legend  gplot.Legend
	entries int
	w, h    vg.Length
	legendW vg.Length
	// bars holds each series' chart (nil for a series of one-colour-per-bar
	// charts); allBars every chart.
	bars, allBars []*plotter.BarChart
	// valueLabels are the texts drawn at the bars' ends, in bar order,
	// per series (tests read them).
	valueLabels [][]string
	labels      []*plotter.Labels
}

// Save renders a figure; the format follows the extension (.png, .svg,
// .pdf, .jpg).
func Save(f *Figure, path string) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	switch format {
	case "png", "svg", "pdf", "jpg", "jpeg", "eps", "tif", "tiff":
	default:
		return fmt.Errorf("%s: unknown picture format (use .png or .svg)", path)
	}
	l, err := build(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c, err := draw.NewFormattedCanvas(l.w, l.h, format)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	l.draw(draw.New(c))
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(out); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return out.Close()
}

// size is a figure's picture size: horizontal bar charts grow with their
// bars, so thirty call sites stay readable and two categories do not
// become slabs.
func size(f *Figure) (vg.Length, vg.Length) {
	if f.Kind == HBars {
		n := float64(len(f.Labels))
		return Width, vg.Length(math.Max(3.2, 0.3*n+1.6)) * vg.Inch
	}
	return Width, Height
}

func build(f *Figure) (*layout, error) {
	p := gplot.New()
	p.Title.Text = textsafe.Safe(f.Title)
	if f.Note != "" {
		p.Title.Text += "\n" + textsafe.Safe(f.Note)
	}
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	grid := plotter.NewGrid()
	// Grid lines through nominal categories would run through the bars'
	// value labels and mean nothing.
	switch f.Kind {
	case Bars:
		grid.Vertical.Color = nil
	case HBars:
		grid.Horizontal.Color = nil
	}
	p.Add(grid)
	l := &layout{f: f, p: p}
	l.w, l.h = size(f)
	switch f.Kind {
	case Lines:
		if err := addLines(p, f, f.Series, f.HLines); err != nil {
			return nil, err
		}
	case Bars, HBars:
		if err := l.addBars(); err != nil {
			return nil, err
		}
	case Stacked:
		if err := addStacked(p, f); err != nil {
			return nil, err
		}
	}
	// The legend is drawn by layout.draw in a column of its own.
	l.legend, p.Legend = p.Legend, gplot.NewLegend()
	l.legend.Top, l.legend.Left = true, true
	l.legend.TextStyle.Font.Size = vg.Points(10)
	l.legend.Padding = vg.Points(3)
	l.entries = legendEntries(f)
	if l.entries > 0 {
		w := l.legend.Rectangle(draw.Canvas{}).Size().X
		for _, v := range f.VLines { // added once the Y range is known
			w = max(w, l.legend.ThumbnailWidth+l.legend.TextStyle.Width(" "+textsafe.Safe(v.Name)))
		}
		l.legendW = w + legendGap
		l.legendW = vg.Length(math.Min(float64(l.legendW), 0.4*float64(l.w)))
	}
	l.tiltCrowdedLabels()
	l.setRanges()
	if err := l.addVLines(); err != nil {
		return nil, err
	}
	if err := l.fitBars(); err != nil {
		return nil, err
	}
	return l, nil
}

// legendEntries counts what addLines, addBars and addStacked put in the
// legend: every named series and reference line.
func legendEntries(f *Figure) int {
	n := 0
	for _, group := range [][]Series{f.Series, f.HLines, f.VLines, f.Overlay} {
		for _, s := range group {
			if s.Name != "" && len(s.Colors) == 0 {
				n++
			}
		}
	}
	return n
}

// draw lays the picture out inside its margin: the plot left, the legend
// right, its top level with the data's top.
func (l *layout) draw(c draw.Canvas) {
	c = draw.Crop(c, margin, -margin, margin, -margin)
	plotC := draw.Crop(c, 0, -l.legendW, 0, 0)
	l.p.Draw(plotC)
	if l.entries == 0 {
		return
	}
	data := l.p.DataCanvas(plotC)
	legC := c
	legC.Min.X = c.Max.X - l.legendW + legendGap
	legC.Max.Y = data.Max.Y
	l.legend.Draw(legC)
}

// dataCanvas is where the data is drawn in a picture of the layout's size.
func (l *layout) dataCanvas() draw.Canvas {
	c := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: l.w, Y: l.h}}}
	c = draw.Crop(c, margin, -margin, margin, -margin)
	return l.p.DataCanvas(draw.Crop(c, 0, -l.legendW, 0, 0))
}

// extent is the finite range of a set of values.
type extent struct{ lo, hi float64 }

func newExtent() extent { return extent{math.Inf(1), math.Inf(-1)} }

func (e *extent) add(vs ...float64) {
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			e.lo, e.hi = math.Min(e.lo, v), math.Max(e.hi, v)
		}
	}
}

func (e extent) ok() bool { return e.lo <= e.hi }

// padded widens the extent by frac of its span on each side; a side at or
// above 0 is not pushed below it (memory is never negative).
func (e extent) padded(frac float64) (float64, float64) {
	if !e.ok() {
		return 0, 1
	}
	span := e.hi - e.lo
	if span == 0 {
		span = math.Max(math.Abs(e.hi), 1)
	}
	lo, hi := e.lo-frac*span, e.hi+frac*span
	if e.lo >= 0 && lo < 0 {
		lo = 0
	}
	return lo, hi
}

func allIntegers(groups ...[]float64) bool {
	for _, g := range groups {
		for _, v := range g {
			if !math.IsNaN(v) && v != math.Trunc(v) {
				return false
			}
		}
	}
	return true
}

// setRanges gives every axis its headroom and round ticks.
func (l *layout) setRanges() {
	f, p := l.f, l.p
	var xs, ys [][]float64
	ex, ey := newExtent(), newExtent()
	switch f.Kind {
	case Lines:
		for _, s := range f.Series {
			ex.add(s.X...)
			ey.add(s.Y...)
			xs, ys = append(xs, s.X), append(ys, s.Y)
		}
		for _, s := range f.HLines {
			ey.add(s.Y...)
		}
		for _, s := range f.VLines {
			ex.add(s.X...)
		}
		p.X.Min, p.X.Max = ex.padded(0.02)
		p.Y.Min, p.Y.Max = ey.padded(lineMargin)
	case Stacked:
		ey.add(0)
		for _, s := range append(stackedTotals(f), f.Overlay...) {
			ex.add(s.X...)
			ey.add(s.Y...)
			xs = append(xs, s.X)
		}
		p.X.Min, p.X.Max = ex.padded(0.01)
		p.Y.Min, p.Y.Max = ey.padded(lineMargin)
		p.Y.Min = 0
	case Bars, HBars:
		ev := newExtent()
		ev.add(0)
		for _, s := range f.Series {
			ev.add(s.Y...)
			ys = append(ys, s.Y)
		}
		lo, hi := ev.padded(0)
		if hi <= lo {
			hi = lo + 1
		}
		n := float64(len(f.Labels))
		if f.Kind == Bars {
			p.X.Min, p.X.Max = -0.5, n-0.5
			p.Y.Min, p.Y.Max = lo, hi+barMargin*(hi-lo)
		} else {
			p.Y.Min, p.Y.Max = -0.5, n-0.5
			// Room right of the longest bar for its value label.
			p.X.Min, p.X.Max = lo, hi+lineMargin*(hi-lo)
			lw := vg.Length(0)
			sty := valueStyle()
			for _, ls := range l.valueLabels {
				for _, s := range ls {
					lw = max(lw, sty.Width(s))
				}
			}
			if data := l.dataCanvas(); data.Size().X > 0 {
				frac := float64(lw+2*labelGap) / float64(data.Size().X)
				if frac < 0.5 {
					p.X.Max = lo + (p.X.Max-lo)/(1-frac)
				}
			}
			p.X.Tick.Marker = niceTicker{integer: f.YUnit == "" && allIntegers(ys...)}
			return
		}
		p.Y.Tick.Marker = niceTicker{integer: f.YUnit == "" && allIntegers(ys...)}
		return
	}
	p.X.Tick.Marker = niceTicker{integer: allIntegers(xs...)}
	p.Y.Tick.Marker = niceTicker{integer: f.YUnit == "" && allIntegers(ys...)}
}

// stackedTotals are the top edges of a stacked figure's bands.
func stackedTotals(f *Figure) []Series {
	if len(f.Series) == 0 {
		return nil
	}
	n := len(f.Series[0].X)
	run := make([]float64, n)
	for _, s := range f.Series {
		for i := 0; i < n && i < len(s.Y); i++ {
			if !math.IsNaN(s.Y[i]) {
				run[i] += s.Y[i]
			}
		}
	}
	return []Series{{X: f.Series[0].X, Y: run}}
}

// addVLines draws the vertical reference lines over the whole, final Y
// range.
func (l *layout) addVLines() error {
	for _, v := range l.f.VLines {
		if len(v.X) == 0 {
			continue
		}
		v.X = []float64{v.X[0], v.X[0]}
		v.Y = []float64{l.p.Y.Min, l.p.Y.Max}
		if err := addLine(l.p, &l.legend, v, vg.Points(1.2)); err != nil {
			return err
		}
	}
	return nil
}

func valueStyle() text.Style {
	sty := gplot.New().Y.Tick.Label
	sty.Font.Size = vg.Points(8.5)
	sty.Color = labelColor
	return sty
}

// valueLabel writes a bar's value: bytes in the unit they are drawn in,
// counts as integers; a missing value says so. Beside other bars (compact)
// a value is a number in the axis's unit, "58.59", so neighbours do not
// run into each other.
func valueLabel(v float64, unit string, compact bool) string {
	switch {
	case math.IsNaN(v):
		return "no data"
	case unit != "" && compact:
		d := 2
		if math.Abs(v) >= 1000 {
			d = 0
		} else if math.Abs(v) >= 100 {
			d = 1
		}
		return strconv.FormatFloat(v, 'f', d, 64)
	case unit == "GiB":
		return units.BytesF(v * (1 << 30))
	case unit == "MiB":
		return units.BytesF(v * (1 << 20))
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// tiltCrowdedLabels slants the names under vertical bars when they would
// run into each other laid flat.
func (l *layout) tiltCrowdedLabels() {
	if l.f.Kind != Bars || len(l.f.Labels) == 0 {
		return
	}
	sty := l.p.X.Tick.Label
	slot := (l.w - 2*margin - l.legendW - vg.Inch) / vg.Length(len(l.f.Labels))
	for _, s := range l.f.Labels {
		if sty.Width(textsafe.Safe(s))+vg.Points(6) > slot {
			l.p.X.Tick.Label.Rotation = math.Pi / 5
			l.p.X.Tick.Label.XAlign = draw.XRight
			l.p.X.Tick.Label.YAlign = draw.YTop
			return
		}
	}
}
