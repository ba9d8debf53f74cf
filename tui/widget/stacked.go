package widget

import (
	"fmt"
	"math"
	"strings"

	"memscope/plot"

	"charm.land/lipgloss/v2"
)

// BandGlyphs tell the bands of a stacked chart apart without colour
// (NO_COLOR); with colour every band is a full block.
var BandGlyphs = []string{"█", "▓", "▒", "░", "#", "=", "+", ":", "*", "~", "%", "o"}

// StackedSpec is a stacked area chart: one column per screen column, each
// the band totals (bottom band first) at one event, with a reserved line.
type StackedSpec struct {
	W, H        int
	Cols        [][]int64 // per column: bytes per band
	Reserved    []int64   // per column
	YMax        float64
	Styles      []lipgloss.Style // per band
	Glyphs      []string         // per band
	Line        lipgloss.Style   // the reserved line
	Axis        lipgloss.Style
	Cursor      int // column of the cursor, -1 when outside
	CursorStyle lipgloss.Style
	XLabel      func(col int) string
	// XTicks, when set, replace labels spread every few columns: round
	// values at the columns where they fall.
	XTicks []XTick
	YLabel func(v float64) string
}

// XTick is a labelled column of an x axis.
type XTick struct {
	Col   int
	Label string
}

// RoundTicks places labels at round values of a linear axis whose plotW
// columns cover [lo, hi), about minGap cells apart and never touching;
// labels are as the pictures write them ("2000", "250k").
func RoundTicks(lo, hi float64, plotW int, integer bool) []XTick {
	if hi <= lo || plotW <= 0 {
		return nil
	}
	const minGap = 12
	step := plot.NiceStep(hi-lo, max(1, plotW/minGap), integer)
	var out []XTick
	next := 0
	for v := math.Ceil(lo/step) * step; v < hi; v += step {
		col := int((v - lo) * float64(plotW) / (hi - lo))
		l := plot.TickLabel(v, step, math.Max(math.Abs(lo), math.Abs(hi)))
		if col < next || col+len([]rune(l)) > plotW {
			continue
		}
		out = append(out, XTick{Col: col, Label: l})
		next = col + len([]rune(l)) + 2
	}
	return out
}

// Stacked draws the chart: y labels on the left, the x axis below.
func Stacked(c StackedSpec) string {
	const labelW = 10
	rows := max(1, c.H-2)
	plotW := len(c.Cols)
	if c.YMax <= 0 {
		c.YMax = 1
	}
	step := c.YMax / float64(rows)
	var b strings.Builder
	for r := 0; r < rows; r++ {
		lo := float64(rows-1-r) * step // the row covers [lo, lo+step)
		mid := lo + step/2
		label := ""
		switch {
		case r == rows-1:
			// The baseline: a stack starts at zero, and a lowest label of
			// "676.2 MiB" read like an axis that does not.
			label = c.YLabel(0)
		case r%4 == 0 && r < rows-2:
			label = c.YLabel(lo + step)
		}
		b.WriteString(c.Axis.Render(fmt.Sprintf("%*s│", labelW-1, label)))
		// Runs of one style: styling cell by cell is slow.
		var run strings.Builder
		runStyle := -2
		flush := func() {
			if run.Len() == 0 {
				return
			}
			switch {
			case runStyle >= 0:
				b.WriteString(c.Styles[runStyle].Render(run.String()))
			case runStyle == -3:
				b.WriteString(c.Line.Render(run.String()))
			case runStyle == -4:
				b.WriteString(c.CursorStyle.Render(run.String()))
			default:
				b.WriteString(run.String())
			}
			run.Reset()
		}
		for x := 0; x < plotW; x++ {
			st, glyph := -1, " "
			var cum float64
			for band, v := range c.Cols[x] {
				if v <= 0 {
					continue
				}
				if mid < cum+float64(v) {
					st, glyph = band, c.Glyphs[band]
					break
				}
				cum += float64(v)
			}
			if st < 0 {
				switch rv := float64(c.Reserved[x]); {
				case rv >= lo && rv < lo+step:
					st, glyph = -3, "─"
				case x == c.Cursor:
					st, glyph = -4, "│"
				}
			}
			if st != runStyle {
				flush()
				runStyle = st
			}
			run.WriteString(glyph)
		}
		flush()
		b.WriteString("\n")
	}
	// The x axis: a tick under the cursor, labels spread along it.
	axis := []rune(strings.Repeat("─", plotW))
	if c.Cursor >= 0 && c.Cursor < plotW {
		axis[c.Cursor] = '┴'
	}
	b.WriteString(c.Axis.Render(strings.Repeat(" ", labelW-1) + "└" + string(axis)))
	b.WriteString("\n")
	labels := []rune(strings.Repeat(" ", plotW+labelW))
	if c.XTicks != nil {
		for _, tk := range c.XTicks {
			l := []rune(tk.Label)
			if labelW+tk.Col+len(l) <= len(labels) {
				copy(labels[labelW+tk.Col:], l)
			}
		}
	} else {
		every := max(12, plotW/6)
		for x := 0; x < plotW; x += every {
			l := []rune(c.XLabel(x))
			if labelW+x+len(l) > len(labels) {
				break
			}
			copy(labels[labelW+x:], l)
		}
	}
	b.WriteString(c.Axis.Render(string(labels)))
	return b.String()
}
