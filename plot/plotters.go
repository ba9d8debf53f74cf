package plot

import (
	"math"
	"slices"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"memscope/internal/textsafe"
)

func xys(s Series) plotter.XYs {
	pts := make(plotter.XYs, 0, len(s.X))
	for i := range s.X {
		if i >= len(s.Y) || math.IsNaN(s.X[i]) || math.IsNaN(s.Y[i]) || math.IsInf(s.Y[i], 0) {
			continue
		}
		pts = append(pts, plotter.XY{X: s.X[i], Y: s.Y[i]})
	}
	return pts
}

// addLine draws one series, in the legend when named.
func addLine(p *gplot.Plot, leg *gplot.Legend, s Series, width vg.Length) error {
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
		leg.Add(textsafe.Safe(s.Name), l)
	}
	return nil
}

// addLines draws the series and the horizontal reference lines across the
// series' X range. Vertical lines wait for the final Y range (addVLines).
func addLines(p *gplot.Plot, f *Figure, series, hlines []Series) error {
	ex := newExtent()
	for _, s := range f.Series {
		ex.add(s.X...)
	}
	for _, s := range f.Overlay {
		ex.add(s.X...)
	}
	if !ex.ok() {
		ex = extent{0, 1}
	}
	for _, s := range series {
		if err := addLine(p, &p.Legend, s, vg.Points(1.6)); err != nil {
			return err
		}
	}
	for _, h := range hlines {
		if len(h.Y) == 0 {
			continue
		}
		h.X = []float64{ex.lo, ex.hi}
		h.Y = []float64{h.Y[0], h.Y[0]}
		if err := addLine(p, &p.Legend, h, vg.Points(1.3)); err != nil {
			return err
		}
	}
	return nil
}

// addStacked fills each band between the bands below it and itself: the
// cumulative curves are drawn from the top down, each filled to zero, so
// every band shows its own share; then the overlay lines go on top. The
// legend reads top down, as the bands do.
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
	if err := addLines(p, f, f.Overlay, nil); err != nil {
		return err
	}
	for b := len(f.Series) - 1; b >= 0; b-- {
		s := f.Series[b]
		if s.Name == "" {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: s.X[0], Y: 0}})
		if err != nil {
			return err
		}
		l.Color, l.FillColor = rgb(s.Color), rgb(s.Color)
		l.Width = vg.Points(6)
		p.Legend.Add(textsafe.Safe(s.Name), l)
	}
	return nil
}

// addBars adds one bar chart per series (per bar when bars have their own
// colours); widths and offsets are set by fitBars once the data area is
// known.
func (l *layout) addBars() error {
	f, p := l.f, l.p
	if len(f.Series) == 0 || len(f.Labels) == 0 {
		return nil
	}
	labels := make([]string, len(f.Labels))
	for i, s := range f.Labels {
		labels[i] = textsafe.Safe(s)
	}
	for _, s := range f.Series {
		vals := make(plotter.Values, len(f.Labels))
		texts := make([]string, len(f.Labels))
		for k := range vals {
			v := math.NaN()
			if k < len(s.Y) {
				v = s.Y[k]
			}
			if !math.IsNaN(v) {
				vals[k] = v
			}
			texts[k] = valueLabel(v, f.YUnit, len(f.Series) > 1)
		}
		l.valueLabels = append(l.valueLabels, texts)
		if len(s.Colors) > 0 {
			// One chart per bar so each takes its own colour.
			for k := range vals {
				one := make(plotter.Values, len(vals))
				one[k] = vals[k]
				b, err := plotter.NewBarChart(one, 1)
				if err != nil {
					return err
				}
				b.Color = rgb(s.Colors[k%len(s.Colors)])
				b.LineStyle.Width = 0
				b.Horizontal = f.Kind == HBars
				p.Add(b)
				l.allBars = append(l.allBars, b)
			}
			l.bars = append(l.bars, nil) // one group: no offset
			continue
		}
		b, err := plotter.NewBarChart(vals, 1)
		if err != nil {
			return err
		}
		b.Color = rgb(s.Color)
		b.LineStyle.Width = 0
		b.Horizontal = f.Kind == HBars
		p.Add(b)
		l.allBars = append(l.allBars, b)
		l.bars = append(l.bars, b)
		if s.Name != "" {
			p.Legend.Add(textsafe.Safe(s.Name), b)
		}
	}
	if f.Kind == HBars {
		p.NominalY(labels...)
		p.Y.Tick.Label.Font.Size = vg.Points(9)
	} else {
		p.NominalX(labels...)
	}
	return nil
}

// fitBars sizes the bars to their slots (at most maxBar, a fifth of a slot
// left between groups) and writes each value at its bar's end, unless the
// labels would run into each other.
func (l *layout) fitBars() error {
	f, p := l.f, l.p
	if (f.Kind != Bars && f.Kind != HBars) || len(f.Labels) == 0 || len(f.Series) == 0 {
		return nil
	}
	data := l.dataCanvas()
	extent := data.Size().X
	if f.Kind == HBars {
		extent = data.Size().Y
	}
	ns := len(f.Series)
	slot := extent / vg.Length(len(f.Labels))
	width := vg.Length(math.Min(float64(maxBar), 0.8*float64(slot)/float64(ns)))
	width = max(width, 1)
	for _, b := range l.allBars {
		b.Width = width
	}
	for i, b := range l.bars {
		if b != nil {
			b.Offset = vg.Length(float64(i)-float64(ns-1)/2) * width
		}
	}
	sty := valueStyle()
	// Labels that do not fit their bar's slot are left out: a crowd of
	// overlapping numbers helps nobody.
	room := width - 1
	if f.Kind == HBars {
		room = sty.Height("0") + 1
	}
	for _, texts := range l.valueLabels {
		for _, s := range texts {
			w := sty.Width(s)
			if f.Kind == HBars {
				w = sty.Height(s)
			}
			if w > room && ns > 1 || f.Kind == Bars && w+vg.Points(4) > slot {
				return nil
			}
		}
	}
	for i, s := range f.Series {
		texts := l.valueLabels[i]
		if ns > 1 {
			// Beside a bar of the group, an empty slot says 0 well enough.
			texts = slices.Clone(texts)
			for k := range texts {
				if k < len(s.Y) && s.Y[k] == 0 {
					texts[k] = ""
				}
			}
		}
		xy := plotter.XYLabels{Labels: texts}
		for k := range f.Labels {
			v := 0.0
			if k < len(s.Y) && !math.IsNaN(s.Y[k]) {
				v = s.Y[k]
			}
			if f.Kind == HBars {
				xy.XYs = append(xy.XYs, plotter.XY{X: v, Y: float64(k)})
			} else {
				xy.XYs = append(xy.XYs, plotter.XY{X: float64(k), Y: v})
			}
		}
		lab, err := plotter.NewLabels(xy)
		if err != nil {
			return err
		}
		for k := range lab.TextStyle {
			st := sty
			if f.Kind == HBars {
				st.XAlign, st.YAlign = draw.XLeft, draw.YCenter
			} else {
				st.XAlign, st.YAlign = draw.XCenter, draw.YBottom
			}
			lab.TextStyle[k] = st
		}
		var off vg.Length
		if b := l.bars[i]; b != nil {
			off = b.Offset
		}
		if f.Kind == HBars {
			lab.Offset = vg.Point{X: labelGap, Y: off}
		} else {
			lab.Offset = vg.Point{X: off, Y: labelGap}
		}
		p.Add(lab)
		l.labels = append(l.labels, lab)
	}
	return nil
}
