package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"memscope/model"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
	"memscope/tui/widget"
)

func ansiStrip(s string) string { return ansi.Strip(s) }

// snapTab shows the snapshot source selected, through the view of its
// kind, each in its own file with its own state: an allocator snapshot
// (allocView, snapshot_alloc.go), an estimate (estView, snapshot_est.go)
// or a folder of per-rank snapshots (ranksView, ranks.go). The tab holds
// what they share: the source, the device, the search over a tree, and
// the way back to the rank folder a rank was opened from.
type snapTab struct {
	w, h int
	src  *model.Source
	gen  int
	// devIx is the device shown: the shared selection's, which this tab
	// changes by sending selectDeviceMsg.
	devIx int
	alloc allocView
	est   estView
	// ranks shows a rank folder; back is the rank folder's source a rank
	// was opened from (0: none), which esc returns to.
	ranks ranksView
	back  int
	// searching takes the typed query (/); n and N go to the next and
	// previous match afterwards.
	searching bool
	search    textinput.Model
	query     string
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
	t := &snapTab{search: ti}
	t.alloc.reset(false)
	t.est.reset(false)
	return t
}

func (t *snapTab) id() tabID { return tabSnapshot }

func (t *snapTab) name() string { return "Snapshot" }

func (t *snapTab) capturing() bool { return t.searching }

func (t *snapTab) help() []key.Binding {
	switch {
	case t.src != nil && t.src.Kind == model.KindRanks:
		return t.ranks.help()
	case t.src != nil && t.src.Estimate != nil:
		return t.est.help()
	}
	return t.alloc.help(t.back != 0)
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
	// A reload of the same file keeps what the user opened in each tree
	// and where the cursor was (by path); another file starts afresh.
	sameFile := t.src != nil && s != nil && t.src.ID == s.ID
	t.alloc.reset(sameFile)
	t.est.reset(sameFile)
	t.src = s
	if s == nil || s.State != model.Loaded {
		return
	}
	t.gen = s.Generation
	if !sameFile {
		t.devIx = 0
		if s.Estimate != nil {
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

func (t *snapTab) deviceName() string { return deviceName(t.src, t.devIx) }

func (t *snapTab) dev() *snapshot.DeviceStats {
	if t.src == nil || t.src.Analysis == nil || t.devIx >= len(t.src.Analysis.Devices) {
		return nil
	}
	return &t.src.Analysis.Devices[t.devIx]
}

func (t *snapTab) estDev() *estimate.DeviceStats {
	if t.src == nil || t.src.Estimate == nil || t.devIx >= len(t.src.Estimate.Devices) {
		return nil
	}
	return &t.src.Estimate.Devices[t.devIx]
}

// currentTree is the tree shown (the one search works on), nil when the
// view shows none.
func (t *snapTab) currentTree() *widget.Tree {
	if t.src != nil && t.src.Estimate != nil {
		return t.est.tree(t)
	}
	return t.alloc.tree(t)
}

func (t *snapTab) update(c *tabContext, msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case openRankMsg:
		t.openRank(c, m)
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
		case key.Matches(m, widget.KeyBack) && t.alloc.mode != amSegments:
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
	isEstimate := t.src.Estimate != nil
	if m, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case !isEstimate && t.alloc.capturesKey(m):
			return t.alloc.update(c, t, msg)
		case key.Matches(m, skSearch) && t.currentTree() != nil:
			t.searching = true
			t.search.SetValue("") // a new search, as in less and vim
			return t.search.Focus()
		case key.Matches(m, skNext) && t.query != "":
			if tv := t.currentTree(); tv != nil && !tv.Find(t.query, m.String() == "n", false) {
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
		case key.Matches(m, kExport):
			return exportSnapshot(c, t)
		}
	}
	if isEstimate {
		return t.est.update(c, t, msg)
	}
	return t.alloc.update(c, t, msg)
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
		if tv := t.currentTree(); tv != nil && q != "" && !tv.Find(q, true, true) {
			c.setStatus("no match for %q", q)
		}
	}
	return cmd
}

// searchLine is the view line that shows the search being typed, or the
// query n and N go through; "" when there is neither.
func (t *snapTab) searchLine(c *tabContext) string {
	switch {
	case t.searching:
		return t.search.View() + c.th.Dim.Render("  (enter keeps, esc ends; then n/N next/previous)")
	case t.query != "":
		return c.th.Dim.Render(fmt.Sprintf(" · search %q: n/N", t.query))
	}
	return ""
}

func wheel(m tea.MouseWheelMsg) int {
	if m.Button == tea.MouseWheelUp {
		return -3
	}
	return 3
}

func allocTitle(al *snapshot.Allocation) string {
	s := fmt.Sprintf("%s %s · %s", bytesStr(al.Size), al.State, al.Category)
	if al.Shape() != "" {
		s = fmt.Sprintf("%s %s · %s · %s", bytesStr(al.Size), al.Shape(), al.Module(), al.Phase())
	} else if al.Address != 0 {
		s += fmt.Sprintf(" · 0x%x", al.Address)
	}
	if al.FramesFromTrace {
		s += " · stack from the trace's alloc event"
	}
	return s
}

func (t *snapTab) view(c *tabContext) string {
	th := c.th
	switch {
	case t.src == nil:
		return noSnapshotView(c)
	case t.src.State != model.Loaded:
		return loadingView(c, t.src)
	case t.src.Kind == model.KindRanks:
		return t.ranks.view(c, t.w, t.h)
	case t.numDevices() == 0 && t.src.Estimate != nil:
		return th.Bold.Render(srcName(t.src)) + "\n\n" + "This estimate is empty ({}): no device had tensors when the profiler wrote it."
	case t.numDevices() == 0:
		return th.Bold.Render(srcName(t.src)) + "\n\n" + "This snapshot has no segments and no trace entries: nothing was allocated while recording."
	case t.src.Estimate != nil:
		return t.est.view(c, t)
	}
	return t.alloc.view(c, t)
}

func noSnapshotView(c *tabContext) string {
	var b strings.Builder
	b.WriteString(c.th.Title.Render("No snapshot loaded") + "\n\n")
	b.WriteString("Open an allocator snapshot (torch.cuda.memory._dump_snapshot pickle, .pickle.gz, JSON,\n")
	b.WriteString("memory_viz HTML or a torch.save .pt) or a PyTorch-Memory-Profiler peak snapshot:\n")
	b.WriteString("memscope FILE|DIR.\n")
	for _, s := range c.sources {
		if (s.Kind.IsSnapshot() || s.Kind == model.KindUnknown) && s.State == model.Failed {
			b.WriteString("\n" + c.th.Err.Render("✗ "+safe(s.Name())+": ") + safe(s.Err.Error()))
		}
	}
	return b.String()
}
