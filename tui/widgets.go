package tui

import (
	"math"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// fit truncates s (ANSI-aware) to w cells with an ellipsis, and pads it to
// exactly w cells, so no line ever wraps or leaves garbage behind.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-sw)
}

// fitTail keeps the end of s (paths: the file name matters most) in w
// cells, padding to exactly w.
func fitTail(s string, w int) string {
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
	return fit("…"+string(r), w)
}

// fitMiddle cuts s in the middle (names that share a prefix and differ at
// the end stay apart), padding to exactly w. s must be plain text.
func fitMiddle(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return fit(s, w)
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
	return fit(string(r[:head])+"…"+string(t), w)
}

// fitLeft right-aligns s in w cells.
func fitLeft(s string, w int) string {
	sw := ansi.StringWidth(s)
	if sw >= w {
		return fit(s, w)
	}
	return strings.Repeat(" ", w-sw) + s
}

// block makes exactly h lines of exactly w cells from s.
func block(s string, w, h int) string {
	if h <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i := range lines {
		lines[i] = fit(lines[i], w)
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", w))
	}
	return strings.Join(lines, "\n")
}

var eighths = []rune{' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉', '█'}

// hbar draws frac (0..1) as a bar of w cells with eighth-cell precision.
func hbar(frac float64, w int, st lipgloss.Style) string {
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

// spark draws one row of a sparkline from per-column maxima, scaled to
// [lo, hi] (shared across rows so they compare); NaN columns are blank.
func spark(maxs []float64, lo, hi float64, st lipgloss.Style) string {
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

// scroller is the cursor and window of a scrolling list.
type scroller struct {
	cursor, offset, n, height int
}

func (s *scroller) setN(n int) {
	s.n = n
	s.clamp()
}

func (s *scroller) setHeight(h int) {
	s.height = max(1, h)
	s.clamp()
}

func (s *scroller) clamp() {
	if s.cursor >= s.n {
		s.cursor = s.n - 1
	}
	if s.cursor < 0 {
		s.cursor = 0
	}
	if s.cursor < s.offset {
		s.offset = s.cursor
	}
	if s.cursor >= s.offset+s.height {
		s.offset = s.cursor - s.height + 1
	}
	if s.offset > max(0, s.n-s.height) {
		s.offset = max(0, s.n-s.height)
	}
	if s.offset < 0 {
		s.offset = 0
	}
}

func (s *scroller) move(d int) { s.cursor += d; s.clamp() }
func (s *scroller) home()      { s.cursor = 0; s.clamp() }
func (s *scroller) end()       { s.cursor = s.n - 1; s.clamp() }
func (s *scroller) page(d int) { s.move(d * max(1, s.height-1)) }

// scroll moves the window (mouse wheel) and drags the cursor into it.
func (s *scroller) scroll(d int) {
	s.offset += d
	if s.offset > max(0, s.n-s.height) {
		s.offset = max(0, s.n-s.height)
	}
	if s.offset < 0 {
		s.offset = 0
	}
	if s.cursor < s.offset {
		s.cursor = s.offset
	}
	if s.cursor >= s.offset+s.height {
		s.cursor = s.offset + s.height - 1
	}
	if s.cursor >= s.n {
		s.cursor = s.n - 1
	}
}

// click selects the row at screen line y of the window; false when y is
// past the end.
func (s *scroller) click(y int) bool {
	i := s.offset + y
	if y < 0 || i >= s.n {
		return false
	}
	s.cursor = i
	return true
}

// visible returns the index range shown.
func (s *scroller) visible() (int, int) { return s.offset, min(s.n, s.offset+s.height) }

// scrollHint says where the window is, e.g. "12-40 of 1024".
func (s *scroller) hint() string {
	if s.n <= s.height {
		return ""
	}
	a, b := s.visible()
	return itoa(a+1) + "-" + itoa(b) + " of " + itoa(s.n)
}
