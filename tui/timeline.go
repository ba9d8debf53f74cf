package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/internal/palette"
	"memscope/model"
	"memscope/snapshot"
	"memscope/tui/widget"
)

// timelineTab shows allocated and reserved memory over a snapshot's trace,
// with a cursor whose position drives the list of live allocations.
type timelineTab struct {
	w, h    int
	src     *model.Source
	gen     int
	dev     int
	tl      *snapshot.Timeline
	cursor  int // event index (-1: before the first)
	x0, x1  int // visible event window [x0, x1)
	byTime  bool
	live    []snapshot.Allocation // the first rows of the live list
	liveN   int                   // how many are live at the cursor
	liveB   int64
	liveC   []snapshot.CategoryTotal
	liveAt  int
	liveLim int
	list    widget.Scroller
	// flat lists the live set largest first; otherwise (the default) it is
	// a tree by category, call site and allocation (ltree, built for the
	// event ltreeAt).
	flat    bool
	ltree   *widget.Tree
	ltreeAt int
	// showState replaces the live set with the allocator state replayed to
	// the cursor (memory_viz's Allocator State History), built for stateAt.
	showState bool
	state     *snapshot.AllocatorState
	stateAt   int
	stateList widget.Scroller
	// stateWant is the event whose state is being replayed off the UI
	// goroutine (-2: none asked).
	stateWant int
	// lines draws active and reserved as lines; otherwise (the default)
	// active memory is stacked in bands by category, role or call site
	// (bandBy), cached for the window in stack*.
	lines    bool
	bandBy   snapshot.BandBy
	bands    *snapshot.Bands
	bandsKey [2]any
	// bandsOf keeps each grouping's bands of this timeline: g cycles
	// through three, and each takes tens of ms on a million intervals.
	bandsOf map[snapshot.BandBy]*snapshot.Bands
	// times holds the events' times once the x axis is time (timesSorted:
	// they never go back, so every window is sorted).
	times       []int64
	timesSorted bool
	stackKey    [5]int
	stackCols   [][]int64
	stackResv   []int64
	stackMax    float64
	// atCursor holds each band's bytes at the cursor (atCursorAt).
	atCursor   []int64
	atCursorAt int
	stackEvent []int
	// stackByTime is set when the columns are equal slices of time (x
	// axis in time and the trace has times), not of events.
	stackByTime bool
	// chart caches the decimated series of the current window.
	chartKey [4]int
	chartS   []widget.Series
	chartMax float64
}

var (
	mkMove   = key.NewBinding(key.WithKeys("left", "right"), key.WithHelp("←/→", "move the cursor (shift: faster)"))
	mkPan    = key.NewBinding(key.WithKeys("<", ">"), key.WithHelp("< >", "pan the window"))
	mkMarker = key.NewBinding(key.WithKeys("[", "]"), key.WithHelp("[ ]", "previous / next annotation or OOM"))
	mkPeak   = key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "jump to the peak"))
	mkZoomIn = key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+/-", "zoom in / out"))
	mkReset  = key.NewBinding(key.WithKeys("0"), key.WithHelp("0", "whole trace"))
	mkAxis   = key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "x axis: event index / time"))
	mkGroup  = key.NewBinding(key.WithKeys("g"), key.WithHelp("g", "stack the chart by category / role / call site"))
	mkLines  = key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "chart: stacked bands / active and reserved lines"))
	mkFlat   = key.NewBinding(key.WithKeys("f"), key.WithHelp("f", "live set: by category → call site / flat list"))
	mkState  = key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "allocator state at the cursor (segments and blocks) / live set"))
	mkOpen   = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open a group / the allocation's stack"))
)

// liveTreeCap is how many of the largest live allocations the grouped live
// set holds: a cursor move rebuilds it, and the frame must stay quick.
const liveTreeCap = 20000

// stateTick asks for the allocator state at cursor, once the cursor has
// stayed there a moment: replaying the state costs a pass over the later
// events, too much for every frame of a held arrow key.
type stateTick struct{ cursor int }

// stateDelay is how long the cursor must rest before the state follows.
const stateDelay = 120 * time.Millisecond

func newTimelineTab() *timelineTab { return &timelineTab{stateWant: -2} }

func (t *timelineTab) id() tabID { return tabTimeline }

func (t *timelineTab) name() string { return "Timeline" }

func (t *timelineTab) capturing() bool { return false }

func (t *timelineTab) help() []key.Binding {
	return []key.Binding{mkMove, mkPan, mkMarker, mkPeak, mkZoomIn, mkReset, mkAxis, widget.KeyUp, widget.KeyDown, mkGroup, mkLines, mkFlat, mkOpen, widget.KeyExpandAll, mkState, mkStages, skDevice, kExport}
}

func (t *timelineTab) resize(w, h int) { t.w, t.h = w, h }

func (t *timelineTab) setSource(c *tabContext, s *model.Source) {
	dev := c.sel.dev
	if s == t.src && (s == nil || s.Generation == t.gen) && dev == t.dev {
		return
	}
	if dev == t.dev && sameData(t.src, t.gen, s) {
		t.src = s
		return
	}
	sameFile := t.src != nil && s != nil && t.src.ID == s.ID && dev == t.dev && t.tl != nil
	oldCursor, oldX0, oldX1 := t.cursor, t.x0, t.x1
	t.src, t.dev, t.tl = s, dev, nil
	if s == nil || s.State != model.Loaded || s.Analysis == nil || dev >= len(s.Analysis.Devices) {
		return
	}
	t.gen = s.Generation
	// Replay runs once per device and is cached by the analysis; the UI
	// goroutine owns the analysis, so it runs here (a million events take
	// well under a second).
	t.tl = s.Analysis.Timeline(s.Analysis.Devices[dev].Device)
	if t.tl == nil {
		return
	}
	t.x0, t.x1 = 0, len(t.tl.Events)
	t.cursor = t.tl.Peak.EventIndex
	if sameFile {
		// A reload keeps the cursor and the zoom where they still fit (a
		// trace that grew keeps its start).
		n := len(t.tl.Events)
		t.cursor = min(oldCursor, n-1)
		t.x0, t.x1 = min(oldX0, max(0, n-1)), min(oldX1, n)
	}
	t.liveAt = -2
	t.chartS = nil
	t.bands, t.stackCols, t.bandsOf, t.times = nil, nil, nil, nil
	// The state view was of another trace: m replays it for this one.
	t.showState, t.state, t.stateWant = false, nil, -2
}

func (t *timelineTab) clampWindow() {
	n := len(t.tl.Events)
	span := t.x1 - t.x0
	span = max(min(span, n), min(n, 20))
	if t.cursor < t.x0 {
		t.x0 = max(0, t.cursor)
	}
	if t.cursor >= t.x0+span {
		t.x0 = t.cursor - span + 1
	}
	t.x0 = max(0, min(t.x0, n-span))
	t.x1 = t.x0 + span
}

func (t *timelineTab) moveCursor(to int) {
	n := len(t.tl.Events)
	t.cursor = max(-1, min(n-1, to))
	t.clampWindow()
}

func (t *timelineTab) update(c *tabContext, msg tea.Msg) (cmd tea.Cmd) {
	switch m := msg.(type) {
	case showStagesMsg:
		t.showStages(c)
		return nil
	case seekEventMsg:
		if t.tl != nil {
			t.moveCursor(m.at)
		}
		return nil
	case exportMsg:
		if t.tl != nil {
			return exportTimeline(c, t)
		}
		return nil
	}
	if t.tl == nil {
		return nil
	}
	n := len(t.tl.Events)
	step := max(1, (t.x1-t.x0)/max(1, t.w-12))
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		t.list.Scroll(wheel(m))
	case tea.MouseClickMsg:
		chartTop, chartH := 2, t.chartHeight()
		if m.Y >= chartTop && m.Y < chartTop+chartH && m.X > 10 {
			f := float64(m.X-10) / float64(max(1, t.w-11))
			t.moveCursor(t.x0 + int(f*float64(t.x1-t.x0)))
		} else if m.Y > chartTop+chartH+1 {
			t.list.Click(m.Y - chartTop - chartH - 2)
		}
	case tea.KeyPressMsg:
		before := t.cursor
		defer func() {
			if t.showState && t.cursor != before {
				cur := t.cursor
				cmd = tea.Tick(stateDelay, func(time.Time) tea.Msg { return stateTick{cursor: cur} })
			}
		}()
		switch m.String() {
		case "left":
			t.moveCursor(t.cursor - step)
		case "right":
			t.moveCursor(t.cursor + step)
		case "shift+left":
			t.moveCursor(t.cursor - 10*step)
		case "shift+right":
			t.moveCursor(t.cursor + 10*step)
		case "<", ">":
			span := t.x1 - t.x0
			d := span / 2
			if m.String() == "<" {
				d = -d
			}
			t.x0 = max(0, min(n-span, t.x0+d))
			t.x1 = t.x0 + span
			t.cursor = max(t.x0, min(t.x1-1, t.cursor))
		case "[", "]":
			t.jumpMarker(c, m.String() == "]")
		case "p":
			t.moveCursor(t.tl.Peak.EventIndex)
			c.setStatus("peak: %s active", bytesStr(t.tl.Peak.Active))
		case "+", "=":
			span := max(20, (t.x1-t.x0)/2)
			t.x0 = t.cursor - span/2
			t.x1 = t.x0 + span
			t.clampWindow()
		case "-":
			span := min(n, (t.x1-t.x0)*2)
			t.x0 = t.cursor - span/2
			t.x1 = t.x0 + span
			t.clampWindow()
		case "0":
			t.x0, t.x1 = 0, n
		case "x":
			t.byTime = !t.byTime
		case "d":
			if nd := numDevices(t.src); nd > 1 {
				c.send(selectDeviceMsg{(c.sel.dev + 1) % nd})
			}
		case "m":
			t.showState = !t.showState
			t.state, t.stateWant = nil, -2
			if t.showState {
				return t.replayState()
			}
			return nil
		case "g":
			t.bandBy = (t.bandBy + 1) % 3
			t.stackCols = nil
			switch t.bandBy {
			case snapshot.BandSite:
				c.setStatus("chart stacked by call site (the largest at the peak)")
			case snapshot.BandRole:
				c.setStatus("chart stacked by role (parameter, gradient, optimizer state, activation…)")
			default:
				c.setStatus("chart stacked by category")
			}
		case "v":
			t.lines = !t.lines
		case "f":
			t.flat = !t.flat
			t.ltree = nil
			if t.flat {
				c.setStatus("live set: flat list, largest first")
			} else {
				c.setStatus("live set: by category → call site → allocation")
			}
		case "enter":
			t.ensureLive()
			if !t.flat && t.ltree != nil {
				if r := t.ltree.Cur(); r != nil && r.Node.Alloc != nil {
					al := r.Node.Alloc
					c.send(openOverlayMsg{newAllocStackOverlay(allocTitle(al)+fmt.Sprintf(" · live at event %d", t.cursor), al)})
				} else {
					t.ltree.Update(m)
				}
				return nil
			}
			if t.list.Cursor >= 0 && t.list.Cursor < len(t.live) {
				al := &t.live[t.list.Cursor]
				c.send(openOverlayMsg{newAllocStackOverlay(allocTitle(al)+fmt.Sprintf(" · live at event %d", t.cursor), al)})
			}
		case "e":
			return exportTimeline(c, t)
		case "s":
			t.showStages(c)
			return nil
		default:
			if t.showState {
				widget.ListMove(&t.stateList, m)
				return nil
			}
			t.ensureLive()
			if !t.flat && t.ltree != nil {
				if key.Matches(m, widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyHome, widget.KeyEnd, widget.KeyExpandAll) {
					t.ltree.Update(m)
				}
				return nil
			}
			widget.ListMove(&t.list, m)
		}
	}
	return nil
}

func (t *timelineTab) jumpMarker(c *tabContext, next bool) {
	ms := t.tl.Markers
	best := -1
	for i, m := range ms {
		if next && m.Index > t.cursor {
			best = i
			break
		}
		if !next && m.Index < t.cursor {
			best = i
		}
	}
	if best < 0 {
		c.setStatus("no more annotations that way")
		return
	}
	t.moveCursor(ms[best].Index)
	c.setStatus("%s", ms[best].Label)
}

func (t *timelineTab) chartHeight() int { return max(5, (t.h-4)*55/100) }

// ensureLive brings the live list up to the cursor: totals by one scan, rows
// only as far as the list shows.
func (t *timelineTab) ensureLive() {
	listH := t.h - t.chartHeight() - 4
	t.list.SetHeight(max(1, listH-1))
	if t.liveAt != t.cursor {
		t.liveN, t.liveB, t.liveC = t.tl.LiveStats(t.cursor)
		t.liveAt, t.liveLim, t.live = t.cursor, 0, nil
		t.list.SetN(t.liveN)
		t.list.Home()
	}
	if need := t.list.Offset + t.list.Height; need > t.liveLim {
		t.liveLim = max(need, 2*t.liveLim, 256)
		t.live = t.tl.LiveAt(t.cursor, t.liveLim)
	}
	if !t.flat && (t.ltree == nil || t.ltreeAt != t.cursor) {
		// Rebuilt for the new event, keeping the groups the user opened
		// and the cursor's path.
		var keep widget.TreeKeep
		if t.ltree != nil {
			keep = t.ltree.Keep()
		}
		tv := widget.NewTree(t.tl.LiveTree(t.cursor, liveTreeCap), t.liveB)
		tv.Colored = true
		if t.ltree != nil {
			tv.Expanded = map[string]bool{}
			tv.Restore(keep)
		}
		t.ltree, t.ltreeAt = tv, t.cursor
	}
}

func (t *timelineTab) view(c *tabContext) string {
	th := c.th
	if v, ok := notOneSnapshot(c, t.src); ok {
		return v
	}
	if t.src.Estimate != nil {
		return th.Dim.Render("An estimate has no allocation trace: the timeline needs an allocator snapshot recorded with\ntorch.cuda.memory._record_memory_history().")
	}
	if t.tl == nil {
		return th.Bold.Render(srcName(t.src)) + "\n\n" + "This device's snapshot has no allocation trace. Record one with\ntorch.cuda.memory._record_memory_history(max_entries=100000) before the work,\nthen dump the snapshot."
	}
	tl := t.tl
	if (!t.lines && t.stackCols == nil) || (t.lines && t.chartS == nil) {
		// Not prepared yet (the App prepares the tab in front after each
		// message): a frame never does the work itself.
		return th.Bold.Render(srcName(t.src)) + th.Dim.Render(" · preparing the timeline…")
	}
	n := len(tl.Events)
	var b strings.Builder
	peak := tl.Peak
	head := fmt.Sprintf("%s cuda:%d · %d events · peak %s at event %d", th.Bold.Render(srcName(t.src)), tl.Device, n,
		bytesStr(peak.Active), peak.EventIndex)
	if !tl.Complete {
		head += " · " + th.Warn.Render("trace starts mid-run")
	} else {
		head += " · " + th.OK.Render("exact")
	}
	b.WriteString(widget.Fit(head, t.w) + "\n")
	// Cursor readout.
	cur := t.cursor
	alloc, resv := tl.BaseActive, tl.BaseReserved
	what := "before the first event"
	if cur >= 0 {
		e := tl.Events[cur]
		alloc, resv = tl.Active[cur], tl.ReservedAt(cur)
		what = fmt.Sprintf("event %d: %s %s", cur, e.Action(), bytesStr(e.Size))
		if e.TimeUS > 0 && len(tl.Events) > 0 && tl.Events[0].TimeUS > 0 {
			what += fmt.Sprintf(" at +%s", time.Duration(e.TimeUS-tl.Events[0].TimeUS)*time.Microsecond)
		}
	}
	readout := fmt.Sprintf("cursor %s · %s active · %s reserved", what, th.Fg(palette.Real).Render(bytesStr(alloc)), bytesStr(resv))
	for _, m := range tl.Markers {
		if m.Index == cur {
			readout += " · " + th.Warn.Render(m.Label)
		}
	}
	b.WriteString(widget.Fit(readout, t.w) + "\n")
	chartH := t.chartHeight()
	b.WriteString(t.chart(c, chartH) + "\n")
	b.WriteString(th.Dim.Render(widget.Fit(fmt.Sprintf("events %d–%d of %d · ←/→ cursor · [ ] annotations · p peak · +/- zoom · < > pan · x axis (%s) · %s",
		t.x0, t.x1-1, n, map[bool]string{true: "time", false: "event index"}[t.byTime], tl.Note), t.w)) + "\n")
	if t.showState {
		b.WriteString(t.stateView(c))
		return b.String()
	}
	// Live allocations at the cursor (prepare found them).
	var cs []string
	for i, c := range t.liveC {
		if i == 4 {
			break
		}
		cs = append(cs, th.Category(c.Name).Render(c.Name)+" "+bytesStr(c.Bytes))
	}
	b.WriteString(widget.Fit(th.Bold.Render(fmt.Sprintf("Live at the cursor: %s in %s", bytesStr(t.liveB), plural(t.liveN, "allocation")))+" · "+strings.Join(cs, " · "), t.w) + "\n")
	if !t.flat && t.ltree != nil {
		more := ""
		if t.liveN > liveTreeCap {
			more = fmt.Sprintf(" (the largest %d of %d)", liveTreeCap, t.liveN)
		}
		b.WriteString(th.Dim.Render(widget.Fit("by category → call site → allocation"+more+" · ↑↓ move · enter open/stack · * expand all · f flat list", t.w)) + "\n")
		b.WriteString(t.ltree.View(th, t.w, max(1, t.list.Height-1)))
		return b.String()
	}
	from, to := t.list.Visible()
	for i := from; i < to && i < len(t.live); i++ {
		l := &t.live[i]
		loc := safe(snapshot.Location(l.Frames))
		if loc == "" {
			loc = snapshot.NoFrames
		}
		line := fmt.Sprintf("%10s  %s  %s", bytesStr(l.Size), th.Category(l.Category).Render(widget.Fit(l.Category, 15)), widget.FitTail(loc, max(8, t.w-30)))
		if i == t.list.Cursor {
			line = th.Sel.Render(widget.Fit(ansiStrip(line), t.w))
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	return b.String()
}

// stateView draws the allocator state right after the cursor's event:
// every segment to one scale, live blocks at their requested sizes,
// pending frees marked, with the free memory and fragmentation there.
func (t *timelineTab) stateView(c *tabContext) string {
	th := c.th
	st := t.state
	if st == nil {
		return th.Dim.Render(fmt.Sprintf("replaying the allocator state to event %d…", t.cursor))
	}
	var b strings.Builder
	following := ""
	if st.Event != t.cursor {
		following = th.Dim.Render(" (following the cursor…)")
	}
	b.WriteString(widget.Fit(th.Bold.Render(fmt.Sprintf("Allocator state after event %d", st.Event))+following+fmt.Sprintf(
		": reserved %s · active %s · %d segments · m live set", bytesStr(st.Reserved), bytesStr(st.Active), len(st.Segments)), t.w) + "\n")
	b.WriteString(widget.Fit(fmt.Sprintf("free %s · largest free %s · external fragmentation %.1f%% · %s block (requested size) %s pending free %s free",
		bytesStr(st.Free), bytesStr(st.LargestFree), st.ExternalPct, th.Fg(palette.Allocated).Render(cellRune(th, cellAllocated)),
		th.Fg(palette.PendingFree).Render(cellRune(th, cellPending)), th.Fg(palette.CachedFree).Render(cellRune(th, cellFree))), t.w) + "\n")
	var largest int64
	for _, sg := range st.Segments {
		largest = max(largest, sg.Size)
	}
	prefix := 26
	cells := max(8, t.w-prefix-8)
	bi := 0 // blocks and segments are both sorted by address
	from, to := t.stateList.Visible()
	for i := 0; i < to; i++ {
		sg := st.Segments[i]
		var spans []cellSpan
		var used int64
		for bi < len(st.Blocks) && st.Blocks[bi].Addr < sg.Addr {
			bi++
		}
		for k := bi; k < len(st.Blocks) && st.Blocks[k].Addr < sg.Addr+uint64(sg.Size); k++ {
			bl := st.Blocks[k]
			state := cellAllocated
			if bl.PendingFree {
				state = cellPending
			}
			spans = append(spans, cellSpan{int64(bl.Addr - sg.Addr), bl.Size, state})
			used += bl.Size
		}
		if i < from {
			continue
		}
		n := scaledCells(sg.Size, largest, cells)
		pct := 0.0
		if sg.Size > 0 {
			pct = 100 * float64(used) / float64(sg.Size)
		}
		head := fmt.Sprintf("0x%012x %9s", sg.Addr, bytesStr(sg.Size))
		if i == t.stateList.Cursor {
			head = th.Sel.Render(head)
		}
		b.WriteString(widget.Fit(head+"  "+spanCells(th, sg.Size, spans, n)+strings.Repeat(" ", cells-n)+fmt.Sprintf(" %5.1f%%", pct), t.w) + "\n")
	}
	if len(st.Segments) == 0 {
		b.WriteString(th.Dim.Render("no segments at this event") + "\n")
	}
	return b.String()
}

// onStateTick replays the allocator state once the cursor has rested.
func (t *timelineTab) onStateTick(m stateTick) tea.Cmd {
	if t.tl != nil && t.showState && m.cursor == t.cursor && t.stateAt != t.cursor {
		return t.replayState()
	}
	return nil
}

// stateMsg is the allocator state replayed to event at of timeline tl.
type stateMsg struct {
	tl *snapshot.Timeline
	at int
	st *snapshot.AllocatorState
}

// replayState replays the allocator state to the cursor off the UI
// goroutine: on a million-event trace it takes a tenth of a second and
// tens of MB, which a key must not wait for. The timeline and snapshot
// are read only, by both goroutines.
func (t *timelineTab) replayState() tea.Cmd {
	if t.tl == nil || t.src == nil || t.src.Analysis == nil || t.stateWant == t.cursor {
		return nil
	}
	tl, s, at := t.tl, t.src.Analysis.Snapshot, t.cursor
	t.stateWant = at
	return func() tea.Msg { return stateMsg{tl: tl, at: at, st: tl.StateAt(s, at)} }
}

// onState takes a replayed state, if it is still for this timeline.
func (t *timelineTab) onState(m stateMsg) {
	if m.tl != t.tl || !t.showState {
		return
	}
	if m.at == t.stateWant {
		t.stateWant = -2
	}
	t.state, t.stateAt = m.st, m.at
	t.prepare()
}

// showStages opens the stages view (s, :stages).
func (t *timelineTab) showStages(c *tabContext) {
	if t.tl == nil || t.src == nil || t.src.Analysis == nil {
		c.setStatus("no allocation trace to take stages from")
		return
	}
	if st := t.src.Analysis.Device(t.tl.Device); st != nil {
		c.send(openOverlayMsg{newStagesOverlay(t, st)})
	}
}
