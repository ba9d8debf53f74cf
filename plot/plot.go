// Package plot draws memscope's pictures to share (PNG, SVG, by file
// extension) with gonum.org/v1/plot: per-rank real vs simulated memory,
// snapshot overviews, category breakdowns, size distributions, efficiency,
// estimate phases and modules, and timelines. Each picture is first built
// as a Figure holding exactly the data it draws (tests compare it with the
// JSON reports), then rendered.
package plot

import (
	"image/color"
	"strconv"
	"strings"

	"gonum.org/v1/plot/vg"

	"memscope/internal/palette"
)

// Shape is how a figure draws its series.
type Shape int

// Figure shapes.
const (
	Lines   Shape = iota // X/Y lines
	Bars                 // one bar per label, one group per series
	HBars                // horizontal bars (long labels: categories, call sites)
	Stacked              // Series are bands stacked bottom first over shared X; Overlay lines drawn on top
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
	Kind                  Shape
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

// categoryColors gives each label its category colour.
func categoryColors(labels []string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = palette.Category(l)
	}
	return out
}

// shorten cuts s to at most n runes in the middle, keeping more of the end:
// a location's file, line and function tell call sites apart, its
// directories mostly do not.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 4 {
		return s
	}
	head := (n - 1) / 3
	tail := n - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}
