package tui

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/model"
	"memscope/snapshot"
	"memscope/tui/widget"
)

var (
	rkIter  = key.NewBinding(key.WithKeys("[", "]"), key.WithHelp("[ ]", "previous / next iteration (in a rank: the same rank's)"))
	rkSort  = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort by rank / peak"))
	rkBack  = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back to the ranks"))
	rkEnter = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open the rank's snapshot (esc comes back)"))
)

// ranksView is the Snapshot tab for a folder of per-rank snapshots: one
// row per rank of an iteration, with the imbalance across them.
type ranksView struct {
	src    *model.Source
	iters  []snapshot.IterationKey
	iter   int
	rows   []snapshot.RankSummary // the iteration's, in display order
	byPeak bool
	list   widget.Scroller
}

func (v *ranksView) setSource(s *model.Source) {
	same := v.src != nil && s != nil && v.src.ID == s.ID
	v.src = s
	if s == nil || s.State != model.Loaded {
		return
	}
	old := snapshot.IterationKey{Step: -2}
	if same && v.iter < len(v.iters) {
		old = v.iters[v.iter]
	}
	v.iters = snapshot.Iterations(s.Ranks)
	v.iter = max(0, len(v.iters)-1) // the latest dump first
	if i := slices.Index(v.iters, old); i >= 0 {
		v.iter = i
	}
	v.fill()
}

func (v *ranksView) fill() {
	v.rows = nil
	if v.iter < len(v.iters) {
		v.rows = v.iters[v.iter].Of(v.src.Ranks)
	}
	if v.byPeak {
		slices.SortStableFunc(v.rows, func(a, b snapshot.RankSummary) int { return cmp.Compare(b.Peak, a.Peak) })
	}
	v.list.SetN(len(v.rows))
}

func (v *ranksView) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyHome, widget.KeyEnd, rkEnter, rkIter, rkSort}
}

func iterName(k snapshot.IterationKey) string {
	s := "no step in the paths"
	if k.Step >= 0 {
		s = fmt.Sprintf("step %d", k.Step)
	}
	if k.Exit {
		s += " (OOM exit)"
	}
	return s
}

func (v *ranksView) update(c *tabContext, t *snapTab, msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		v.list.Scroll(wheel(m))
	case tea.KeyPressMsg:
		switch m.String() {
		case "[", "]":
			d := 1
			if m.String() == "[" {
				d = -1
			}
			if n := v.iter + d; n >= 0 && n < len(v.iters) {
				v.iter = n
				v.fill()
				c.setStatus("%s", iterName(v.iters[v.iter]))
			} else {
				c.setStatus("no more iterations that way")
			}
		case "s":
			v.byPeak = !v.byPeak
			v.fill()
		case "enter":
			if v.list.Cursor < len(v.rows) {
				r := v.rows[v.list.Cursor]
				if r.Err != nil {
					c.setStatus("rank %d could not be read: %v", r.Label.Rank, r.Err)
					return nil
				}
				t.drill(c, v.src.ID, r.Path)
			}
		default:
			widget.ListMove(&v.list, m)
		}
	}
	return nil
}

// drill opens one rank's snapshot on the Snapshot tab; esc comes back to
// the rank set.
func (t *snapTab) drill(c *tabContext, rankSet int, path string) {
	t.back = rankSet
	c.send(openSnapshotMsg{path})
	c.setStatus("%s · esc goes back to the ranks", snapshot.ParseLabel(path))
}

// stepRank opens the same rank of the previous or next iteration.
func (t *snapTab) stepRank(c *tabContext, d int) bool {
	rs := c.source(t.back)
	if rs == nil || t.src == nil || len(t.src.Paths) == 0 {
		return false
	}
	cur := snapshot.ParseLabel(t.src.Paths[0])
	iters := snapshot.Iterations(rs.Ranks)
	i := slices.Index(iters, snapshot.IterationKey{Step: cur.Step, Exit: cur.Exit})
	for j := i + d; i >= 0 && j >= 0 && j < len(iters); j += d {
		for _, r := range iters[j].Of(rs.Ranks) {
			if r.Label.Rank == cur.Rank && r.Err == nil {
				t.drill(c, rs.ID, r.Path)
				return true
			}
		}
	}
	c.setStatus("rank %d has no snapshot in another iteration that way", cur.Rank)
	return true
}

func (v *ranksView) view(c *tabContext, w, h int) string {
	th := c.th
	var b strings.Builder
	total := len(v.src.Ranks)
	head := fmt.Sprintf("%s · %d snapshots", safe(v.src.Name()), total)
	if len(v.iters) > 0 {
		head += fmt.Sprintf(" · %s (%d of %d, [ ] to step)", iterName(v.iters[v.iter]), v.iter+1, len(v.iters))
	}
	b.WriteString(widget.Fit(th.Bold.Render(head), w) + "\n")
	im := snapshot.ImbalanceOf(v.rows)
	var heavy snapshot.RankSummary
	if im.Heaviest >= 0 {
		heavy = v.rows[im.Heaviest]
	}
	line := fmt.Sprintf("imbalance %.2fx (max/mean)", im.MaxOverMean)
	if im.Heaviest >= 0 {
		line += fmt.Sprintf(" · heaviest rank %d", heavy.Label.Rank)
	}
	if n := len(v.rows) - im.Ranks; n > 0 {
		line += th.Warn.Render(fmt.Sprintf(" · %d unreadable", n))
	}
	line += fmt.Sprintf(" · peak mean %s, max %s over %d ranks", bytesStr(im.Mean), bytesStr(im.Max), im.Ranks)
	b.WriteString(widget.Fit(line, w) + "\n")
	const numW = 10
	// Narrow terminals drop the category's bytes before the bar.
	wide := w >= 100
	catW := 18
	fixed := 6 + 1 + numW + 1 + 1 + numW + 1 + 6 + 2 + catW + 1 + 5
	if wide {
		fixed += numW + 1
	}
	barW := max(0, min(30, w-fixed-1))
	sortMark := map[bool]string{false: "RANK▼", true: "RANK"}[v.byPeak]
	peakHead := map[bool]string{false: "PEAK", true: "PEAK▼"}[v.byPeak]
	catBytes := func(s string) string {
		if wide {
			return fmt.Sprintf(" %*s", numW, s)
		}
		return ""
	}
	b.WriteString(th.Header.Render(widget.Fit(fmt.Sprintf("%6s %*s %-*s %*s %6s  %-*s%s %5s", sortMark, numW, peakHead, barW, "",
		numW, "RESERVED", "EFF", catW, map[bool]string{false: "TOP CATEGORY", true: "TOP CATEGORY AT PEAK"}[wide], catBytes(""), "OOMS"), w)) + "\n")
	v.list.SetHeight(h - 4)
	v.list.SetN(len(v.rows))
	from, to := v.list.Visible()
	for i := from; i < to; i++ {
		r := &v.rows[i]
		var row string
		if r.Err != nil {
			// The row names the file: the error need not repeat its path.
			msg := strings.TrimPrefix(r.Err.Error(), r.Path+": ")
			row = fmt.Sprintf("%5d  %s", r.Label.Rank, th.Err.Render("✗ "+safe(msg)))
		} else {
			mark := " "
			if im.Heaviest >= 0 && r.Path == heavy.Path {
				mark = "▲"
			}
			frac := 0.0
			if im.Max > 0 {
				frac = float64(r.Peak) / float64(im.Max)
			}
			oom := fmt.Sprint(r.OOMs)
			if r.OOMs > 0 {
				oom = th.Err.Render(oom)
			}
			row = fmt.Sprintf("%5d%s %*s %s %*s %6s  %s%s %5s", r.Label.Rank, mark, numW, bytesStr(r.Peak),
				widget.HBar(frac, barW, th.Accent), numW, bytesStr(r.Reserved), fmt.Sprintf("%.1f%%", r.EfficiencyPct),
				th.Category(r.TopCategory).Render(widget.Fit(safe(r.TopCategory), catW)), catBytes(bytesStr(r.TopCategoryBytes)), oom)
		}
		if i == v.list.Cursor {
			row = th.Sel.Render(widget.Fit(ansiStrip(row), w))
		}
		b.WriteString(widget.Fit(row, w) + "\n")
	}
	if len(v.rows) > 0 && v.list.Cursor < len(v.rows) {
		hint := safe(filepath.Base(v.rows[v.list.Cursor].Path)) + " · enter opens it"
		if h := v.list.Hint(); h != "" {
			hint = h + " · " + hint
		}
		b.WriteString(th.Dim.Render(widget.Fit(safe(hint), w)))
	}
	return b.String()
}

// rankSetHint is what the allocation views show for a rank folder: they
// need one rank's snapshot.
func rankSetHint(c *tabContext, s *model.Source) string {
	return c.th.Bold.Render(safe(s.Name())) + "\n\n" + fmt.Sprintf("A folder of %d per-rank snapshots. Open one on the Snapshot tab (2, then enter on a rank)\nto see its allocations and timeline here.", len(s.Ranks))
}

// openRank opens rank n of the rank folder shown (or of the one the
// snapshot shown was opened from), in the iteration shown (:rank N).
func (t *snapTab) openRank(c *tabContext, m openRankMsg) {
	n := m.n
	rs := t.src
	step, exit := -1, false
	if rs != nil && rs.Kind != model.KindRanks && t.back != 0 && len(rs.Paths) > 0 {
		l := snapshot.ParseLabel(rs.Paths[0])
		step, exit = l.Step, l.Exit
		rs = c.source(t.back)
	} else if rs != nil && rs.Kind == model.KindRanks && t.ranks.iter < len(t.ranks.iters) {
		k := t.ranks.iters[t.ranks.iter]
		step, exit = k.Step, k.Exit
	}
	if rs == nil || rs.Kind != model.KindRanks {
		if m.orElse != nil {
			c.send(toTab{*m.orElse, openRankMsg{n: n}})
			return
		}
		c.setStatus("no rank folder or traces open: memscope DIR opens a folder of per-rank snapshots")
		return
	}
	for _, r := range (snapshot.IterationKey{Step: step, Exit: exit}).Of(rs.Ranks) {
		if r.Label.Rank == n {
			if r.Err != nil {
				c.setStatus("rank %d could not be read: %s", n, safe(r.Err.Error()))
				return
			}
			c.send(switchTabMsg{tabSnapshot})
			t.drill(c, rs.ID, r.Path)
			return
		}
	}
	c.setStatus("no rank %d in this iteration", n)
}

// rankNumbers lists the ranks of the rank folder shown or of the one the
// snapshot shown was opened from; nil when there is none.
func (t *snapTab) rankNumbers(c *tabContext) []int {
	var out []int
	switch {
	case t.src != nil && t.src.Kind == model.KindRanks:
		for _, r := range t.ranks.rows {
			out = append(out, r.Label.Rank)
		}
	case c.source(t.back) != nil:
		for _, r := range c.source(t.back).Ranks {
			out = append(out, r.Label.Rank)
		}
	}
	return out
}
