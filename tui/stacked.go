package tui

import (
	"fmt"
	"math"
	"strings"

	"memscope/plot"

	"charm.land/lipgloss/v2"
)

// bandGlyphs tell the bands of a stacked chart apart without colour
// (NO_COLOR); with colour every band is a full block.
var bandGlyphs = []string{"█", "▓", "▒", "░", "#", "=", "+", ":", "*", "~", "%", "o"}

// stackedSpec is a stacked area chart: one column per screen column, each
// the band totals (bottom band first) at one event, with a reserved line.
type stackedSpec struct {
	w, h     int
	cols     [][]int64 // per column: bytes per band
	reserved []int64   // per column
	ymax     float64
	styles   []lipgloss.Style // per band
	glyphs   []string         // per band
	line     lipgloss.Style   // the reserved line
	axis     lipgloss.Style
	cursor   int // column of the cursor, -1 when outside
	cursorSt lipgloss.Style
	xlabel   func(col int) string
	// xticks, when set, replace labels spread every few columns: round
	// values at the columns where they fall.
	xticks []xTick
	ylabel func(v float64) string
}

// xTick is a labelled column of an x axis.
type xTick struct {
	col   int
	label string
}

// roundTicks places labels at round values of a linear axis whose plotW
// columns cover [lo, hi), about minGap cells apart and never touching;
// labels are as the pictures write them ("2000", "250k").
func roundTicks(lo, hi float64, plotW int, integer bool) []xTick {
	if hi <= lo || plotW <= 0 {
		return nil
	}
	const minGap = 12
	step := plot.NiceStep(hi-lo, max(1, plotW/minGap), integer)
	var out []xTick
	next := 0
	for v := math.Ceil(lo/step) * step; v < hi; v += step {
		col := int((v - lo) * float64(plotW) / (hi - lo))
		l := plot.TickLabel(v, step, math.Max(math.Abs(lo), math.Abs(hi)))
		if col < next || col+len([]rune(l)) > plotW {
			continue
		}
		out = append(out, xTick{col: col, label: l})
		next = col + len([]rune(l)) + 2
	}
	return out
}

// renderStacked draws the chart: y labels on the left, the x axis below.
func renderStacked(c stackedSpec) string {
	const labelW = 10
	rows := max(1, c.h-2)
	plotW := len(c.cols)
	if c.ymax <= 0 {
		c.ymax = 1
	}
	step := c.ymax / float64(rows)
	var b strings.Builder
	for r := 0; r < rows; r++ {
		lo := float64(rows-1-r) * step // the row covers [lo, lo+step)
		mid := lo + step/2
		label := ""
		switch {
		case r == rows-1:
			// The baseline: a stack starts at zero, and a lowest label of
			// "676.2 MiB" read like an axis that does not.
			label = c.ylabel(0)
		case r%4 == 0 && r < rows-2:
			label = c.ylabel(lo + step)
		}
		b.WriteString(c.axis.Render(fmt.Sprintf("%*s│", labelW-1, label)))
		// Runs of one style: styling cell by cell is slow.
		var run strings.Builder
		runStyle := -2
		flush := func() {
			if run.Len() == 0 {
				return
			}
			switch {
			case runStyle >= 0:
				b.WriteString(c.styles[runStyle].Render(run.String()))
			case runStyle == -3:
				b.WriteString(c.line.Render(run.String()))
			case runStyle == -4:
				b.WriteString(c.cursorSt.Render(run.String()))
			default:
				b.WriteString(run.String())
			}
			run.Reset()
		}
		for x := 0; x < plotW; x++ {
			st, glyph := -1, " "
			var cum float64
			for band, v := range c.cols[x] {
				if v <= 0 {
					continue
				}
				if mid < cum+float64(v) {
					st, glyph = band, c.glyphs[band]
					break
				}
				cum += float64(v)
			}
			if st < 0 {
				switch rv := float64(c.reserved[x]); {
				case rv >= lo && rv < lo+step:
					st, glyph = -3, "─"
				case x == c.cursor:
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
	if c.cursor >= 0 && c.cursor < plotW {
		axis[c.cursor] = '┴'
	}
	b.WriteString(c.axis.Render(strings.Repeat(" ", labelW-1) + "└" + string(axis)))
	b.WriteString("\n")
	labels := []rune(strings.Repeat(" ", plotW+labelW))
	if c.xticks != nil {
		for _, tk := range c.xticks {
			l := []rune(tk.label)
			if labelW+tk.col+len(l) <= len(labels) {
				copy(labels[labelW+tk.col:], l)
			}
		}
	} else {
		every := max(12, plotW/6)
		for x := 0; x < plotW; x += every {
			l := []rune(c.xlabel(x))
			if labelW+x+len(l) > len(labels) {
				break
			}
			copy(labels[labelW+x:], l)
		}
	}
	b.WriteString(c.axis.Render(string(labels)))
	return b.String()
}
