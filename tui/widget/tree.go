package widget

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"memscope/internal/textsafe"
	"memscope/internal/units"
	"memscope/snapshot"
)

// Tree is an expandable view of a snapshot.TreeNode.
type Tree struct {
	Root     *snapshot.TreeNode
	Total    int64
	Expanded map[string]bool
	Rows     []TreeRow
	List     Scroller
	// Colored draws top-level labels in their category's colour.
	Colored bool
}

// TreeRow is one visible row of a Tree: a node at a depth, and its path
// of labels (what TreeKeep remembers).
type TreeRow struct {
	Node  *snapshot.TreeNode
	Depth int
	Path  string
}

var (
	KeyExpand    = key.NewBinding(key.WithKeys("right", "l", "enter"), key.WithHelp("→/l/enter", "expand"))
	KeyCollapse  = key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/h", "collapse"))
	KeyExpandAll = key.NewBinding(key.WithKeys("*"), key.WithHelp("*", "expand all under cursor"))
)

// NewTree shows root's children, the first one opened; bars are fractions
// of total.
func NewTree(root *snapshot.TreeNode, total int64) *Tree {
	t := &Tree{Root: root, Total: total, Expanded: map[string]bool{}}
	if root != nil && len(root.Children) > 0 {
		t.Expanded["/"+root.Children[0].Label] = true
	}
	t.Flatten()
	return t
}

// Find moves the cursor to the next node (after the cursor when next, else
// before it; wrapping) whose label holds query, case-insensitively,
// opening its ancestors. It searches the whole tree, not only the rows
// shown, and reports whether a node matched.
func (t *Tree) Find(query string, next, includeCursor bool) bool {
	q := strings.ToLower(query)
	if q == "" || t.Root == nil {
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
	walk(t.Root, "", 0)
	if len(all) == 0 {
		return false
	}
	start := 0
	if r := t.Cur(); r != nil {
		for i, e := range all {
			if e.node == r.Node {
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
				t.Expanded[e.path[:j]] = true
			}
		}
		t.Flatten()
		for ri, r := range t.Rows {
			if r.Node == e.node {
				t.List.Cursor = ri
				t.List.Clamp()
			}
		}
		return true
	}
	return false
}

// TreeKeep is what a tree had open, carried over a reload.
type TreeKeep struct {
	Expanded map[string]bool
	Cursor   string
}

// Keep is what the tree has open and where its cursor is, for Restore on
// the tree rebuilt from new data.
func (t *Tree) Keep() TreeKeep {
	keep := TreeKeep{Expanded: t.Expanded}
	if r := t.Cur(); r != nil {
		keep.Cursor = r.Path
	}
	return keep
}

// Restore reopens what keep had open and puts the cursor back on the same
// path (when it still exists).
func (t *Tree) Restore(keep TreeKeep) {
	for p, open := range keep.Expanded {
		t.Expanded[p] = open
	}
	t.Flatten()
	for i, r := range t.Rows {
		if r.Path == keep.Cursor {
			t.List.Cursor = i
			t.List.Clamp()
		}
	}
}

// Flatten rebuilds the visible rows from what is expanded.
func (t *Tree) Flatten() {
	t.Rows = t.Rows[:0]
	if t.Root == nil {
		t.List.SetN(0)
		return
	}
	var walk func(n *snapshot.TreeNode, depth int, path string)
	walk = func(n *snapshot.TreeNode, depth int, path string) {
		for _, c := range n.Children {
			p := path + "/" + c.Label
			t.Rows = append(t.Rows, TreeRow{Node: c, Depth: depth, Path: p})
			if t.Expanded[p] && len(c.Children) > 0 {
				walk(c, depth+1, p)
			}
		}
	}
	walk(t.Root, 0, "")
	t.List.SetN(len(t.Rows))
}

// Cur is the row under the cursor, nil when the tree is empty.
func (t *Tree) Cur() *TreeRow {
	if t.List.Cursor < 0 || t.List.Cursor >= len(t.Rows) {
		return nil
	}
	return &t.Rows[t.List.Cursor]
}

// Update handles tree keys; true if handled.
func (t *Tree) Update(msg tea.Msg) bool {
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		if m.Button == tea.MouseWheelUp {
			t.List.Scroll(-3)
		} else {
			t.List.Scroll(3)
		}
		return true
	case tea.KeyPressMsg:
		if ListMove(&t.List, m) {
			return true
		}
		r := t.Cur()
		if r == nil {
			return false
		}
		switch {
		case key.Matches(m, KeyExpand):
			if len(r.Node.Children) > 0 {
				if t.Expanded[r.Path] && m.String() == "enter" {
					delete(t.Expanded, r.Path)
				} else {
					t.Expanded[r.Path] = true
				}
				t.Flatten()
			}
			return len(r.Node.Children) > 0 || m.String() != "enter"
		case key.Matches(m, KeyCollapse):
			if t.Expanded[r.Path] {
				delete(t.Expanded, r.Path)
			} else if i := strings.LastIndex(r.Path, "/"); i > 0 {
				parent := r.Path[:i]
				delete(t.Expanded, parent)
				t.Flatten()
				for j, row := range t.Rows {
					if row.Path == parent {
						t.List.Cursor = j
						t.List.Clamp()
					}
				}
				return true
			}
			t.Flatten()
			return true
		case key.Matches(m, KeyExpandAll):
			var walk func(n *snapshot.TreeNode, p string, d int)
			walk = func(n *snapshot.TreeNode, p string, d int) {
				if d > 40 {
					return
				}
				t.Expanded[p] = true
				for _, c := range n.Children {
					if c.Alloc == nil {
						walk(c, p+"/"+c.Label, d+1)
					}
				}
			}
			walk(r.Node, r.Path, 0)
			t.Flatten()
			return true
		}
	}
	return false
}

// Click selects a row (and toggles it on a second Click).
func (t *Tree) Click(y int) {
	before := t.List.Cursor
	if t.List.Click(y) && before == t.List.Cursor {
		if r := t.Cur(); r != nil && len(r.Node.Children) > 0 {
			t.Expanded[r.Path] = !t.Expanded[r.Path]
			if !t.Expanded[r.Path] {
				delete(t.Expanded, r.Path)
			}
			t.Flatten()
		}
	}
}

// View draws h rows of the tree, w cells wide, around the cursor.
func (t *Tree) View(th Theme, w, h int) string {
	t.List.SetHeight(h)
	var b strings.Builder
	from, to := t.List.Visible()
	barW := 10
	if w < 70 {
		barW = 5
	}
	numW := 10 + 7 + barW + 9
	for i := from; i < to; i++ {
		r := &t.Rows[i]
		n := r.Node
		mark := "  "
		if len(n.Children) > 0 {
			if t.Expanded[r.Path] {
				mark = "▾ "
			} else {
				mark = "▸ "
			}
		}
		label := textsafe.Safe(n.Label) // call sites and frames come from the file
		st := lipgloss.NewStyle()
		if r.Depth == 0 && t.Colored {
			st = th.Category(n.Label)
			label = st.Render("■ ") + label
		}
		if n.Alloc != nil {
			label = fmt.Sprintf("%s @ 0x%x", n.Alloc.State, n.Alloc.Address)
			if n.Alloc.Shape() != "" {
				label = textsafe.Safe(n.Alloc.Shape() + " · " + n.Alloc.Phase())
			}
			label = th.Dim.Render(label)
		}
		indent := strings.Repeat("  ", min(r.Depth, 12)) + mark
		labelW := max(1, w-numW-1-len([]rune(indent)))
		if r.Depth > 0 && n.Alloc == nil && ansi.StringWidth(label) > labelW {
			label = FitTail(label, labelW) // call sites: keep the file name
		}
		left := indent + label
		frac := 0.0
		if t.Total > 0 {
			frac = float64(n.Bytes) / float64(t.Total)
		}
		count := ""
		if n.Alloc == nil {
			count = fmt.Sprintf("%6d", n.Blocks)
		}
		right := fmt.Sprintf("%10s %6.1f%% %s %s", units.Bytes(n.Bytes), 100*frac, HBar(frac, barW, st), count)
		line := Fit(left, max(1, w-numW-1)) + " " + right
		if i == t.List.Cursor {
			line = th.Sel.Render(Fit(ansi.Strip(line), w))
		}
		b.WriteString(Fit(line, w))
		if i < to-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}
