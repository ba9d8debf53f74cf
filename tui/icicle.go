package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
	"memscope/snapshot"
	"memscope/tui/widget"
)

// icicle is a flame graph drawn top-down (memory_viz's flame graph of the
// live memory): the outermost frame on the first row, each frame below its
// caller as wide as the bytes live beneath it. The cursor is a node; enter
// zooms into it, esc zooms back out.
type icicle struct {
	root *snapshot.TreeNode
	// chain is the path from root to the cursor; zoom is how many of its
	// nodes are above the drawn top (0: the root is drawn).
	chain []*snapshot.TreeNode
	zoom  int
}

var (
	ikMove = key.NewBinding(key.WithKeys("up", "down", "left", "right"), key.WithHelp("↑↓←→", "caller / largest callee / siblings"))
	ikZoom = key.NewBinding(key.WithKeys("enter", "esc"), key.WithHelp("enter/esc", "zoom into the frame / back out"))
)

func newIcicle(root *snapshot.TreeNode) *icicle {
	return &icicle{root: root, chain: []*snapshot.TreeNode{root}}
}

func (ic *icicle) cur() *snapshot.TreeNode { return ic.chain[len(ic.chain)-1] }

// update moves the cursor; it reports whether the key was used (esc at the
// top is left to the tab).
func (ic *icicle) update(msg tea.Msg) bool {
	m, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return false
	}
	n := len(ic.chain)
	switch m.String() {
	case "up", "k":
		if n > 1 {
			ic.chain = ic.chain[:n-1]
			ic.zoom = min(ic.zoom, len(ic.chain)-1)
		}
	case "down", "j":
		if c := ic.cur().Children; len(c) > 0 {
			ic.chain = append(ic.chain, c[0]) // the largest: children are sorted
		}
	case "left", "h", "right", "l":
		if n < 2 {
			return true
		}
		sibs := ic.chain[n-2].Children
		for i, s := range sibs {
			if s != ic.cur() {
				continue
			}
			j := i + 1
			if m.String() == "left" || m.String() == "h" {
				j = i - 1
			}
			if j >= 0 && j < len(sibs) {
				ic.chain[n-1] = sibs[j]
			}
			break
		}
	case "enter":
		ic.zoom = n - 1
	case "esc", "backspace":
		if ic.zoom == 0 {
			return false
		}
		ic.zoom--
	default:
		return false
	}
	return true
}

// frameLabel is a short name for a flame-graph cell: the file's base name,
// line and function for Python, the last two qualified parts of a C++
// function.
func frameLabel(n *snapshot.TreeNode) string {
	if n.Frame == nil {
		return n.Label
	}
	f := *n.Frame
	if strings.HasSuffix(f.Filename, ".py") || (strings.HasPrefix(f.Filename, "<") && strings.HasSuffix(f.Filename, ">")) {
		base := f.Filename
		if i := strings.LastIndexAny(base, `/\`); i >= 0 {
			base = base[i+1:]
		}
		return fmt.Sprintf("%s:%d %s", base, f.Line, f.Name)
	}
	name := snapshot.SiteText(snapshot.Frame{Name: f.Name})
	parts := strings.Split(name, "::")
	if len(parts) > 2 {
		name = strings.Join(parts[len(parts)-2:], "::")
	}
	return name
}

// view draws the icicle in w×h: the rows, then the cursor's frame in full
// and the keys.
func (ic *icicle) view(th widget.Theme, w, h int) string {
	top := ic.chain[ic.zoom]
	rows := max(1, h-2)
	lines := make([]string, 0, h)
	type span struct {
		n      *snapshot.TreeNode
		x0, x1 int
	}
	level := []span{{top, 0, w}}
	onChain := map[*snapshot.TreeNode]bool{}
	for _, n := range ic.chain {
		onChain[n] = true
	}
	for r := 0; r < rows; r++ {
		var b strings.Builder
		x := 0
		var next []span
		for k, s := range level {
			if s.x0 > x {
				b.WriteString(strings.Repeat(" ", s.x0-x))
			}
			width := s.x1 - s.x0
			label := safe(frameLabel(s.n))
			cell := "▏" + widget.Fit(label, width-1)
			if width == 1 {
				cell = "▏"
			}
			st := th.Fg(palette.Band(k + r))
			switch {
			case s.n == ic.cur():
				st = th.Sel
			case onChain[s.n]:
				st = th.Bold
			}
			b.WriteString(st.Render(cell))
			x = s.x1
			// Children share the span by bytes; a child under one column
			// is not drawn (its bytes still count in its parent).
			acc := int64(0)
			for _, c := range s.n.Children {
				if c.Alloc != nil {
					continue
				}
				cx0 := s.x0 + int(int64(width)*acc/max(1, s.n.Bytes))
				acc += c.Bytes
				cx1 := s.x0 + int(int64(width)*acc/max(1, s.n.Bytes))
				if cx1 > cx0 {
					next = append(next, span{c, cx0, cx1})
				}
			}
		}
		lines = append(lines, widget.Fit(b.String(), w))
		if len(next) == 0 {
			break
		}
		level = next
	}
	for len(lines) < rows {
		lines = append(lines, "")
	}
	c := ic.cur()
	pct := 0.0
	if ic.root.Bytes > 0 {
		pct = 100 * float64(c.Bytes) / float64(ic.root.Bytes)
	}
	what := c.Label
	if c.Frame != nil {
		what = snapshot.SiteText(*c.Frame)
	}
	lines = append(lines, widget.FitTail(fmt.Sprintf("%s · %s (%.1f%%) in %s", safe(what), bytesStr(c.Bytes), pct, plural(c.Blocks, "allocation")), w))
	hint := "↑ caller · ↓ largest callee · ←/→ siblings · enter zoom in"
	if ic.zoom > 0 {
		hint += " · esc zoom out"
	}
	lines = append(lines, th.Dim.Render(widget.Fit(hint+" · i tree view", w)))
	return lipgloss.JoinVertical(lipgloss.Left, lines...)
}
