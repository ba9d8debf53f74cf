package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"memscope/internal/textsafe"
	"memscope/model"
	"memscope/tui/widget"
)

// The frame the App draws around the active tab: the tab bar, the status
// line and the help screen.

// tabRanges returns the x ranges of the tab titles in the tab bar.
func (a *App) tabRanges() [][2]int {
	x := 0
	var out [][2]int
	for i, t := range a.tabs {
		w := lipgloss.Width(a.c.th.TabOff.Render(fmt.Sprintf("%d %s", i+1, t.name())))
		out = append(out, [2]int{x, x + w})
		x += w
	}
	return out
}

func (a *App) onMouse(msg tea.Msg, m tea.Mouse) tea.Cmd {
	if a.showHelp {
		if w, ok := msg.(tea.MouseWheelMsg); ok {
			a.helpOff = max(0, a.helpOff+wheel(w))
			return nil
		}
		a.showHelp = false
		return nil
	}
	if m.Y == 0 {
		if _, ok := msg.(tea.MouseClickMsg); ok {
			for i, r := range a.tabRanges() {
				if m.X >= r[0] && m.X < r[1] {
					a.active, a.tabChosen = a.tabs[i].id(), true
				}
			}
		}
		return nil
	}
	if m.Y > a.bodyHeight() {
		return nil
	}
	m.Y--
	var rel tea.Msg
	switch msg.(type) {
	case tea.MouseClickMsg:
		rel = tea.MouseClickMsg(m)
	case tea.MouseWheelMsg:
		rel = tea.MouseWheelMsg(m)
	}
	if a.overlay != nil {
		return a.overlayUpdate(rel)
	}
	t := a.tab(a.active)
	a.keepShown()
	return a.call(func(c *tabContext) tea.Cmd { return t.update(c, rel) })
}

// View renders the whole screen.
func (a *App) View() (v tea.View) {
	defer func() {
		if r := recover(); r != nil {
			a.panics++
			v = tea.NewView(widget.Block(fmt.Sprintf("memscope: internal error while drawing: %v\n(press any key; q quits)", r), a.w, a.h))
			v.AltScreen = true
		}
	}()
	// The last safety net: only the styling this program wrote may reach
	// the terminal as escape sequences (file strings are escaped where
	// they are placed as well).
	v = tea.NewView(textsafe.Styled(a.render()))
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "memscope"
	return v
}

func (a *App) render() string {
	if a.w < 20 || a.h < 5 {
		return widget.Block("memscope: window too small\nq quits", a.w, a.h)
	}
	bh := a.bodyHeight()
	var body string
	switch {
	case a.internalErr != "":
		body = widget.Block(a.c.th.Err.Render(a.internalErr)+"\n\npress any key to continue", a.w, bh)
	case a.showHelp:
		body = a.helpView(bh)
	case a.overlay != nil:
		body = widget.Block(a.overlay.view(&a.c, a.w, bh), a.w, bh)
	default:
		body = widget.Block(a.tab(a.active).view(&a.c), a.w, bh)
	}
	if a.cmd != nil {
		return a.tabBar() + "\n" + body + "\n" + a.cmd.view(&a.c, a.w)
	}
	return a.tabBar() + "\n" + body + "\n" + a.statusLine()
}

func (a *App) tabBar() string {
	var b strings.Builder
	for i, t := range a.tabs {
		label := fmt.Sprintf("%d %s", i+1, t.name())
		if t.id() == a.active {
			b.WriteString(a.c.th.TabOn.Render(label))
		} else {
			b.WriteString(a.c.th.TabOff.Render(label))
		}
	}
	left := b.String()
	right := ""
	if s := a.activeSource(); s != nil {
		room := max(8, a.w-lipgloss.Width(left)-2)
		right = a.c.th.Dim.Render(strings.TrimRight(widget.FitMiddle(safe(s.Name()), room), " ") + " ")
	}
	gap := a.w - lipgloss.Width(left) - lipgloss.Width(right)
	if gap < 1 {
		return widget.Fit(left, a.w)
	}
	return left + strings.Repeat(" ", gap) + right
}

func (a *App) statusLine() string {
	var parts []string
	if a.c.opts.Demo {
		parts = append(parts, "DEMO: bundled sample data")
	}
	loading, failed, loaded := 0, 0, 0
	var prog float64
	for _, s := range a.c.sources {
		switch s.State {
		case model.Loading, model.Pending:
			loading++
			prog += s.Progress
		case model.Failed:
			failed++
		case model.Loaded:
			loaded++
		}
		if s.State == model.Loaded {
			failed += min(1, s.ErrorCount())
		}
	}
	parts = append(parts, plural(len(a.c.sources), "source"))
	if loading > 0 {
		frac := prog / float64(loading)
		parts = append(parts, fmt.Sprintf("loading %d %s", loading, strings.TrimRight(hbarPlain(frac, 8), " ")+"▏"))
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("✗ %s (o)", plural(failed, "error")))
	}
	if a.status != "" && time.Now().Before(a.statusUntil) {
		parts = append(parts, a.status)
	}
	left := " " + strings.Join(parts, " · ")
	right := "? help  o sources  q quit "
	gap := a.w - lipgloss.Width(left) - lipgloss.Width(right)
	line := left
	if gap >= 1 {
		line = left + strings.Repeat(" ", gap) + right
	}
	return a.c.th.Status.Render(widget.Fit(line, a.w))
}

func hbarPlain(frac float64, w int) string {
	n := int(frac*float64(w) + 0.5)
	n = max(0, min(w, n))
	return "▕" + strings.Repeat("█", n) + strings.Repeat("░", w-n)
}

func (a *App) helpView(h int) string {
	type group struct {
		title string
		keys  []key.Binding
	}
	groups := []group{{"Everywhere", a.keys.list()}}
	if a.overlay != nil {
		groups = append(groups, group{"This view", a.overlay.help()})
	} else {
		t := a.tab(a.active)
		groups = append(groups, group{t.name(), t.help()})
	}
	// One column per group when they fit side by side, else stacked.
	// Each binding is "key  description"; a long description wraps under
	// itself rather than being dropped (bubbles' help drops a whole column
	// that does not fit).
	render := func(g group, w int) []string {
		kw := 0
		for _, b := range g.keys {
			if b.Enabled() {
				kw = max(kw, lipgloss.Width(b.Help().Key))
			}
		}
		dw := max(10, w-kw-2)
		out := []string{a.c.th.Bold.Render(g.title)}
		for _, b := range g.keys {
			if !b.Enabled() {
				continue
			}
			lines := wrapWords(b.Help().Desc, dw)
			for i, l := range lines {
				k := ""
				if i == 0 {
					k = b.Help().Key
				}
				out = append(out, a.c.th.Key.Render(widget.Fit(k, kw))+"  "+a.c.th.Dim.Render(l))
			}
		}
		return out
	}
	half := (a.w - 4) / 2
	cols := make([][]string, len(groups))
	widths := make([]int, len(groups))
	for i, g := range groups {
		cols[i] = render(g, a.w)
		for _, l := range cols[i] {
			widths[i] = max(widths[i], lipgloss.Width(l))
		}
	}
	if widths[0]+widths[1]+4 > a.w && widths[0] <= half {
		// Side by side still fits when the view's column wraps narrower.
		cols[1] = render(groups[1], a.w-widths[0]-4)
		widths[1] = 0
		for _, l := range cols[1] {
			widths[1] = max(widths[1], lipgloss.Width(l))
		}
	}
	var lines []string
	if widths[0]+widths[1]+4 <= a.w && len(cols[1]) <= h-2 {
		n := max(len(cols[0]), len(cols[1]))
		for i := 0; i < n; i++ {
			l, r := "", ""
			if i < len(cols[0]) {
				l = cols[0][i]
			}
			if i < len(cols[1]) {
				r = cols[1][i]
			}
			lines = append(lines, widget.Fit(l, widths[0]+4)+r)
		}
	} else {
		// Stacked: the view's keys, then the global ones compactly.
		var parts []string
		for _, b := range groups[0].keys {
			parts = append(parts, b.Help().Key+" "+b.Help().Desc)
		}
		lines = append(cols[1], "")
		for i, l := range wrapWords(strings.Join(parts, " · "), a.w-12) {
			head := "           "
			if i == 0 {
				head = a.c.th.Bold.Render("Everywhere") + " "
			}
			lines = append(lines, head+l)
		}
	}
	foot := a.c.th.Dim.Render("mouse: click tabs and rows, wheel scrolls · any key closes this help")
	switch {
	case len(lines) > h-1:
		// Scrolled by ↑/↓ (the offset is clamped here, not stored: the
		// help's length depends on the window).
		off := min(a.helpOff, len(lines)-(h-1))
		foot = a.c.th.Warn.Render(fmt.Sprintf("lines %d–%d of %d · ↑/↓ pgup/pgdn scroll · any other key closes",
			off+1, off+h-1, len(lines)))
		lines = lines[off : off+h-1]
	case len(lines) < h-1:
		lines = append(lines, "")
	}
	lines = append(lines, foot)
	return widget.Block(strings.Join(lines, "\n"), a.w, h)
}

// wrapWords breaks s into lines of at most w cells at spaces.
func wrapWords(s string, w int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case lipgloss.Width(line)+1+lipgloss.Width(word) <= w:
			line += " " + word
		default:
			out = append(out, line)
			line = word
		}
	}
	return append(out, line)
}
