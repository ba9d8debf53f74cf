package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/model"
	"memscope/snapshot"
	"memscope/tui/widget"
)

// topTab is the table of the largest allocations.
type topTab struct {
	w, h    int
	src     *model.Source
	gen     int
	dev     int
	allocs  []snapshot.Allocation
	locs    []string // location per allocation
	search  []string // lowercased searchable text per allocation
	view_   []int    // filtered and sorted indices into allocs
	list    widget.Scroller
	sortCol int
	desc    bool
	filter  widget.Filter
	est     bool
	// atSnapshot shows the snapshot's active blocks; otherwise, when the
	// snapshot has a trace, the table is the live set at the peak (the
	// moment that decides an OOM). peak says the table is that live set.
	atSnapshot bool
	peak       bool
	peakEvent  int
	streams    bool // some allocation is on a side stream: show STREAM
}

type topCol struct {
	title string
	width int
	right bool
	tail  bool // truncate from the left (paths)
	cell  func(t *topTab, i int) string
	less  func(t *topTab, a, b int) int
}

var (
	pkSort    = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort by next column"))
	pkReverse = key.NewBinding(key.WithKeys("S"), key.WithHelp("S", "reverse order"))
	pkFilter  = key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter (site, role, category, state…)"))
	pkStack   = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "whole stack trace"))
	pkDevice  = key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "next device"))
	pkPeak    = key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "live set at the peak / active blocks at the snapshot"))
)

func newTopTab() *topTab {
	return &topTab{filter: widget.NewFilter("site, role, category, state, module…"), desc: true}
}

func (t *topTab) id() tabID { return tabTop }

func (t *topTab) name() string { return "Top" }

func (t *topTab) capturing() bool { return t.filter.Typing() }

func (t *topTab) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyHome, widget.KeyEnd, pkSort, pkReverse, pkFilter, pkStack, pkPeak, pkDevice, widget.KeyBack, kExport}
}

func (t *topTab) resize(w, h int) {
	t.w, t.h = w, h
	t.list.SetHeight(h - 3)
	t.filter.SetWidth(max(10, w-20))
}

func (t *topTab) setSource(c *tabContext, s *model.Source) {
	dev := c.sel.dev
	if s == t.src && (s == nil || s.Generation == t.gen) && dev == t.dev {
		return
	}
	if dev == t.dev && sameData(t.src, t.gen, s) {
		t.src = s
		return
	}
	// A reload of the same file and device keeps the cursor's row number,
	// the filter and the sort (their fields are left alone).
	keepCursor := -1
	if t.src != nil && s != nil && t.src.ID == s.ID && dev == t.dev {
		keepCursor = t.list.Cursor
	}
	defer func() {
		if keepCursor >= 0 {
			t.list.Cursor = keepCursor
			t.list.Clamp()
		}
	}()
	t.src, t.dev = s, dev
	t.allocs, t.locs, t.search, t.view_ = nil, nil, nil, nil
	t.list.SetN(0)
	if s == nil || s.State != model.Loaded {
		return
	}
	t.gen = s.Generation
	if est := s.Estimate != nil; est != t.est {
		// Another kind of file has other columns: its own default sort.
		t.est, t.sortCol, t.desc = est, 0, true
	}
	t.peak = false
	switch {
	case s.Analysis != nil && dev < len(s.Analysis.Devices):
		d := &s.Analysis.Devices[dev]
		t.allocs = d.Allocations
		if tl := s.Analysis.Timeline(d.Device); tl != nil && !t.atSnapshot {
			t.allocs, t.peak, t.peakEvent = tl.PeakLive(), true, tl.Peak.EventIndex
		}
	case s.Estimate != nil && dev < len(s.Estimate.Devices):
		t.allocs = s.Estimate.Devices[dev].Allocations
	}
	t.streams = false
	for i := range t.allocs {
		if t.allocs[i].Stream != 0 {
			t.streams = true
			break
		}
	}
	t.locs = make([]string, len(t.allocs))
	t.search = make([]string, len(t.allocs))
	locCache := map[snapshot.StackKey]string{}
	for i := range t.allocs {
		al := &t.allocs[i]
		if al.Frames.Len() > 0 {
			l, ok := locCache[al.Frames.Key()]
			if !ok {
				l = al.Location()
				locCache[al.Frames.Key()] = l
			}
			t.locs[i] = l
		}
		t.search[i] = strings.ToLower(strings.Join([]string{t.locs[i], al.Category, al.State.String(), al.Module(), al.Phase(),
			al.Shape(), al.Role.String()}, "\x00"))
	}
	t.refilter()
}

func (t *topTab) columns() []topCol {
	size := topCol{"SIZE", 10, true, false, func(t *topTab, i int) string { return bytesStr(t.allocs[i].Size) },
		func(t *topTab, a, b int) int { return cmp.Compare(t.allocs[a].Size, t.allocs[b].Size) }}
	cat := topCol{"CATEGORY", 15, false, false, func(t *topTab, i int) string { return t.allocs[i].Category },
		func(t *topTab, a, b int) int { return cmp.Compare(t.allocs[a].Category, t.allocs[b].Category) }}
	loc := topCol{"SITE", 0, false, true, func(t *topTab, i int) string {
		if t.locs[i] == "" {
			return snapshot.NoFrames
		}
		return t.locs[i]
	}, func(t *topTab, a, b int) int { return cmp.Compare(t.locs[a], t.locs[b]) }}
	if t.est {
		return topCols{size,
			{"SHAPE", 16, false, false, func(t *topTab, i int) string {
				return strings.TrimSuffix(strings.TrimPrefix(t.allocs[i].Shape(), "torch.Size("), ")")
			},
				func(t *topTab, a, b int) int { return cmp.Compare(t.allocs[a].Shape(), t.allocs[b].Shape()) }},
			{"PHASE", 16, false, false, func(t *topTab, i int) string { return t.allocs[i].Phase() },
				func(t *topTab, a, b int) int { return cmp.Compare(t.allocs[a].Phase(), t.allocs[b].Phase()) }},
			{"MODULE", 26, false, true, func(t *topTab, i int) string { return t.allocs[i].Module() },
				func(t *topTab, a, b int) int { return cmp.Compare(t.allocs[a].Module(), t.allocs[b].Module()) }},
			cat, loc}.fit(t.w)
	}
	role := topCol{"ROLE", 15, false, false, func(t *topTab, i int) string { return t.allocs[i].Role.String() },
		func(t *topTab, a, b int) int { return cmp.Compare(t.allocs[a].Role, t.allocs[b].Role) }}
	cols := []topCol{size}
	if !t.peak {
		// At the peak sizes are requested sizes already (memory_viz's).
		cols = append(cols, topCol{"REQUESTED", 10, true, false, func(t *topTab, i int) string { return bytesStr(t.allocs[i].RequestedSize) },
			func(t *topTab, a, b int) int {
				return cmp.Compare(t.allocs[a].RequestedSize, t.allocs[b].RequestedSize)
			}},
			topCol{"STATE", 9, false, false, func(t *topTab, i int) string {
				if t.allocs[i].State == snapshot.StateActivePendingFree {
					return "pending"
				}
				return "allocated"
			}, func(t *topTab, a, b int) int { return cmp.Compare(t.allocs[a].State, t.allocs[b].State) }})
	}
	cols = append(cols, role, cat)
	if t.streams {
		cols = append(cols, topCol{"STREAM", 8, true, false, func(t *topTab, i int) string {
			if s := t.allocs[i].Stream; s != 0 {
				return fmt.Sprintf("%#x", s)
			}
			return "0"
		}, func(t *topTab, a, b int) int { return cmp.Compare(t.allocs[a].Stream, t.allocs[b].Stream) }})
	}
	return topCols(append(cols, loc)).fit(t.w)
}

type topCols []topCol

// fit sizes the text columns to the window: the site (last, the rest of
// the line) keeps at least a third of it, the text columns giving up
// what it needs (down to 6 cells, cut where their ends differ), and on a
// wide window the module, phase and shape columns grow to show more.
func (cols topCols) fit(w int) []topCol {
	out := slices.Clone(cols)
	text := func(c topCol) bool { return !c.right && c.width > 0 && c.title != "STATE" }
	used := 0
	for _, c := range out[:len(out)-1] {
		used += c.width + 1
	}
	want := max(24, w/3)
	for room := w - used; room < want; room = w - used {
		shrunk := false
		for i := range out[:len(out)-1] {
			if text(out[i]) && out[i].width > 6 && room < want {
				out[i].width--
				used--
				room++
				shrunk = true
			}
		}
		if !shrunk {
			break
		}
	}
	// On a wide window what is left past a 60-cell site widens the
	// columns whose values are longest (Megatron's phase names, module
	// paths), each up to a width that shows most of them whole.
	extra := w - used - max(want, 60)
	for _, g := range []struct {
		title string
		upTo  int
	}{{"PHASE", 28}, {"MODULE", 56}, {"SHAPE", 24}} {
		for i := range out[:len(out)-1] {
			if out[i].title == g.title && extra > 0 {
				grow := min(extra, max(0, g.upTo-out[i].width))
				out[i].width += grow
				extra -= grow
			}
		}
	}
	return out
}

func (t *topTab) refilter() {
	q := strings.ToLower(strings.TrimSpace(t.filter.Query()))
	t.view_ = t.view_[:0]
	for i := range t.allocs {
		if q == "" || strings.Contains(t.search[i], q) {
			t.view_ = append(t.view_, i)
		}
	}
	cols := t.columns()
	c := cols[min(t.sortCol, len(cols)-1)]
	slices.SortStableFunc(t.view_, func(a, b int) int {
		r := c.less(t, a, b)
		if t.desc {
			r = -r
		}
		if r == 0 {
			r = cmp.Compare(t.allocs[b].Size, t.allocs[a].Size)
		}
		return r
	})
	t.list.SetN(len(t.view_))
}

func (t *topTab) update(c *tabContext, msg tea.Msg) tea.Cmd {
	if _, ok := msg.(exportMsg); ok {
		return exportTop(c, t)
	}
	if t.filter.Typing() {
		if m, ok := msg.(tea.KeyPressMsg); ok {
			switch m.String() {
			case "up", "down", "pgup", "pgdown":
				widget.ListMove(&t.list, m)
				return nil
			}
		}
		cmd, changed := t.filter.Update(msg)
		if changed {
			t.refilter()
			t.list.Home()
		}
		return cmd
	}
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		t.list.Scroll(wheel(m))
	case tea.MouseClickMsg:
		if m.Y == 1 {
			t.clickHeader(m.X)
			return nil
		}
		before := t.list.Cursor
		if t.list.Click(m.Y-2) && before == t.list.Cursor {
			t.openStack(c)
		}
	case tea.KeyPressMsg:
		if widget.ListMove(&t.list, m) {
			return nil
		}
		switch {
		case key.Matches(m, pkSort):
			t.sortCol = (t.sortCol + 1) % len(t.columns())
			t.desc = t.columns()[t.sortCol].right // numbers largest first, text A→Z
			t.refilter()
			c.setStatus("sorted by %s", strings.ToLower(t.columns()[t.sortCol].title))
		case key.Matches(m, pkReverse):
			t.desc = !t.desc
			t.refilter()
		case key.Matches(m, pkFilter):
			return t.filter.Start()
		case key.Matches(m, pkStack):
			t.openStack(c)
		case key.Matches(m, pkPeak) && t.hasTrace():
			t.atSnapshot = !t.atSnapshot
			t.sortCol, t.desc = 0, true
			src := t.src
			t.src = nil // rebuild the rows
			t.setSource(c, src)
			if t.peak {
				c.setStatus("Top: the live set at the peak")
			} else {
				c.setStatus("Top: the active blocks at the snapshot")
			}
		case key.Matches(m, pkDevice):
			if n := numDevices(t.src); n > 1 {
				dev := (t.dev + 1) % n
				c.send(selectDeviceMsg{dev})
				c.setStatus("device %s", deviceName(t.src, dev))
			}
		case key.Matches(m, widget.KeyBack):
			if t.filter.Clear() {
				t.refilter()
			}
		case key.Matches(m, kExport):
			return exportTop(c, t)
		}
	}
	return nil
}

// hasTrace reports whether the shown device has a trace, so a live set at
// its peak.
func (t *topTab) hasTrace() bool {
	if t.src == nil || t.src.Analysis == nil || t.dev >= len(t.src.Analysis.Devices) {
		return false
	}
	return t.src.Analysis.Timeline(t.src.Analysis.Devices[t.dev].Device) != nil
}

func (t *topTab) clickHeader(x int) {
	pos := 0
	for i, c := range t.columns() {
		w := c.width
		if w == 0 {
			w = t.w
		}
		if x >= pos && x < pos+w+1 {
			if t.sortCol == i {
				t.desc = !t.desc
			} else {
				t.sortCol, t.desc = i, c.right
			}
			t.refilter()
			return
		}
		pos += w + 1
	}
}

func (t *topTab) openStack(c *tabContext) {
	if t.list.Cursor < 0 || t.list.Cursor >= len(t.view_) {
		return
	}
	al := &t.allocs[t.view_[t.list.Cursor]]
	c.send(openOverlayMsg{newAllocStackOverlay(allocTitle(al), al)})
}

func (t *topTab) view(c *tabContext) string {
	th := c.th
	if v, ok := notOneSnapshot(c, t.src); ok {
		return v
	}
	var total int64
	for _, i := range t.view_ {
		total += t.allocs[i].Size
	}
	var b strings.Builder
	what := "allocations (active blocks at the snapshot)"
	switch {
	case t.est:
		what = "tensors of the estimate"
	case t.peak:
		what = fmt.Sprintf("live at the peak (%s, after event %d)", bytesStr(total), t.peakEvent)
		if t.filter.Query() != "" {
			what = fmt.Sprintf("live at the peak (after event %d)", t.peakEvent)
		}
	}
	head := fmt.Sprintf("%s · %s %s · %s shown", th.Bold.Render(srcName(t.src)), deviceName(t.src, t.dev), what, plural(len(t.view_), "row"))
	if t.filter.Query() != "" {
		// First, so a narrow window cuts the file name, not the filter.
		head = th.Warn.Render(fmt.Sprintf("filter %q: %s in %s (esc clears)", safe(t.filter.Query()), bytesStr(total), plural(len(t.view_), "row"))) +
			" · " + th.Bold.Render(srcName(t.src)) + " · " + deviceName(t.src, t.dev)
	}
	b.WriteString(widget.Fit(head, t.w) + "\n")
	cols := t.columns()
	var hdr strings.Builder
	for i, c := range cols {
		title := c.title
		if i == t.sortCol {
			if t.desc {
				title += "▼"
			} else {
				title += "▲"
			}
		}
		w := c.width
		if w == 0 {
			w = max(8, t.w-hdr.Len())
		}
		if c.right {
			hdr.WriteString(widget.FitLeft(title, w) + " ")
		} else {
			hdr.WriteString(widget.Fit(title, w) + " ")
		}
	}
	b.WriteString(th.Header.Render(widget.Fit(hdr.String(), t.w)) + "\n")
	from, to := t.list.Visible()
	for r := from; r < to; r++ {
		i := t.view_[r]
		var line strings.Builder
		used := 0
		for _, c := range cols {
			w := c.width
			if w == 0 {
				w = max(8, t.w-used-1)
			}
			cell := safe(c.cell(t, i)) // module, phase, shape and location come from the file
			if (c.title == "CATEGORY" || c.title == "ROLE") && r != t.list.Cursor {
				cell = th.Category(cell).Render(widget.Fit(cell, w))
			} else if c.right {
				cell = widget.FitLeft(cell, w)
			} else if c.tail {
				cell = widget.FitTail(cell, w)
			} else {
				cell = widget.Fit(cell, w)
			}
			line.WriteString(cell + " ")
			used += w + 1
		}
		s := line.String()
		if r == t.list.Cursor {
			s = th.Sel.Render(widget.Fit(ansiStrip(s), t.w))
		}
		b.WriteString(widget.Fit(s, t.w) + "\n")
	}
	for i := to - from; i < t.list.Height; i++ {
		b.WriteString("\n")
	}
	if t.filter.Typing() {
		b.WriteString(t.filter.View())
	} else {
		hint := "enter stack · s sort · S reverse · / filter · esc clear"
		switch {
		case t.peak:
			hint = "p: at the snapshot · " + hint
		case t.hasTrace():
			hint = "p: at the peak · " + hint
		}
		if h := t.list.Hint(); h != "" {
			hint = h + " · " + hint
		}
		b.WriteString(th.Dim.Render(widget.Fit(hint, t.w)))
	}
	return b.String()
}
