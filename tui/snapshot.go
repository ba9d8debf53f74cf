package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"memscope/internal/palette"
	"memscope/model"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
	"memscope/tui/widget"
)

func ansiStrip(s string) string { return ansi.Strip(s) }

type snapMode int

const (
	smCategory snapMode = iota // allocator: category → call site → allocation
	smStack                    // allocator: call-stack tree
	smSegments                 // allocator: segment map
	smMerged                   // estimate: merged modules
	smModules                  // estimate: module tree
	smPhases                   // estimate: phase bars
	smGroups                   // estimate: stack groups
	smVersus                   // estimate vs measured by category
	smRole                     // allocator: role → call site → allocation
	smIcicle                   // allocator: flame graph of the peak's live memory
)

// snapTab shows one allocator snapshot or estimate.
type snapTab struct {
	w, h int
	src  *model.Source
	gen  int
	// devIx is the device shown: the shared selection's, which this tab
	// changes by sending selectDeviceMsg.
	devIx  int
	mode   snapMode
	tree   *widget.Tree
	icy    map[int]*icicle // flame graph per device
	segs   widget.Scroller
	groups widget.Scroller
	// trees caches built trees per (device, mode); kept holds what the
	// trees of the previous load had open, for a reload.
	trees map[[2]int]*widget.Tree
	kept  map[[2]int]widget.TreeKeep
	// versus holds the user's picks of a measured device per estimate
	// device; choosing shows the list of candidates (cands).
	versus   map[versusKey]versusPick
	choosing bool
	cands    widget.Scroller
	// searching takes the typed query (/); n and N go to the next and
	// previous match afterwards.
	searching bool
	search    textinput.Model
	query     string
	// ranks shows a rank folder; back is the rank folder's source a rank
	// was opened from (0: none), which esc returns to.
	ranks ranksView
	back  int
}

var (
	skGroup   = key.NewBinding(key.WithKeys("g"), key.WithHelp("g", "group by category / role / call stack (estimates: merged / tree / phases / stacks)"))
	skIcicle  = key.NewBinding(key.WithKeys("i"), key.WithHelp("i", "flame graph (icicle) of the memory live at the peak"))
	skSegMap  = key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "segment map"))
	skDevice  = key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "next device"))
	skVersus  = key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "estimate vs measured snapshot, by category"))
	skStackUp = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "stack of the selected allocation"))
	skPick    = key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "estimate vs measured: pick the measured snapshot"))
	skSearch  = key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "search the tree (whole tree: opens what matches)"))
	skRecs    = key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "every recommendation in full"))
	skNext    = key.NewBinding(key.WithKeys("n", "N"), key.WithHelp("n/N", "next / previous match"))
)

func newSnapTab() *snapTab {
	ti := textinput.New()
	ti.Prompt = "/"
	ti.Placeholder = "file, function, category…"
	return &snapTab{trees: map[[2]int]*widget.Tree{}, icy: map[int]*icicle{}, search: ti}
}

func (t *snapTab) id() tabID { return tabSnapshot }

func (t *snapTab) name() string { return "Snapshot" }

func (t *snapTab) capturing() bool { return t.searching }

func (t *snapTab) help() []key.Binding {
	if t.src != nil && t.src.Kind == model.KindRanks {
		return t.ranks.help()
	}
	if t.back != 0 {
		return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyExpand, widget.KeyCollapse, widget.KeyExpandAll, skGroup, skIcicle, skSegMap, skDevice, skSearch, skNext, skStackUp, skRecs, kExport, rkIter, rkBack}
	}
	if t.mode == smIcicle {
		return []key.Binding{ikMove, ikZoom, skIcicle, skGroup, skDevice, kExport}
	}
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyExpand, widget.KeyCollapse, widget.KeyExpandAll, skGroup, skIcicle, skSegMap, skDevice, skVersus, skPick, skSearch, skNext, skStackUp, skRecs, kExport}
}

func (t *snapTab) resize(w, h int) { t.w, t.h = w, h }

func (t *snapTab) setSource(c *tabContext, s *model.Source) {
	t.devIx = c.sel.dev
	defer func() {
		if t.devIx != c.sel.dev {
			c.send(selectDeviceMsg{t.devIx})
		}
	}()
	if s != nil && s.Kind == model.KindRanks {
		t.ranks.setSource(s)
		t.src, t.back = s, 0
		return
	}
	if s == t.src && (s == nil || s.Generation == t.gen) {
		return
	}
	if sameData(t.src, t.gen, s) {
		t.src = s
		return
	}
	sameFile := t.src != nil && s != nil && t.src.ID == s.ID
	// A reload of the same file keeps what the user opened in each tree
	// and where the cursor was (by path).
	t.kept = map[[2]int]widget.TreeKeep{}
	if sameFile {
		for k, tv := range t.trees {
			keep := widget.TreeKeep{Expanded: tv.Expanded}
			if r := tv.Cur(); r != nil {
				keep.Cursor = r.Path
			}
			t.kept[k] = keep
		}
	}
	t.src = s
	t.trees = map[[2]int]*widget.Tree{}
	t.icy = map[int]*icicle{}
	t.tree = nil
	if s == nil || s.State != model.Loaded {
		return
	}
	t.gen = s.Generation
	if !sameFile {
		t.devIx = 0
		t.mode = smCategory
		if s.Estimate != nil {
			t.mode = smMerged
			// Open on the largest device, not on a small CPU one.
			for i, d := range s.Estimate.Devices {
				if d.PeakBytes > s.Estimate.Devices[t.devIx].PeakBytes {
					t.devIx = i
				}
			}
		}
	}
	if t.devIx >= t.numDevices() {
		t.devIx = 0
	}
}

func (t *snapTab) numDevices() int { return numDevices(t.src) }

// numDevices counts the devices of a snapshot or estimate.
func numDevices(s *model.Source) int {
	switch {
	case s == nil:
		return 0
	case s.Analysis != nil:
		return len(s.Analysis.Devices)
	case s.Estimate != nil:
		return len(s.Estimate.Devices)
	}
	return 0
}

// deviceName names device i of a snapshot (cuda:N) or estimate.
func deviceName(s *model.Source, i int) string {
	switch {
	case s == nil || i < 0:
	case s.Analysis != nil && i < len(s.Analysis.Devices):
		return fmt.Sprintf("cuda:%d", s.Analysis.Devices[i].Device)
	case s.Estimate != nil && i < len(s.Estimate.Devices):
		return s.Estimate.Devices[i].Device
	}
	return ""
}

func (t *snapTab) dev() *snapshot.DeviceStats {
	if t.src == nil || t.src.Analysis == nil || t.devIx >= len(t.src.Analysis.Devices) {
		return nil
	}
	return &t.src.Analysis.Devices[t.devIx]
}

func (t *snapTab) est() *estimate.DeviceStats {
	if t.src == nil || t.src.Estimate == nil || t.devIx >= len(t.src.Estimate.Devices) {
		return nil
	}
	return &t.src.Estimate.Devices[t.devIx]
}

// currentTree builds (once) the tree for the device and mode.
func (t *snapTab) currentTree(c *tabContext) *widget.Tree {
	k := [2]int{t.devIx, int(t.mode)}
	if tv := t.trees[k]; tv != nil {
		return tv
	}
	var tv *widget.Tree
	if d := t.dev(); d != nil {
		switch t.mode {
		case smCategory:
			tv = widget.NewTree(snapshot.CategoryTree(d.Allocations), d.ActiveBytes)
			tv.Colored = true
		case smStack:
			tv = widget.NewTree(snapshot.StackTree(d.Allocations), d.ActiveBytes)
		case smRole:
			tv = widget.NewTree(snapshot.RoleTree(d.Allocations), d.ActiveBytes)
			tv.Colored = true
		}
	}
	if e := t.est(); e != nil && t.mode == smModules {
		tv = widget.NewTree(e.ModuleTree, max(e.PeakBytes, e.ListedBytes))
	}
	if tv != nil {
		if keep, ok := t.kept[k]; ok {
			tv.Restore(keep)
		}
		t.trees[k] = tv
	}
	return tv
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
	if ic := t.icy[t.devIx]; ic != nil {
		return ic
	}
	ic := newIcicle(snapshot.FlameTree(t.src.Analysis.PeakLive(d)))
	t.icy[t.devIx] = ic
	return ic
}

func (t *snapTab) recLines() int {
	if d := t.dev(); d != nil && t.mode != smSegments {
		return min(len(d.Recommendations), 3) + 1
	}
	return 1
}

func (t *snapTab) update(c *tabContext, msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case openRankMsg:
		t.openRank(c, m.n)
		return nil
	case exportMsg:
		if t.src != nil && t.src.State == model.Loaded && t.src.Kind != model.KindRanks {
			return exportSnapshot(c, t)
		}
		return nil
	}
	if t.src != nil && t.src.Kind == model.KindRanks {
		if t.src.State != model.Loaded {
			return nil
		}
		return t.ranks.update(c, t, msg)
	}
	if t.searching {
		return t.searchKey(c, msg)
	}
	if m, ok := msg.(tea.KeyPressMsg); ok && t.back != 0 {
		switch {
		case key.Matches(m, widget.KeyBack) && t.mode != smSegments:
			c.send(selectSourceMsg{t.back})
			return nil
		case m.String() == "[" || m.String() == "]":
			d := map[string]int{"[": -1, "]": 1}[m.String()]
			t.stepRank(c, d)
			return nil
		}
	}
	if t.src == nil || t.src.State != model.Loaded {
		return nil
	}
	if m, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case t.mode == smIcicle && !key.Matches(m, skGroup) && !key.Matches(m, skDevice) && !key.Matches(m, kExport):
			if key.Matches(m, skIcicle) {
				t.mode = smCategory
				return nil
			}
			if ic := t.currentIcicle(); ic != nil && !ic.update(m) && key.Matches(m, widget.KeyBack) {
				t.mode = smCategory
			}
			return nil
		case key.Matches(m, skIcicle) && t.src.Analysis != nil:
			t.mode = smIcicle
			c.setStatus("flame graph of the memory live at the peak (frames memory_viz hides left out)")
			return nil
		case key.Matches(m, skSearch) && (t.mode == smCategory || t.mode == smRole || t.mode == smStack || t.mode == smModules):
			t.searching = true
			t.search.SetValue("") // a new search, as in less and vim
			return t.search.Focus()
		case key.Matches(m, skNext) && t.query != "":
			if tv := t.currentTree(c); tv != nil && !tv.Find(t.query, m.String() == "n", false) {
				c.setStatus("no match for %q", t.query)
			}
			return nil
		case key.Matches(m, skDevice):
			if n := t.numDevices(); n > 1 {
				t.devIx = (t.devIx + 1) % n
				c.send(selectDeviceMsg{t.devIx})
				c.setStatus("device %s", t.deviceName())
			}
			return nil
		case key.Matches(m, skGroup):
			t.cycleMode(c)
			return nil
		case key.Matches(m, skSegMap) && t.src.Analysis != nil:
			if t.mode == smSegments {
				t.mode = smCategory
			} else {
				t.mode = smSegments
			}
			return nil
		case key.Matches(m, skVersus) && t.src.Estimate != nil:
			if t.mode == smVersus {
				t.mode = smMerged
			} else {
				t.mode = smVersus
				t.choosing = false
			}
			return nil
		case key.Matches(m, kExport):
			return exportSnapshot(c, t)
		case key.Matches(m, skRecs):
			if d := t.dev(); d != nil && len(d.Recommendations) > 0 {
				o := &textOverlay{title: fmt.Sprintf("Recommendations for %s cuda:%d", safe(t.src.Name()), d.Device)}
				for _, r := range d.Recommendations {
					mark := "·"
					switch r.Severity {
					case snapshot.Critical:
						mark = "!!"
					case snapshot.Warning:
						mark = "!"
					}
					o.items = append(o.items, mark+" "+safe(r.Text))
				}
				c.send(openOverlayMsg{o})
			}
			return nil
		case t.mode == smVersus:
			if e := t.est(); e != nil {
				t.versusUpdate(c, m, e)
			}
			return nil
		case key.Matches(m, widget.KeyBack) && t.mode == smSegments:
			t.mode = smCategory
			return nil
		}
	}
	hb := t.headerLines()
	switch t.mode {
	case smSegments:
		if m, ok := msg.(tea.KeyPressMsg); ok {
			widget.ListMove(&t.segs, m)
		}
		if m, ok := msg.(tea.MouseWheelMsg); ok {
			t.segs.Scroll(wheel(m))
		}
	case smMerged, smPhases, smGroups, smVersus:
		if m, ok := msg.(tea.KeyPressMsg); ok {
			if widget.ListMove(&t.groups, m) {
				return nil
			}
			if (key.Matches(m, skStackUp) || key.Matches(m, widget.KeyEnter)) && t.mode == smGroups {
				if e := t.est(); e != nil && t.groups.Cursor < len(e.StackGroups) {
					g := e.StackGroups[t.groups.Cursor]
					// An estimated tensor's stack: the location rules of
					// estimates apply (Module set).
					c.send(openOverlayMsg{newAllocStackOverlay(fmt.Sprintf("%s in %s created here", bytesStr(g.Bytes), plural(g.Tensors, "tensor")),
						&snapshot.Allocation{Frames: g.Frames, Module: "(stack group)", CategoryFrame: -1})})
				}
			}
		}
		if m, ok := msg.(tea.MouseWheelMsg); ok {
			t.groups.Scroll(wheel(m))
		}
		if m, ok := msg.(tea.MouseClickMsg); ok {
			t.groups.Click(m.Y - hb - 1)
		}
	default:
		tv := t.currentTree(c)
		if tv == nil {
			return nil
		}
		if m, ok := msg.(tea.MouseClickMsg); ok {
			tv.Click(m.Y - hb)
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
	}
	return nil
}

// searchKey handles keys while a search is typed: each change jumps to
// the first match from the cursor; enter keeps it, esc ends the search.
func (t *snapTab) searchKey(c *tabContext, msg tea.Msg) tea.Cmd {
	if m, ok := msg.(tea.KeyPressMsg); ok {
		switch m.String() {
		case "esc", "enter":
			t.searching = false
			t.search.Blur()
			if m.String() == "esc" {
				t.query = ""
			}
			return nil
		}
	}
	var cmd tea.Cmd
	t.search, cmd = t.search.Update(msg)
	if q := t.search.Value(); q != t.query {
		t.query = q
		if tv := t.currentTree(c); tv != nil && q != "" && !tv.Find(q, true, true) {
			c.setStatus("no match for %q", q)
		}
	}
	return cmd
}

func wheel(m tea.MouseWheelMsg) int {
	if m.Button == tea.MouseWheelUp {
		return -3
	}
	return 3
}

func allocTitle(al *snapshot.Allocation) string {
	s := fmt.Sprintf("%s %s · %s", bytesStr(al.Size), al.State, al.Category)
	if al.Shape != "" {
		s = fmt.Sprintf("%s %s · %s · %s", bytesStr(al.Size), al.Shape, al.Module, al.Phase)
	} else if al.Address != 0 {
		s += fmt.Sprintf(" · 0x%x", al.Address)
	}
	if al.FramesFromTrace {
		s += " · stack from the trace's alloc event"
	}
	return s
}

func (t *snapTab) cycleMode(c *tabContext) {
	if t.src.Estimate != nil {
		order := []snapMode{smMerged, smModules, smPhases, smGroups}
		i := slices.Index(order, t.mode)
		t.mode = order[(i+1)%len(order)]
		c.setStatus("view: %s", map[snapMode]string{smMerged: "merged modules", smModules: "module tree", smPhases: "phases", smGroups: "stack groups"}[t.mode])
		return
	}
	switch t.mode {
	case smCategory:
		t.mode = smRole
		c.setStatus("grouped by role → call site (what the memory is)")
	case smRole:
		t.mode = smStack
		c.setStatus("grouped by call stack (outermost frame first)")
	default:
		t.mode = smCategory
		c.setStatus("grouped by category → call site")
	}
}

func (t *snapTab) deviceName() string { return deviceName(t.src, t.devIx) }

func (t *snapTab) view(c *tabContext) string {
	th := c.th
	if t.src == nil {
		return noSnapshotView(c)
	}
	if t.src.State != model.Loaded {
		return th.Dim.Render("loading " + t.src.Name() + "…")
	}
	if t.src.Kind == model.KindRanks {
		return t.ranks.view(c, t.w, t.h)
	}
	if t.numDevices() == 0 {
		if t.src.Estimate != nil {
			return th.Bold.Render(t.src.Name()) + "\n\n" + "This estimate is empty ({}): no device had tensors when the profiler wrote it."
		}
		return th.Bold.Render(t.src.Name()) + "\n\n" + "This snapshot has no segments and no trace entries: nothing was allocated while recording."
	}
	if t.src.Estimate != nil {
		return t.estimateView(c)
	}
	d := t.dev()
	var b strings.Builder
	b.WriteString(t.headerView(c, d) + "\n")
	bh := t.bodyHeight()
	switch t.mode {
	case smSegments:
		b.WriteString(widget.Block(t.segmentMap(c, d, t.h-t.headerLines()), t.w, t.h-t.headerLines()))
		return b.String()
	case smIcicle:
		h := t.h - t.headerLines()
		b.WriteString(widget.Block(t.currentIcicle().view(th, t.w, h), t.w, h))
		return b.String()
	default:
		if d.ActiveBlocks == 0 {
			b.WriteString(widget.Block(t.nothingLive(c, d), t.w, bh) + "\n")
			break
		}
		tv := t.currentTree(c)
		b.WriteString(widget.Block(tv.View(th, t.w, bh), t.w, bh) + "\n")
	}
	b.WriteString(t.recView(c, d))
	return b.String()
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

func noSnapshotView(c *tabContext) string {
	var b strings.Builder
	b.WriteString(c.th.Title.Render("No snapshot loaded") + "\n\n")
	b.WriteString("Open an allocator snapshot (torch.cuda.memory._dump_snapshot pickle, .pickle.gz, JSON\n")
	b.WriteString("or memory_viz HTML) or a PyTorch-Memory-Profiler peak snapshot: memscope FILE|DIR.\n")
	for _, s := range c.sources {
		if (s.Kind.IsSnapshot() || s.Kind == model.KindUnknown) && s.State == model.Failed {
			b.WriteString("\n" + c.th.Err.Render("✗ "+safe(s.Name())+": ") + safe(s.Err.Error()))
		}
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
	ratingSt := th.OK
	switch d.Rating {
	case "poor":
		ratingSt = th.Err
	case "good":
		ratingSt = th.Warn
	}
	gw := min(30, max(10, t.w/4))
	// Efficiency is judged at the peak when there is a trace: a snapshot
	// taken at a quiet moment or after empty_cache() says little.
	eff, rating, when := d.EfficiencyPct, d.Rating, "at the snapshot"
	if pk := &d.Peak; pk.FromTrace {
		eff, rating, when = pk.EfficiencyPct, pk.Rating, fmt.Sprintf("at the peak (%.1f%% at the snapshot)", d.EfficiencyPct)
	}
	switch rating {
	case "poor":
		ratingSt = th.Err
	case "good":
		ratingSt = th.Warn
	default:
		ratingSt = th.OK
	}
	l2 := fmt.Sprintf("efficiency %s %s %s %s · %s, %s (%d active) · trace %s",
		widget.HBar(eff/100, gw, ratingSt), fmt.Sprintf("%.1f%%", eff), ratingSt.Render(rating), when,
		plural(d.Segments, "segment"), plural(d.Blocks, "block"), d.ActiveBlocks, plural(d.TraceEntries, "entry"))
	if n := len(d.OOMs); n > 0 {
		l2 += " · " + th.Err.Render(fmt.Sprintf("%s", plural(n, "OOM event")))
	}
	if n := len(t.src.Warnings); n > 0 {
		l2 += " · " + th.Warn.Render(plural(n, "note"))
	}
	modeName := map[snapMode]string{smCategory: "category → call site → allocation", smRole: "role → call site → allocation",
		smStack: "call stack (outermost first)", smSegments: "segment map", smIcicle: "flame graph at the peak"}[t.mode]
	l3 := th.Dim.Render(fmt.Sprintf("view: %s · g regroup · i flame graph · m segment map · enter expand/stack · / search", modeName))
	switch {
	case t.searching:
		l3 = t.search.View() + th.Dim.Render("  (enter keeps, esc ends; then n/N next/previous)")
	case t.query != "":
		l3 += th.Dim.Render(fmt.Sprintf(" · search %q: n/N", t.query))
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
		mark, st := "·", th.Dim
		switch r.Severity {
		case snapshot.Critical:
			mark, st = "!!", th.Err
		case snapshot.Warning:
			mark, st = "! ", th.Warn
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
	t.segs.SetHeight(h - 2)
	t.segs.SetN(len(segs))
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
	from, to := t.segs.Visible()
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
		if i == t.segs.Cursor {
			line = th.Sel.Render(widget.Fit(head, prefix)) + line[len(widget.Fit(head, prefix)):]
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	hint := t.segs.Hint()
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
