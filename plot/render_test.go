package plot

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"memscope/snapshot"
	"memscope/snapshot/estimate"
)

func TestNiceTicks(t *testing.T) {
	cases := []struct {
		lo, hi  float64
		integer bool
		want    string // the labelled ticks
	}{
		{0, 9300, true, "0 2000 4000 6000 8000"},
		{0, 2500, true, "0 500 1000 1500 2000 2500"},
		{0, 9999, true, "0 2000 4000 6000 8000"},
		// From 10,000 up labels take an SI suffix; below they do not.
		{0, 10000, true, "0 2k 4k 6k 8k 10k"},
		{0, 12500, true, "0 2.5k 5k 7.5k 10k 12.5k"},
		{0, 999_999, true, "0 200k 400k 600k 800k"},
		{0, 1.5e6, true, "0 0.25M 0.5M 0.75M 1M 1.25M 1.5M"},
		{0, 9e8, true, "0 200M 400M 600M 800M"},
		{0, 3e9, false, "0 0.5G 1G 1.5G 2G 2.5G 3G"},
		{51.1, 60.2, false, "52 54 56 58 60"},
		{0, 0.85, false, "0 0.2 0.4 0.6 0.8"},
		{0, 2.2, false, "0 0.5 1 1.5 2"},
		// An integer axis never gets a fractional step.
		{0, 2.2, true, "0 1 2"},
		{0, 4, true, "0 1 2 3 4"},
		{-3, 3, false, "-3 -2 -1 0 1 2 3"},
	}
	label := regexp.MustCompile(`^-?\d+(\.\d*[1-9])?[kMG]?$`)
	for _, c := range cases {
		ticks := niceTicker{integer: c.integer}.Ticks(c.lo, c.hi)
		var got []string
		for _, tk := range ticks {
			if tk.Value < c.lo-1e-9 || tk.Value > c.hi+1e-9 {
				t.Errorf("%v..%v: tick %v outside the range", c.lo, c.hi, tk.Value)
			}
			if tk.Label == "" {
				continue
			}
			if !label.MatchString(tk.Label) {
				t.Errorf("%v..%v: label %q is not an integer, a short decimal or SI", c.lo, c.hi, tk.Label)
			}
			got = append(got, tk.Label)
		}
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("%v..%v integer=%v: %q, want %q", c.lo, c.hi, c.integer, s, c.want)
		}
	}
	// Degenerate ranges end.
	for _, r := range [][2]float64{{5, 5}, {0, math.Inf(1)}, {math.NaN(), 1}, {0, 1e-300}} {
		if n := len((niceTicker{}).Ticks(r[0], r[1])); n > 1001 {
			t.Errorf("%v: %d ticks", r, n)
		}
	}
}

// figures are every kind of picture memscope writes, from real data.
func figures(t *testing.T) map[string]*Figure {
	t.Helper()
	out := map[string]*Figure{}
	c := comparison(t)
	out["memory_comparison_overview"] = OverviewFigure(c)
	for _, rc := range c.Ranks {
		out[fmt.Sprintf("memory_comparison_rank_%d", rc.Rank)] = RankFigure(rc, Options{ShowTheoretical: true})
	}
	for _, file := range []string{"MercuryB1_SQAttn__cuda_memory_snapshot.pickle", "h200/big.pickle.gz"} {
		s, err := snapshot.Open(context.Background(), "../testdata/snapshots/"+file)
		if err != nil {
			t.Fatal(err)
		}
		a := snapshot.Analyze(s, nil)
		for name, f := range SnapshotFigures(&a.Devices[0], a.Timeline(a.Devices[0].Device)) {
			out[file+"/"+name] = f
		}
	}
	e, err := estimate.Open(context.Background(), "../testdata/estimates/SYNTHETIC_peak_snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	ea := estimate.Analyze(e, nil)
	for name, f := range EstimateFigures(&ea.Devices[0]) {
		out["estimate/"+name] = f
	}
	return out
}

// valueAxis is the axis values are read on.
func valueAxis(l *layout) *gplot.Axis {
	if l.f.Kind == HBars {
		return &l.p.X
	}
	return &l.p.Y
}

// TestLayout: every figure leaves headroom above its largest value, keeps
// its legend in a column right of the data, labels its bars with their
// values, and ticks its numeric axes at round, short labels.
func TestLayout(t *testing.T) {
	tickLabel := regexp.MustCompile(`^-?\d+(\.\d*[1-9])?[kMG]?$`)
	for name, f := range figures(t) {
		l, err := build(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ax := valueAxis(l)
		top := 0.0
		switch f.Kind {
		case Stacked:
			for _, s := range append(stackedTotals(f), f.Overlay...) {
				for _, v := range s.Y {
					top = math.Max(top, v)
				}
			}
		default:
			for _, s := range append(append([]Series(nil), f.Series...), f.HLines...) {
				for _, v := range s.Y {
					if !math.IsNaN(v) {
						top = math.Max(top, v)
					}
				}
			}
		}
		if top > 0 && top > ax.Max-0.03*(ax.Max-ax.Min) {
			t.Errorf("%s: largest value %v touches the axis end %v", name, top, ax.Max)
		}
		data := l.dataCanvas()
		if l.entries > 0 {
			legendLeft := l.w - margin - l.legendW + legendGap
			if legendLeft < data.Max.X {
				t.Errorf("%s: legend at %v covers the data (right edge %v)", name, legendLeft, data.Max.X)
			}
			if l.legendW >= l.w/2 {
				t.Errorf("%s: legend column %v of %v", name, l.legendW, l.w)
			}
		}
		for _, a := range []*gplot.Axis{&l.p.X, &l.p.Y} {
			if _, nominal := a.Tick.Marker.(gplot.ConstantTicks); nominal {
				continue
			}
			for _, tk := range a.Tick.Marker.Ticks(a.Min, a.Max) {
				if tk.Label != "" && !tickLabel.MatchString(tk.Label) {
					t.Errorf("%s: tick label %q", name, tk.Label)
				}
			}
		}
		if f.Kind == Bars || f.Kind == HBars {
			// The nominal labels fit inside the picture.
			sty := l.p.Y.Tick.Label
			if f.Kind == HBars {
				for _, lab := range f.Labels {
					if w := sty.Width(lab); w > data.Min.X-margin {
						t.Errorf("%s: label %q (%v) is wider than the room left of the data (%v)", name, lab, w, data.Min.X-margin)
					}
				}
			}
			for i, s := range f.Series {
				for k, v := range s.Y {
					if want := valueLabel(v, f.YUnit, len(f.Series) > 1); l.valueLabels[i][k] != want {
						t.Errorf("%s: bar %d/%d labelled %q, want %q", name, i, k, l.valueLabels[i][k], want)
					}
				}
			}
			// Each group of bars fits its slot.
			ext := data.Size().X
			if f.Kind == HBars {
				ext = data.Size().Y
			}
			slot := ext / vg.Length(len(f.Labels))
			for _, b := range l.allBars {
				if math.Abs(float64(b.Offset))+float64(b.Width)/2 > float64(slot)/2 {
					t.Errorf("%s: bar at offset %v width %v leaves its slot %v", name, b.Offset, b.Width, slot)
				}
			}
		}
	}
}

// TestValueLabels: the numbers written on bars are the bytes they stand
// for, and a missing side says so.
func TestValueLabels(t *testing.T) {
	f := OverviewFigure(comparison(t))
	l, err := build(f)
	if err != nil {
		t.Fatal(err)
	}
	if f.YUnit != "GiB" {
		t.Fatalf("the overview is in %s", f.YUnit)
	}
	for i, s := range f.Series {
		for k, v := range s.Y {
			// Grouped bars carry the number in the axis's unit.
			want := "no data"
			if !math.IsNaN(v) {
				want = strconv.FormatFloat(v, 'f', 2, 64)
			}
			if got := l.valueLabels[i][k]; got != want {
				t.Errorf("series %d bar %d: %q, want %q", i, k, got, want)
			}
		}
	}
	var drawn int
	for _, lab := range l.labels {
		drawn += len(lab.Labels)
	}
	if drawn != len(f.Labels)*len(f.Series) {
		t.Errorf("%d value labels drawn, want %d", drawn, len(f.Labels)*len(f.Series))
	}
	// Too many bars to write on: no labels rather than a crowd.
	many := &Figure{Kind: Bars, YUnit: "GiB"}
	a, b := Series{Name: "real"}, Series{Name: "simulated"}
	for r := 0; r < 256; r++ {
		many.Labels = append(many.Labels, fmt.Sprint(r))
		a.Y, b.Y = append(a.Y, 60.1), append(b.Y, 61.7)
	}
	many.Series = []Series{a, b}
	l, err = build(many)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.labels) > 0 {
		t.Fatal("256 ranks get value labels that cannot fit")
	}
	// ... and their names are slanted, where four ranks lie flat.
	if l.p.X.Tick.Label.Rotation == 0 {
		t.Error("256 rank names laid flat run into each other")
	}
	if l, _ := build(f); l.p.X.Tick.Label.Rotation != 0 {
		t.Error("four rank names are slanted")
	}
}

func TestBucketLabel(t *testing.T) {
	for lo, want := range map[int64]string{512: "512 B", 1 << 10: "1 KiB", 256 << 10: "256 KiB", 1 << 20: "1 MiB", 3 << 29: "1536 MiB", 2 << 30: "2 GiB", 1536: "1.50 KiB"} {
		if got := bucketLabel(lo); got != want {
			t.Errorf("bucketLabel(%d) = %q, want %q", lo, got, want)
		}
	}
}

// TestMargins renders every figure and checks that nothing is drawn in the
// picture's outer margin: no bar, curve, label or legend touches its edge.
func TestMargins(t *testing.T) {
	if testing.Short() {
		t.Skip("renders every picture")
	}
	dir := t.TempDir()
	edge := int(float64(margin)*96/72) - 6 // pixels at 96 dpi, with slack
	for name, f := range figures(t) {
		path := filepath.Join(dir, strings.ReplaceAll(name, "/", "_")+".png")
		if err := Save(f, path); err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(file)
		file.Close()
		if err != nil {
			t.Fatal(err)
		}
		if at, ok := inkNearEdge(img, edge); ok {
			t.Errorf("%s: drawn within %d px of the edge at %v", name, edge, at)
		}
	}
}

func inkNearEdge(img image.Image, edge int) (image.Point, bool) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if x >= b.Min.X+edge && x < b.Max.X-edge && y >= b.Min.Y+edge && y < b.Max.Y-edge {
				continue
			}
			r, g, bl, a := img.At(x, y).RGBA()
			if a > 0 && (r < 0xf000 || g < 0xf000 || bl < 0xf000) {
				return image.Point{X: x, Y: y}, true
			}
		}
	}
	return image.Point{}, false
}

// TestOldPicturesTouchedTheEdge keeps TestMargins honest: a figure drawn
// without the margin is caught.
func TestOldPicturesTouchedTheEdge(t *testing.T) {
	f := OverviewFigure(comparison(t))
	l, err := build(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bare.png")
	if err := l.p.Save(l.w, l.h, path); err != nil { // gonum's own layout: no margin
		t.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	img, err := png.Decode(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inkNearEdge(img, 4); !ok {
		t.Error("a picture without margins should reach its edge")
	}
}

func TestValueLabelForms(t *testing.T) {
	for _, c := range []struct {
		v       float64
		unit    string
		compact bool
		want    string
	}{
		{196, "MiB", false, "196.0 MiB"},
		{0, "MiB", false, "0 B"},
		{59.814, "GiB", true, "59.81"},
		{205.12, "MiB", true, "205.1"},
		{1536.4, "MiB", true, "1536"},
		{144, "", false, "144"},
		{math.NaN(), "GiB", true, "no data"},
	} {
		if got := valueLabel(c.v, c.unit, c.compact); got != c.want {
			t.Errorf("valueLabel(%v, %q, %v) = %q, want %q", c.v, c.unit, c.compact, got, c.want)
		}
	}
}
