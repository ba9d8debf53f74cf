package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/model"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
	"memscope/tui/widget"
)

// diffOverlay shows `memscope diff` of two marked snapshots as a table.
type diffOverlay struct {
	d    *snapshot.Diff
	list widget.Scroller
}

func sideOf(s *model.Source) snapshot.Side {
	if s.Estimate != nil {
		return estimate.SideOf(s.Name(), s.Estimate)
	}
	return snapshot.SideOf(s.Name(), s.Analysis)
}

func newDiffOverlay(a, b *model.Source) *diffOverlay {
	return &diffOverlay{d: snapshot.Compare(sideOf(a), sideOf(b))}
}

func (o *diffOverlay) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyBack}
}

func (o *diffOverlay) update(c *tabContext, msg tea.Msg) (bool, tea.Cmd) {
	return scrollOverlay(&o.list, msg), nil
}

func (o *diffOverlay) lines(c *tabContext, w int) []string {
	th := c.th
	d := o.d
	// Names (call sites: paths from the file) are cut from the left, so
	// "file:line function" stays whole.
	nameRoom := max(8, w-3*15-2)
	row := func(name string, r snapshot.DiffRow, bytes bool) string {
		delta := r.Delta()
		st := th.Dim
		switch {
		case !r.Both():
		case delta > 0:
			st = th.Err
		case delta < 0:
			st = th.OK
		}
		cell := func(v int64, ok bool) string {
			switch {
			case !ok:
				return "n/a"
			case bytes:
				return bytesStr(v)
			}
			return fmt.Sprint(v)
		}
		d := "n/a"
		if r.Both() {
			d = fmt.Sprintf("%+d", delta)
			if bytes {
				d = signed(delta)
			}
		}
		return fmt.Sprintf("%14s %14s %s  %s", cell(r.A, !r.OnlyB), cell(r.B, !r.OnlyA), st.Render(fmt.Sprintf("%14s", d)), name)
	}
	var out []string
	out = append(out, th.Header.Render(widget.Fit(fmt.Sprintf("%14s %14s %14s  %s", "A", "B", "B − A", "TOTAL"), w)))
	for _, r := range d.Totals {
		out = append(out, row(strings.TrimSuffix(r.Name, "_bytes"), r, strings.HasSuffix(r.Name, "_bytes")))
	}
	tables := func(when string, cats, sites []snapshot.DiffRow) {
		out = append(out, "", th.Header.Render(widget.Fit(fmt.Sprintf("%14s %14s %14s  %s", "A", "B", "B − A", "CATEGORY "+when), w)))
		for _, r := range cats {
			out = append(out, row(th.Category(r.Name).Render(safe(r.Name)), r, true))
		}
		out = append(out, "", th.Header.Render(widget.Fit(fmt.Sprintf("%14s %14s %14s  %s", "A", "B", "B − A", "CALL SITE "+when+" (largest changes first)"), w)))
		for _, r := range sites {
			out = append(out, row(strings.TrimRight(widget.FitTail(safe(r.Name), nameRoom), " "), r, true))
		}
	}
	// The peak first: two runs often end alike and differ on the way.
	tables("AT THE PEAK", d.PeakCategories, d.PeakSites)
	tables("AT THE END", d.Categories, d.Sites)
	return out
}

func (o *diffOverlay) view(c *tabContext, w, h int) string {
	th := c.th
	lines := o.lines(c, w)
	o.list.SetHeight(h - 3)
	o.list.SetN(len(lines))
	o.list.Cursor = o.list.Offset // scroll view: the cursor follows the window
	var b strings.Builder
	// Both names always show: each gets half the room, cut in the middle.
	room := max(8, (w-len("Diff · A:  · B: "))/2)
	b.WriteString(widget.Fit(th.Bold.Render("Diff")+fmt.Sprintf(" · A: %s · B: %s", strings.TrimRight(widget.FitMiddle(safe(o.d.A), room), " "),
		strings.TrimRight(widget.FitMiddle(safe(o.d.B), room), " ")), w) + "\n")
	b.WriteString(th.Dim.Render(widget.Fit("red: more memory in B · green: less · esc close · same as memscope diff A B", w)) + "\n")
	from, to := o.list.Visible()
	for i := from; i < to; i++ {
		b.WriteString(widget.Fit(lines[i], w) + "\n")
	}
	b.WriteString(th.Dim.Render(o.list.Hint()))
	return b.String()
}
