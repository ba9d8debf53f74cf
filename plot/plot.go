// Package plot draws memscope's pictures to share (PNG, SVG, by file
// extension) with gonum.org/v1/plot: per-rank real vs simulated memory,
// snapshot overviews, category breakdowns, size distributions, efficiency,
// estimate phases and modules, and timelines. Each picture is first built
// as a Figure holding exactly the data it draws (tests compare it with the
// JSON reports), then rendered.
package plot

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"memscope/internal/palette"
)

// Kind is the shape of a figure.
type Kind int

// Figure kinds.
const (
	Lines   Kind = iota // X/Y lines
	Bars                // one bar per label, one group per series
	HBars               // horizontal bars (long labels: categories, call sites)
	Stacked             // Series are bands stacked bottom first over shared X; Overlay lines drawn on top
)

// Series is one line or one group of bars.
type Series struct {
	Name  string
	X, Y  []float64
	Color string // hex
	// Dashed draws a line dashed (simulations, reference lines).
	Dashed bool
	// Colors gives each bar its own colour (categories).
	Colors []string
}

// Figure is a picture's data and labels, before rendering.
type Figure struct {
	Title, XLabel, YLabel string
	Kind                  Kind
	// Labels name the bars (Bars, HBars).
	Labels []string
	Series []Series
	// HLines and VLines are reference lines (static, theoretical, peak).
	HLines, VLines []Series
	// Overlay are lines drawn over a Stacked figure's bands (reserved).
	Overlay []Series
	// YUnit is the byte unit the Y values were divided by ("GiB", "MiB"),
	// empty when Y is not bytes.
	YUnit string
	// Note is printed under the title.
	Note string
}

// Size of saved pictures.
const (
	Width  = 10 * vg.Inch
	Height = 5.5 * vg.Inch
)

func rgb(hex string) color.Color {
	h := strings.TrimPrefix(hex, "#")
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil || len(h) != 6 {
		return color.Gray{Y: 128}
	}
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}

// ByteUnit picks GiB or MiB for a maximum in bytes.
func ByteUnit(maxBytes float64) (string, float64) {
	if maxBytes >= 2*(1<<30) {
		return "GiB", 1 << 30
	}
	return "MiB", 1 << 20
}

// Save renders a figure; the format follows the extension (.png, .svg,
// .pdf, .jpg).
func Save(f *Figure, path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg", ".pdf", ".jpg", ".jpeg", ".eps", ".tif", ".tiff":
	default:
		return fmt.Errorf("%s: unknown picture format (use .png or .svg)", path)
	}
	p := gplot.New()
	p.Title.Text = f.Title
	if f.Note != "" {
		p.Title.Text += "\n" + f.Note
	}
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	switch f.Kind {
	case Lines:
		if err := addLines(p, f); err != nil {
			return err
		}
	case Bars, HBars:
		if err := addBars(p, f); err != nil {
			return err
		}
	case Stacked:
		if err := addStacked(p, f); err != nil {
			return err
		}
	}
	w, h := Width, Height
	if f.Kind == HBars {
		h = vg.Length(math.Max(float64(Height), float64(len(f.Labels))*0.28*float64(vg.Inch)+1.5*float64(vg.Inch)))
	}
	return p.Save(w, h, path)
}

func xys(s Series) plotter.XYs {
	pts := make(plotter.XYs, 0, len(s.X))
	for i := range s.X {
		if math.IsNaN(s.X[i]) || math.IsNaN(s.Y[i]) || math.IsInf(s.Y[i], 0) {
			continue
		}
		pts = append(pts, plotter.XY{X: s.X[i], Y: s.Y[i]})
	}
	return pts
}

func addLines(p *gplot.Plot, f *Figure) error {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, s := range f.Series {
		for _, x := range s.X {
			if !math.IsNaN(x) {
				xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			}
		}
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	add := func(s Series, width vg.Length) error {
		pts := xys(s)
		if len(pts) == 0 {
			return nil
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = rgb(s.Color)
		l.Width = width
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l)
		if s.Name != "" {
			p.Legend.Add(s.Name, l)
		}
		return nil
	}
	for _, s := range f.Series {
		if err := add(s, vg.Points(1.6)); err != nil {
			return err
		}
	}
	for _, h := range f.HLines {
		h.X = []float64{xmin, xmax}
		h.Y = []float64{h.Y[0], h.Y[0]}
		if err := add(h, vg.Points(1.3)); err != nil {
			return err
		}
	}
	for _, v := range f.VLines {
		ymin, ymax := p.Y.Min, p.Y.Max
		v.Y = []float64{ymin, ymax}
		v.X = []float64{v.X[0], v.X[0]}
		if err := add(v, vg.Points(1.2)); err != nil {
			return err
		}
	}
	return nil
}

// addStacked fills each band between the bands below it and itself: the
// cumulative curves are drawn from the top down, each filled to zero, so
// every band shows its own share; then the overlay lines go on top.
func addStacked(p *gplot.Plot, f *Figure) error {
	if len(f.Series) == 0 {
		return nil
	}
	n := len(f.Series[0].X)
	cum := make([][]float64, len(f.Series))
	run := make([]float64, n)
	for b, s := range f.Series {
		for i := 0; i < n && i < len(s.Y); i++ {
			if !math.IsNaN(s.Y[i]) {
				run[i] += s.Y[i]
			}
		}
		cum[b] = append([]float64(nil), run...)
	}
	for b := len(f.Series) - 1; b >= 0; b-- {
		s := f.Series[b]
		l, err := plotter.NewLine(xys(Series{X: s.X, Y: cum[b]}))
		if err != nil {
			return err
		}
		l.Color = rgb(s.Color)
		l.FillColor = rgb(s.Color)
		l.Width = 0
		p.Add(l)
	}
	// The legend lists the bands bottom first, as they are stacked.
	for _, s := range f.Series {
		l, err := plotter.NewLine(plotter.XYs{{X: s.X[0], Y: 0}})
		if err != nil {
			return err
		}
		l.Color, l.FillColor = rgb(s.Color), rgb(s.Color)
		l.Width = vg.Points(6)
		p.Legend.Add(s.Name, l)
	}
	over := *f
	over.Series, over.HLines = f.Overlay, nil
	if err := addLines(p, &over); err != nil {
		return err
	}
	// Bands are filled from zero: an axis starting at the data's minimum
	// would hide the bottom band.
	p.Y.Min = 0
	return nil
}

func addBars(p *gplot.Plot, f *Figure) error {
	n := len(f.Series)
	if n == 0 || len(f.Labels) == 0 {
		return nil
	}
	width := vg.Points(math.Max(2, math.Min(28, 520/float64(len(f.Labels)*n))))
	for i, s := range f.Series {
		vals := make(plotter.Values, len(s.Y))
		for k, v := range s.Y {
			if !math.IsNaN(v) {
				vals[k] = v
			}
		}
		if len(s.Colors) > 0 {
			// One bar chart per bar so each can take its own colour.
			for k := range vals {
				one := make(plotter.Values, len(vals))
				one[k] = vals[k]
				b, err := plotter.NewBarChart(one, width)
				if err != nil {
					return err
				}
				b.Color = rgb(s.Colors[k%len(s.Colors)])
				b.LineStyle.Width = 0
				b.Horizontal = f.Kind == HBars
				p.Add(b)
			}
			continue
		}
		b, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		b.Color = rgb(s.Color)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(i)-float64(n-1)/2) * width
		b.Horizontal = f.Kind == HBars
		p.Add(b)
		if s.Name != "" {
			p.Legend.Add(s.Name, b)
		}
	}
	if f.Kind == HBars {
		p.NominalY(f.Labels...)
		p.Y.Tick.Label.Font.Size = vg.Points(8)
	} else {
		p.NominalX(f.Labels...)
		if len(f.Labels) > 12 {
			p.X.Tick.Label.Rotation = math.Pi / 2.5
			p.X.Tick.Label.XAlign = draw.XRight
		}
	}
	return nil
}

// categoryColors gives each label its category colour.
func categoryColors(labels []string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = palette.Category(l)
	}
	return out
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}
