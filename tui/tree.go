package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"memscope/snapshot"
)

// treeView is an expandable view of a snapshot.TreeNode.
type treeView struct {
	root     *snapshot.TreeNode
	total    int64
	expanded map[string]bool
	rows     []treeRow
	list     scroller
	// colored draws top-level labels in their category's colour.
	colored bool
}

type treeRow struct {
	node  *snapshot.TreeNode
	depth int
	path  string
}

var (
	kExpand   = key.NewBinding(key.WithKeys("right", "l", "enter"), key.WithHelp("→/l/enter", "expand"))
	kCollapse = key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/h", "collapse"))
	kExpAll   = key.NewBinding(key.WithKeys("*"), key.WithHelp("*", "expand all under cursor"))
)

func newTreeView(root *snapshot.TreeNode, total int64) *treeView {
	t := &treeView{root: root, total: total, expanded: map[string]bool{}}
	if root != nil && len(root.Children) > 0 {
		t.expanded["/"+root.Children[0].Label] = true
	}
	t.flatten()
	return t
}

// find moves the cursor to the next node (after the cursor when next, else
// before it; wrapping) whose label holds query, case-insensitively,
// opening its ancestors. It searches the whole tree, not only the rows
// shown, and reports whether a node matched.
func (t *treeView) find(query string, next, includeCursor bool) bool {
	q := strings.ToLower(query)
	if q == "" || t.root == nil {
		return false
	}
	// Every node in display order, by pointer: sibling leaves share a
	// label, so a path does not name one node.
	type entry struct {
		node *snapshot.TreeNode
		path string
	}
	var all []entry
	var walk func(n *snapshot.TreeNode, path string, depth int)
	walk = func(n *snapshot.TreeNode, path string, depth int) {
		if depth > 64 {
			return
		}
		for _, c := range n.Children {
			p := path + "/" + c.Label
			all = append(all, entry{c, p})
			walk(c, p, depth+1)
		}
	}
	walk(t.root, "", 0)
	if len(all) == 0 {
		return false
	}
	start := 0
	if r := t.cur(); r != nil {
		for i, e := range all {
			if e.node == r.node {
				start = i
				break
			}
		}
	}
	step := 1
	if !next {
		step = len(all) - 1
	}
	first := start
	if !includeCursor {
		first = (start + step) % len(all)
	}
	for k, i := 0, first; k < len(all); k, i = k+1, (i+step)%len(all) {
		e := all[i]
		if !strings.Contains(strings.ToLower(e.node.Label), q) {
			continue
		}
		for j := 1; j < len(e.path); j++ {
			if e.path[j] == '/' {
				t.expanded[e.path[:j]] = true
			}
		}
		t.flatten()
		for ri, r := range t.rows {
			if r.node == e.node {
				t.list.cursor = ri
				t.list.clamp()
			}
		}
		return true
	}
	return false
}

// treeKeep is what a tree had open, carried over a reload.
type treeKeep struct {
	expanded map[string]bool
	cursor   string
}

// restore reopens what keep had open and puts the cursor back on the same
// path (when it still exists).
func (t *treeView) restore(keep treeKeep) {
	for p, open := range keep.expanded {
		t.expanded[p] = open
	}
	t.flatten()
	for i, r := range t.rows {
		if r.path == keep.cursor {
			t.list.cursor = i
			t.list.clamp()
		}
	}
}

func (t *treeView) flatten() {
	t.rows = t.rows[:0]
	if t.root == nil {
		t.list.setN(0)
		return
	}
	var walk func(n *snapshot.TreeNode, depth int, path string)
	walk = func(n *snapshot.TreeNode, depth int, path string) {
		for _, c := range n.Children {
			p := path + "/" + c.Label
			t.rows = append(t.rows, treeRow{node: c, depth: depth, path: p})
			if t.expanded[p] && len(c.Children) > 0 {
				walk(c, depth+1, p)
			}
		}
	}
	walk(t.root, 0, "")
	t.list.setN(len(t.rows))
}

func (t *treeView) cur() *treeRow {
	if t.list.cursor < 0 || t.list.cursor >= len(t.rows) {
		return nil
	}
	return &t.rows[t.list.cursor]
}

// update handles tree keys; true if handled.
func (t *treeView) update(msg tea.Msg) bool {
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		if m.Button == tea.MouseWheelUp {
			t.list.scroll(-3)
		} else {
			t.list.scroll(3)
		}
		return true
	case tea.KeyPressMsg:
		if listMove(&t.list, m) {
			return true
		}
		r := t.cur()
		if r == nil {
			return false
		}
		switch {
		case key.Matches(m, kExpand):
			if len(r.node.Children) > 0 {
				if t.expanded[r.path] && m.String() == "enter" {
					delete(t.expanded, r.path)
				} else {
					t.expanded[r.path] = true
				}
				t.flatten()
			}
			return len(r.node.Children) > 0 || m.String() != "enter"
		case key.Matches(m, kCollapse):
			if t.expanded[r.path] {
				delete(t.expanded, r.path)
			} else if i := strings.LastIndex(r.path, "/"); i > 0 {
				parent := r.path[:i]
				delete(t.expanded, parent)
				t.flatten()
				for j, row := range t.rows {
					if row.path == parent {
						t.list.cursor = j
						t.list.clamp()
					}
				}
				return true
			}
			t.flatten()
			return true
		case key.Matches(m, kExpAll):
			var walk func(n *snapshot.TreeNode, p string, d int)
			walk = func(n *snapshot.TreeNode, p string, d int) {
				if d > 40 {
					return
				}
				t.expanded[p] = true
				for _, c := range n.Children {
					if c.Alloc == nil {
						walk(c, p+"/"+c.Label, d+1)
					}
				}
			}
			walk(r.node, r.path, 0)
			t.flatten()
			return true
		}
	}
	return false
}

// click selects a row (and toggles it on a second click).
func (t *treeView) click(y int) {
	before := t.list.cursor
	if t.list.click(y) && before == t.list.cursor {
		if r := t.cur(); r != nil && len(r.node.Children) > 0 {
			t.expanded[r.path] = !t.expanded[r.path]
			if !t.expanded[r.path] {
				delete(t.expanded, r.path)
			}
			t.flatten()
		}
	}
}

func (t *treeView) view(th theme, w, h int) string {
	t.list.setHeight(h)
	var b strings.Builder
	from, to := t.list.visible()
	barW := 10
	if w < 70 {
		barW = 5
	}
	numW := 10 + 7 + barW + 9
	for i := from; i < to; i++ {
		r := &t.rows[i]
		n := r.node
		mark := "  "
		if len(n.Children) > 0 {
			if t.expanded[r.path] {
				mark = "▾ "
			} else {
				mark = "▸ "
			}
		}
		label := safe(n.Label) // call sites and frames come from the file
		st := lipgloss.NewStyle()
		if r.depth == 0 && t.colored {
			st = th.category(n.Label)
			label = st.Render("■ ") + label
		}
		if n.Alloc != nil {
			label = fmt.Sprintf("%s @ 0x%x", n.Alloc.State, n.Alloc.Address)
			if n.Alloc.Shape != "" {
				label = safe(n.Alloc.Shape + " · " + n.Alloc.Phase)
			}
			label = th.dim.Render(label)
		}
		indent := strings.Repeat("  ", min(r.depth, 12)) + mark
		labelW := max(1, w-numW-1-len([]rune(indent)))
		if r.depth > 0 && n.Alloc == nil && ansi.StringWidth(label) > labelW {
			label = fitTail(label, labelW) // call sites: keep the file name
		}
		left := indent + label
		frac := 0.0
		if t.total > 0 {
			frac = float64(n.Bytes) / float64(t.total)
		}
		count := ""
		if n.Alloc == nil {
			count = fmt.Sprintf("%6d", n.Blocks)
		}
		right := fmt.Sprintf("%10s %6.1f%% %s %s", bytesStr(n.Bytes), 100*frac, hbar(frac, barW, st), count)
		line := fit(left, max(1, w-numW-1)) + " " + right
		if i == t.list.cursor {
			line = th.sel.Render(fit(ansiStrip(line), w))
		}
		b.WriteString(fit(line, w))
		if i < to-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}
