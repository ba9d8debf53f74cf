// Package widget holds the explorer's reusable pieces, which know nothing
// of tabs or sources: the theme, fitting text to terminal cells, bars and
// sparklines, the scroller and the shared list keys, the "/" filter line,
// the expandable tree, the braille line chart (ntcharts) and the stacked
// area chart.
package widget

import (
	"math"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// Fit truncates s (ANSI-aware) to w cells with an ellipsis, and pads it to
// exactly w cells, so no line ever wraps or leaves garbage behind.
func Fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-sw)
}

// FitTail keeps the end of s (paths: the file name matters most) in w
// cells, padding to exactly w.
func FitTail(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = ansi.Strip(s)
	sw := ansi.StringWidth(s)
	if sw <= w {
		return s + strings.Repeat(" ", w-sw)
	}
	r := []rune(s)
	for len(r) > 0 && ansi.StringWidth(string(r)) > w-1 {
		r = r[1:]
	}
	return Fit("…"+string(r), w)
}

// FitMiddle cuts s in the middle (names that share a prefix and differ at
// the end stay apart), padding to exactly w. s must be plain text.
func FitMiddle(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return Fit(s, w)
	}
	r := []rune(s)
	head := (w - 1) / 2
	tail := w - 1 - head
	for ansi.StringWidth(string(r[:head])) > (w-1)/2 && head > 0 {
		head--
	}
	t := r[len(r)-tail:]
	for ansi.StringWidth(string(t)) > w-1-ansi.StringWidth(string(r[:head])) && len(t) > 0 {
		t = t[1:]
	}
	return Fit(string(r[:head])+"…"+string(t), w)
}

// FitLeft right-aligns s in w cells.
func FitLeft(s string, w int) string {
	sw := ansi.StringWidth(s)
	if sw >= w {
		return Fit(s, w)
	}
	return strings.Repeat(" ", w-sw) + s
}

// Block makes exactly h lines of exactly w cells from s.
func Block(s string, w, h int) string {
	if h <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i := range lines {
		lines[i] = Fit(lines[i], w)
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", w))
	}
	return strings.Join(lines, "\n")
}

var eighths = []rune{' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉', '█'}

// HBar draws frac (0..1) as a bar of w cells with eighth-cell precision.
func HBar(frac float64, w int, st lipgloss.Style) string {
	if w <= 0 {
		return ""
	}
	if math.IsNaN(frac) || frac < 0 {
		frac = 0
	}
	if frac > 1 {
		frac = 1
	}
	units := int(math.Round(frac * float64(w) * 8))
	full := units / 8
	var b strings.Builder
	b.WriteString(strings.Repeat("█", full))
	if full < w {
		if rem := units % 8; rem > 0 {
			b.WriteRune(eighths[rem])
			full++
		}
	}
	bar := st.Render(b.String())
	return bar + strings.Repeat(" ", w-full)
}

var sparkRunes = []rune("▁▂▃▄▅▆▇█")

// Spark draws one row of a sparkline from per-column maxima, scaled to
// [lo, hi] (shared across rows so they compare); NaN columns are blank.
func Spark(maxs []float64, lo, hi float64, st lipgloss.Style) string {
	var b strings.Builder
	span := hi - lo
	for _, v := range maxs {
		if math.IsNaN(v) {
			b.WriteByte(' ')
			continue
		}
		f := 1.0
		if span > 0 {
			f = (v - lo) / span
		}
		i := int(math.Round(f * float64(len(sparkRunes)-1)))
		i = max(0, min(len(sparkRunes)-1, i))
		b.WriteRune(sparkRunes[i])
	}
	return st.Render(b.String())
}

// Scroller is the cursor and window of a scrolling list.
type Scroller struct {
	Cursor, Offset, N, Height int
}

// SetN sets the number of rows, keeping the cursor inside.
func (s *Scroller) SetN(n int) {
	s.N = n
	s.Clamp()
}

// SetHeight sets how many rows show at once.
func (s *Scroller) SetHeight(h int) {
	s.Height = max(1, h)
	s.Clamp()
}

// Clamp keeps the cursor on a row and the window around the cursor.
func (s *Scroller) Clamp() {
	if s.Cursor >= s.N {
		s.Cursor = s.N - 1
	}
	if s.Cursor < 0 {
		s.Cursor = 0
	}
	if s.Cursor < s.Offset {
		s.Offset = s.Cursor
	}
	if s.Cursor >= s.Offset+s.Height {
		s.Offset = s.Cursor - s.Height + 1
	}
	if s.Offset > max(0, s.N-s.Height) {
		s.Offset = max(0, s.N-s.Height)
	}
	if s.Offset < 0 {
		s.Offset = 0
	}
}

// Move moves the cursor d rows; Home and End to the first and last;
// Page a window's height at a time.
func (s *Scroller) Move(d int) { s.Cursor += d; s.Clamp() }
func (s *Scroller) Home()      { s.Cursor = 0; s.Clamp() }
func (s *Scroller) End()       { s.Cursor = s.N - 1; s.Clamp() }
func (s *Scroller) Page(d int) { s.Move(d * max(1, s.Height-1)) }

// Scroll moves the window (mouse wheel) and drags the cursor into it.
func (s *Scroller) Scroll(d int) {
	s.Offset += d
	if s.Offset > max(0, s.N-s.Height) {
		s.Offset = max(0, s.N-s.Height)
	}
	if s.Offset < 0 {
		s.Offset = 0
	}
	if s.Cursor < s.Offset {
		s.Cursor = s.Offset
	}
	if s.Cursor >= s.Offset+s.Height {
		s.Cursor = s.Offset + s.Height - 1
	}
	if s.Cursor >= s.N {
		s.Cursor = s.N - 1
	}
}

// Click selects the row at screen line y of the window; false when y is
// past the end.
func (s *Scroller) Click(y int) bool {
	i := s.Offset + y
	if y < 0 || i >= s.N {
		return false
	}
	s.Cursor = i
	return true
}

// Visible returns the index range shown.
func (s *Scroller) Visible() (int, int) { return s.Offset, min(s.N, s.Offset+s.Height) }

// scrollHint says where the window is, e.g. "12-40 of 1024".
func (s *Scroller) Hint() string {
	if s.N <= s.Height {
		return ""
	}
	a, b := s.Visible()
	return strconv.Itoa(a+1) + "-" + strconv.Itoa(b) + " of " + strconv.Itoa(s.N)
}
