package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
	"memscope/snapshot"
	"memscope/tui/widget"
)

// allocMode is how the allocator view shows a device.
type allocMode int

const (
	amCategory allocMode = iota // category → call site → allocation
	amRole                      // role → call site → allocation
	amStack                     // call-stack tree
	amSegments                  // segment map
	amIcicle                    // flame graph of the peak's live memory
)

// allocView is the Snapshot tab's view of an allocator snapshot: a tree by
// category, role or call stack, the segment map or the flame graph at the
// peak, under the device's figures and above its recommendations.
type allocView struct {
	mode allocMode
	// trees caches built trees per (device, mode); kept holds what the
	// trees of the previous load had open, for a reload.
	trees map[[2]int]*widget.Tree
	kept  map[[2]int]widget.TreeKeep
	icy   map[int]*icicle // flame graph per device
	segs  widget.Scroller
}

// reset forgets the trees built for the previous load; a reload of the
// same file (sameFile) keeps what they had open, and the mode.
func (v *allocView) reset(sameFile bool) {
	v.kept = map[[2]int]widget.TreeKeep{}
	if sameFile {
		for k, tv := range v.trees {
			v.kept[k] = tv.Keep()
		}
	} else {
		v.mode = amCategory
	}
	v.trees = map[[2]int]*widget.Tree{}
	v.icy = map[int]*icicle{}
}

func (v *allocView) help(fromRanks bool) []key.Binding {
	if v.mode == amIcicle {
		return []key.Binding{ikMove, ikZoom, skIcicle, skGroup, skDevice, kExport}
	}
	if fromRanks {
		return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyExpand, widget.KeyCollapse, widget.KeyExpandAll, skGroup, skIcicle, skSegMap, skDevice, skSearch, skNext, skStackUp, skRecs, kExport, rkIter, rkBack}
	}
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyExpand, widget.KeyCollapse, widget.KeyExpandAll, skGroup, skIcicle, skSegMap, skDevice, skVersus, skPick, skSearch, skNext, skStackUp, skRecs, kExport}
}

// tree builds (once) the tree of the device in the mode; nil in the
// modes that show none.
func (v *allocView) tree(t *snapTab) *widget.Tree {
	d := t.dev()
	if d == nil || (v.mode != amCategory && v.mode != amRole && v.mode != amStack) {
		return nil
	}
	k := [2]int{t.devIx, int(v.mode)}
	if tv := v.trees[k]; tv != nil {
		return tv
	}
	var tv *widget.Tree
	switch v.mode {
	case amCategory:
		tv = widget.NewTree(snapshot.CategoryTree(d.Allocations), d.ActiveBytes)
		tv.Colored = true
	case amStack:
		tv = widget.NewTree(snapshot.StackTree(d.Allocations), d.ActiveBytes)
	case amRole:
		tv = widget.NewTree(snapshot.RoleTree(d.Allocations), d.ActiveBytes)
		tv.Colored = true
	}
	if keep, ok := v.kept[k]; ok {
		tv.Restore(keep)
	}
	v.trees[k] = tv
	return tv
}

// capturesKey says the flame graph takes the key before the tab's own
// keys (all but regroup, device and export).
func (v *allocView) capturesKey(m tea.KeyPressMsg) bool {
	return v.mode == amIcicle && !key.Matches(m, skGroup) && !key.Matches(m, skDevice) && !key.Matches(m, kExport)
}

func (v *allocView) update(c *tabContext, t *snapTab, msg tea.Msg) tea.Cmd {
	if m, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case v.capturesKey(m):
			if key.Matches(m, skIcicle) {
				v.mode = amCategory
				return nil
			}
			if ic := t.currentIcicle(); ic != nil && !ic.update(m) && key.Matches(m, widget.KeyBack) {
				v.mode = amCategory
			}
			return nil
		case key.Matches(m, skIcicle):
			v.mode = amIcicle
			c.setStatus("flame graph of the memory live at the peak (frames memory_viz hides left out)")
			return nil
		case key.Matches(m, skGroup):
			switch v.mode {
			case amCategory:
				v.mode = amRole
				c.setStatus("grouped by role → call site (what the memory is)")
			case amRole:
				v.mode = amStack
				c.setStatus("grouped by call stack (outermost frame first)")
			default:
				v.mode = amCategory
				c.setStatus("grouped by category → call site")
			}
			return nil
		case key.Matches(m, skSegMap):
			if v.mode == amSegments {
				v.mode = amCategory
			} else {
				v.mode = amSegments
			}
			return nil
		case key.Matches(m, skRecs):
			if d := t.dev(); d != nil && len(d.Recommendations) > 0 {
				o := &textOverlay{title: fmt.Sprintf("Recommendations for %s cuda:%d", safe(t.src.Name()), d.Device)}
				for _, r := range d.Recommendations {
					o.items = append(o.items, r.Severity.Mark("·")+" "+safe(r.Text))
				}
				c.send(openOverlayMsg{o})
			}
			return nil
		case key.Matches(m, widget.KeyBack) && v.mode == amSegments:
			v.mode = amCategory
			return nil
		}
	}
	if v.mode == amSegments {
		if m, ok := msg.(tea.KeyPressMsg); ok {
			widget.ListMove(&v.segs, m)
		}
		if m, ok := msg.(tea.MouseWheelMsg); ok {
			v.segs.Scroll(wheel(m))
		}
		return nil
	}
	tv := v.tree(t)
	if tv == nil {
		return nil
	}
	if m, ok := msg.(tea.MouseClickMsg); ok {
		tv.Click(m.Y - t.headerLines())
		return nil
	}
	if m, ok := msg.(tea.KeyPressMsg); ok && (key.Matches(m, skStackUp) || m.String() == "enter") {
		if r := tv.Cur(); r != nil && r.Node.Alloc != nil {
			al := r.Node.Alloc
			c.send(openOverlayMsg{newAllocStackOverlay(allocTitle(al), al)})
			return nil
		}
	}
	tv.Update(msg)
	return nil
}

func (v *allocView) view(c *tabContext, t *snapTab) string {
	th := c.th
	d := t.dev()
	var b strings.Builder
	b.WriteString(t.headerView(c, d) + "\n")
	bh := t.bodyHeight()
	switch v.mode {
	case amSegments:
		b.WriteString(widget.Block(t.segmentMap(c, d, t.h-t.headerLines()), t.w, t.h-t.headerLines()))
		return b.String()
	case amIcicle:
		h := t.h - t.headerLines()
		b.WriteString(widget.Block(t.currentIcicle().view(th, t.w, h), t.w, h))
		return b.String()
	}
	if d.ActiveBlocks == 0 {
		b.WriteString(widget.Block(t.nothingLive(c, d), t.w, bh) + "\n")
	} else {
		b.WriteString(widget.Block(v.tree(t).View(th, t.w, bh), t.w, bh) + "\n")
	}
	b.WriteString(t.recView(c, d))
	return b.String()
}

func (t *snapTab) bodyHeight() int { return max(3, t.h-t.headerLines()-t.recLines()) }

func (t *snapTab) headerLines() int {
	if t.src != nil && t.src.Analysis != nil {
		return 4 // the roles line
	}
	return 3
}

// currentIcicle builds (once) the flame graph of the memory live at the
// peak of the device (the active blocks without a trace).
func (t *snapTab) currentIcicle() *icicle {
	d := t.dev()
	if d == nil {
		return nil
	}
	if ic := t.alloc.icy[t.devIx]; ic != nil {
		return ic
	}
	ic := newIcicle(snapshot.FlameTree(t.src.Analysis.PeakLive(d)))
	t.alloc.icy[t.devIx] = ic
	return ic
}

func (t *snapTab) recLines() int {
	if d := t.dev(); d != nil && t.alloc.mode != amSegments {
		return min(len(d.Recommendations), 3) + 1
	}
	return 1
}

// nothingLive explains an empty tree: every block is cached (inactive) at
// the moment of the snapshot, which is common after a step or
// empty_cache(); the memory that mattered is in the trace.
func (t *snapTab) nothingLive(c *tabContext, d *snapshot.DeviceStats) string {
	th := c.th
	w := max(20, t.w-1)
	para := func(st lipgloss.Style, text string) string {
		var out []string
		for _, l := range wrapWords(text, w) {
			out = append(out, st.Render(l))
		}
		return strings.Join(out, "\n") + "\n"
	}
	var b strings.Builder
	b.WriteString(th.Bold.Render("Nothing is allocated at the moment of this snapshot") + "\n\n")
	b.WriteString(para(lipgloss.NewStyle(), fmt.Sprintf("Its %s %s inactive: reserved by the caching allocator (%s), but not in use.",
		plural(d.Blocks, "block"), map[bool]string{true: "is", false: "are"}[d.Blocks == 1], bytesStr(d.ReservedBytes))))
	if pk := &d.Peak; pk.FromTrace && pk.Active > 0 {
		b.WriteString("\n" + para(lipgloss.NewStyle(), fmt.Sprintf("During the trace, active memory peaked at %s (trace entry %d).", bytesStr(pk.Active), pk.EventIndex)))
		b.WriteString(para(th.Accent, "5 opens the Timeline, p jumps to the peak, and the live set there shows what held it."))
	} else {
		b.WriteString("\n" + para(lipgloss.NewStyle(), "The snapshot has no trace to replay, so what it held earlier is unknown: "+
			"call torch.cuda.memory._record_memory_history() before the step to record it."))
	}
	return b.String()
}

func (t *snapTab) headerView(c *tabContext, d *snapshot.DeviceStats) string {
	th := c.th
	devs := ""
	if n := t.numDevices(); n > 1 {
		devs = fmt.Sprintf(" (%d/%d, d next)", t.devIx+1, n)
	}
	// The figures first, the name (in the tab bar as well) in what is
	// left, cut in the middle: 80 columns keep allocated and active.
	figs := fmt.Sprintf("cuda:%d%s · reserved %s · allocated %s · active %s · cached free %s · rounding %s",
		d.Device, devs, bytesStr(d.ReservedBytes), bytesStr(d.AllocatedBytes),
		bytesStr(d.ActiveBytes), bytesStr(d.InactiveBytes), bytesStr(d.RoundingWaste))
	if lipgloss.Width(figs)+12 > t.w {
		figs = fmt.Sprintf("cuda:%d%s · resv %s · alloc %s · active %s · free %s · round %s",
			d.Device, devs, bytesStr(d.ReservedBytes), bytesStr(d.AllocatedBytes),
			bytesStr(d.ActiveBytes), bytesStr(d.InactiveBytes), bytesStr(d.RoundingWaste))
	}
	l1 := figs
	if room := t.w - lipgloss.Width(figs) - 1; room >= 12 {
		l1 = th.Bold.Render(strings.TrimRight(widget.FitMiddle(safe(t.src.Name()), room), " ")) + " " + figs
	}
	gw := min(30, max(10, t.w/4))
	// Efficiency is judged at the peak when there is a trace: a snapshot
	// taken at a quiet moment or after empty_cache() says little.
	eff, rating, when := d.EfficiencyPct, d.Rating, "at the snapshot"
	if pk := &d.Peak; pk.FromTrace {
		eff, rating, when = pk.EfficiencyPct, pk.Rating, fmt.Sprintf("at the peak (%.1f%% at the snapshot)", d.EfficiencyPct)
	}
	ratingSt := th.OK
	switch rating {
	case "poor":
		ratingSt = th.Err
	case "good", "inconsistent":
		ratingSt = th.Warn
	}
	l2 := fmt.Sprintf("efficiency %s %s %s %s · %s, %s (%d active) · trace %s",
		widget.HBar(eff/100, gw, ratingSt), fmt.Sprintf("%.1f%%", eff), ratingSt.Render(rating), when,
		plural(d.Segments, "segment"), plural(d.Blocks, "block"), d.ActiveBlocks, plural(d.TraceEntries, "entry"))
	if n := len(d.OOMs); n > 0 {
		l2 += " · " + th.Err.Render(plural(n, "OOM event"))
	}
	if n := len(t.src.Warnings); n > 0 {
		l2 += " · " + th.Warn.Render(plural(n, "note"))
	}
	modeName := map[allocMode]string{amCategory: "category → call site → allocation", amRole: "role → call site → allocation",
		amStack: "call stack (outermost first)", amSegments: "segment map", amIcicle: "flame graph at the peak"}[t.alloc.mode]
	l3 := th.Dim.Render(fmt.Sprintf("view: %s · g regroup · i flame graph · m segment map · enter expand/stack · / search", modeName))
	if t.searching {
		l3 = t.searchLine(c)
	} else {
		l3 += t.searchLine(c)
	}
	return widget.Fit(l1, t.w) + "\n" + widget.Fit(l2, t.w) + "\n" + widget.Fit(rolesLine(th, d), t.w) + "\n" + widget.Fit(l3, t.w)
}

// rolesLine names what the memory at the peak is, by role, largest first.
func rolesLine(th widget.Theme, d *snapshot.DeviceStats) string {
	where := "at the peak"
	if !d.Peak.FromTrace {
		where = "at the snapshot"
	}
	var parts []string
	for _, r := range d.Peak.Roles {
		parts = append(parts, th.Category(r.Name).Render(r.Name)+" "+bytesStr(r.Bytes))
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing live")
	}
	return th.Bold.Render("roles "+where+":") + " " + strings.Join(parts, " · ")
}

func (t *snapTab) recView(c *tabContext, d *snapshot.DeviceStats) string {
	th := c.th
	if len(d.Recommendations) == 0 {
		return th.OK.Render(widget.Fit("✓ no recommendations: the allocator state looks healthy", t.w))
	}
	title := th.Bold.Render(fmt.Sprintf("Recommendations (%d)", len(d.Recommendations)))
	if len(d.Recommendations) > 0 {
		title += th.Dim.Render(" · R shows them in full")
	}
	lines := []string{widget.Fit(title, t.w)}
	for i, r := range d.Recommendations {
		if i == 3 {
			break
		}
		st := map[snapshot.Severity]lipgloss.Style{snapshot.Critical: th.Err, snapshot.Warning: th.Warn, snapshot.Info: th.Dim}[r.Severity]
		mark := r.Severity.Mark("·")
		if r.Severity == snapshot.Warning {
			mark += " " // as wide as the critical mark
		}
		lines = append(lines, widget.Fit(st.Render(mark)+" "+safe(r.Text), t.w))
	}
	return strings.Join(lines, "\n")
}

// segmentMap draws each segment as a row of cells coloured by the state of
// the bytes they cover.
func (t *snapTab) segmentMap(c *tabContext, d *snapshot.DeviceStats, h int) string {
	th := c.th
	var segs []*snapshot.Segment
	s := t.src.Analysis.Snapshot
	for i := range s.Segments {
		if s.Segments[i].Device == d.Device {
			segs = append(segs, &s.Segments[i])
		}
	}
	slices.SortFunc(segs, func(x, y *snapshot.Segment) int {
		switch {
		case x.Address < y.Address:
			return -1
		case x.Address > y.Address:
			return 1
		}
		return 0
	})
	t.alloc.segs.SetHeight(h - 2)
	t.alloc.segs.SetN(len(segs))
	legend := fmt.Sprintf("%s allocated  %s rounding waste  %s pending free  %s cached free   · esc back",
		th.Fg(palette.Allocated).Render(cellRune(th, 0)), th.Fg(palette.Rounding).Render(cellRune(th, 1)),
		th.Fg(palette.PendingFree).Render(cellRune(th, 2)), th.Fg(palette.CachedFree).Render(cellRune(th, 3)))
	var b strings.Builder
	b.WriteString(widget.Fit(legend, t.w) + "\n")
	prefix := 34
	cells := max(8, t.w-prefix-8)
	var largest int64
	for _, sg := range segs {
		largest = max(largest, sg.TotalSize)
	}
	from, to := t.alloc.segs.Visible()
	for i := from; i < to; i++ {
		sg := segs[i]
		kind := sg.Type
		if sg.Private() {
			kind = "private"
		}
		used := 0.0
		if sg.TotalSize > 0 {
			var act int64
			for _, bl := range sg.Blocks {
				if bl.State.Active() {
					act += bl.Size
				}
			}
			used = 100 * float64(act) / float64(sg.TotalSize)
		}
		head := fmt.Sprintf("0x%012x %9s %-6s", sg.Address, bytesStr(sg.TotalSize), kind)
		n := scaledCells(sg.TotalSize, largest, cells)
		line := widget.Fit(head, prefix) + segCells(th, sg, n) + strings.Repeat(" ", cells-n) + fmt.Sprintf(" %5.1f%%", used)
		if i == t.alloc.segs.Cursor {
			line = th.Sel.Render(widget.Fit(head, prefix)) + line[len(widget.Fit(head, prefix)):]
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	hint := t.alloc.segs.Hint()
	b.WriteString(th.Dim.Render(widget.Fit(fmt.Sprintf("%s · one scale: a full row is the largest segment (%s), each cell %s", hint,
		bytesStr(largest), bytesStr(largest/int64(cells))), t.w)))
	return b.String()
}

func cellRune(th widget.Theme, state int) string {
	if th.NoColor {
		return []string{"█", "▓", "▒", "░"}[state]
	}
	return "█"
}

// segCells renders one segment: each cell takes the state that covers most
// of its bytes.
// Cell states of the segment drawings.
const (
	cellAllocated = iota
	cellRounding
	cellPending
	cellFree
)

// cellSpan is a byte range of a segment (offset from its start) in one
// state; what no span covers is free.
type cellSpan struct {
	off, size int64
	state     int
}

// segCells draws a snapshot segment's blocks in n cells.
func segCells(th widget.Theme, sg *snapshot.Segment, n int) string {
	var spans []cellSpan
	var off int64
	for _, bl := range sg.Blocks {
		switch bl.State {
		case snapshot.StateActiveAllocated:
			req := min(bl.RequestedSize, bl.Size)
			spans = append(spans, cellSpan{off, req, cellAllocated}, cellSpan{off + req, bl.Size - req, cellRounding})
		case snapshot.StateActivePendingFree:
			spans = append(spans, cellSpan{off, bl.Size, cellPending})
		}
		off += bl.Size
	}
	return spanCells(th, sg.TotalSize, spans, n)
}

// spanCells draws a segment of total bytes in n cells, each in the state
// that covers most of its bytes. spans must be sorted by offset.
func spanCells(th widget.Theme, total int64, spans []cellSpan, n int) string {
	if total <= 0 || n <= 0 {
		return strings.Repeat(" ", max(0, n))
	}
	per := float64(total) / float64(n)
	states := make([]int, 0, n)
	si := 0
	for c := 0; c < n; c++ {
		lo, hi := float64(c)*per, float64(c+1)*per
		var cover [4]float64
		cover[cellFree] = hi - lo
		for k := si; k < len(spans); k++ {
			sp := spans[k]
			bs, be := float64(sp.off), float64(sp.off+sp.size)
			if bs >= hi {
				break
			}
			if ov := math.Min(be, hi) - math.Max(bs, lo); ov > 0 {
				cover[sp.state] += ov
				cover[cellFree] -= ov
			}
			if be <= lo && k == si {
				si++
			}
		}
		best := cellFree
		for k := range cover {
			if cover[k] > cover[best] {
				best = k
			}
		}
		states = append(states, best)
	}
	// One styled run per state change: styling cell by cell is slow.
	var b strings.Builder
	for i := 0; i < len(states); {
		j := i
		for j < len(states) && states[j] == states[i] {
			j++
		}
		col := []string{palette.Allocated, palette.Rounding, palette.PendingFree, palette.CachedFree}[states[i]]
		b.WriteString(th.Fg(col).Render(strings.Repeat(cellRune(th, states[i]), j-i)))
		i = j
	}
	return b.String()
}

// scaledCells is how many of n cells a segment of size takes when the
// largest segment takes all n: one scale, so a 2 MiB segment is not drawn
// as wide as a 314 MiB one (at least one cell each).
func scaledCells(size, largest int64, n int) int {
	if largest <= 0 {
		return n
	}
	return max(1, int(math.Round(float64(size)/float64(largest)*float64(n))))
}
