package plot

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"

	"memscope/internal/textsafe"
	"memscope/internal/units"
	"memscope/snapshot"
)

// Flame graph geometry, in SVG pixels.
const (
	flameWidth  = 1200.0
	flameRow    = 17.0
	flameTop    = 40.0
	flameMinPx  = 0.3 // narrower frames are not drawn (their bytes stay in the caller)
	flameCharPx = 7.0 // the width of one character of the 12px monospace labels
)

// FlameSVG writes a flame graph of root (a snapshot.FlameTree) as a plain
// SVG: the outermost frame on top, each frame as wide as the bytes live
// beneath it, a <title> tooltip per frame with its full text and bytes.
// It needs no script and no network, so it opens offline in any browser.
func FlameSVG(w io.Writer, root *snapshot.TreeNode, title string) error {
	bw := bufio.NewWriter(w)
	depth := flameDepth(root, 0)
	height := flameTop + float64(depth+1)*flameRow + 10
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="monospace" font-size="12">
<rect x="0" y="0" width="100%%" height="100%%" fill="#ffffff"/>
<text x="10" y="20" font-size="15">%s</text>
<text x="10" y="34" fill="#555555">hover a frame for its full name; frames memory_viz hides are left out</text>
`, flameWidth, height, flameWidth, height, esc(title))
	flameNode(bw, root, root.Bytes, 0, flameWidth, 0)
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

func flameDepth(n *snapshot.TreeNode, d int) int {
	best := d
	for _, c := range n.Children {
		if c.Alloc == nil {
			best = max(best, flameDepth(c, d+1))
		}
	}
	return best
}

func flameNode(w *bufio.Writer, n *snapshot.TreeNode, total int64, x, width float64, depth int) {
	y := flameTop + float64(depth)*flameRow
	text := n.Label
	if n.Frame != nil {
		text = snapshot.SiteText(*n.Frame)
	}
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(n.Bytes) / float64(total)
	}
	tip := fmt.Sprintf("%s\n%s (%.1f%%) in %d allocations", text, units.Bytes(n.Bytes), pct, n.Blocks)
	fmt.Fprintf(w, `<g><title>%s</title><rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" stroke="#ffffff" stroke-width="0.5"/>`,
		esc(tip), x, y, width, flameRow-1, flameColor(n))
	if chars := int((width - 6) / flameCharPx); chars >= 3 {
		label := shortFrame(n)
		if r := []rune(label); len(r) > chars {
			label = string(r[:chars-1]) + "…"
		}
		fmt.Fprintf(w, `<text x="%.2f" y="%.1f">%s</text>`, x+3, y+12, esc(label))
	}
	fmt.Fprintln(w, "</g>")
	var off float64
	for _, c := range n.Children {
		if c.Alloc != nil || n.Bytes <= 0 {
			continue
		}
		cw := width * float64(c.Bytes) / float64(n.Bytes)
		if cw >= flameMinPx {
			flameNode(w, c, total, x+off, cw, depth+1)
		}
		off += cw
	}
}

// shortFrame is the label drawn inside a frame: the file's base name, line
// and function (Python), or the C++ function without its parameters.
func shortFrame(n *snapshot.TreeNode) string {
	if n.Frame == nil {
		return n.Label
	}
	f := *n.Frame
	if f.Line > 0 {
		base := f.Filename
		if i := strings.LastIndexAny(base, `/\`); i >= 0 {
			base = base[i+1:]
		}
		return fmt.Sprintf("%s:%d %s", base, f.Line, f.Name)
	}
	return snapshot.SiteText(snapshot.Frame{Name: f.Name})
}

// flameColor gives a frame a warm colour from its file, so one file's
// frames share a hue (Python frames reddish, C++ ones orange).
func flameColor(n *snapshot.TreeNode) string {
	key := n.Label
	if n.Frame != nil {
		key = n.Frame.Filename
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	v := h.Sum32()
	r, g, b := 205+int(v%50), 80+int((v>>8)%120), 40+int((v>>16)%50)
	if n.Frame != nil && n.Frame.Line == 0 {
		g = min(255, g+40)
	}
	return fmt.Sprintf("#%02x%02x%02x", r, g, b)
}

// esc makes text from a file safe inside SVG: control characters visible,
// then XML-escaped.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(textsafe.Lines(s)))
	return b.String()
}

// FlameFile writes FlameSVG to path.
func FlameFile(path string, root *snapshot.TreeNode, title string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := FlameSVG(f, root, title); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
