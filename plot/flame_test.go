package plot

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"memscope/internal/units"
	"memscope/snapshot"
)

// svgFrames parses a flame graph and returns each frame's tooltip and rect
// width, failing on invalid XML.
func svgFrames(t *testing.T, data []byte) (titles []string, widths []float64) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	inTitle := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("invalid SVG: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			inTitle = el.Name.Local == "title"
			if el.Name.Local == "rect" && len(titles) > 0 && len(widths) < len(titles) {
				for _, a := range el.Attr {
					if a.Name.Local == "width" {
						var w float64
						if _, err := fmt.Sscan(a.Value, &w); err != nil {
							t.Fatal(err)
						}
						widths = append(widths, w)
					}
				}
			}
		case xml.CharData:
			if inTitle {
				titles = append(titles, string(el))
				inTitle = false
			}
		}
	}
	return titles, widths
}

// TestFlameSVGOfTheRealPeak: the flame graph of gpt_adamw's peak is valid
// SVG whose root is the peak's bytes, each frame with a tooltip, children
// never wider than their caller.
func TestFlameSVGOfTheRealPeak(t *testing.T) {
	s, err := snapshot.Open(context.Background(), "../testdata/snapshots/h100/gpt_adamw.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	a := snapshot.Analyze(s, nil)
	d := &a.Devices[0]
	var buf bytes.Buffer
	if err := FlameSVG(&buf, snapshot.FlameTree(a.PeakLive(d)), "peak"); err != nil {
		t.Fatal(err)
	}
	titles, widths := svgFrames(t, buf.Bytes())
	if len(titles) < 50 || len(titles) != len(widths) {
		t.Fatalf("%d frames, %d rects", len(titles), len(widths))
	}
	if want := units.Bytes(d.Peak.Active) + " (100.0%)"; !strings.Contains(titles[0], want) || widths[0] != flameWidth {
		t.Errorf("root %q (width %v), want %s over the whole width", titles[0], widths[0], want)
	}
	for _, w := range widths {
		if w < flameMinPx || w > flameWidth {
			t.Fatalf("a frame %v px wide", w)
		}
	}
	for _, ti := range titles {
		if strings.Contains(ti, "unwind::unwind") || strings.Contains(ti, "_PyEval_EvalFrameDefault") {
			t.Fatalf("a frame memory_viz hides is drawn: %q", ti)
		}
	}
}

// TestFlameSVGThresholdAndHostileNames: a frame at least flameMinPx wide is
// drawn, a narrower one is not; names from the file are escaped (no raw
// markup, no control characters).
func TestFlameSVGThresholdAndHostileNames(t *testing.T) {
	total := int64(1_000_000)
	// Widths flameMinPx*1.5 and flameMinPx/2 in pixels of a 1200 px root.
	wide := int64(float64(total) * flameMinPx * 1.5 / flameWidth)
	narrow := int64(float64(total) * flameMinPx / 2 / flameWidth)
	mk := func(name string, size int64) snapshot.Allocation {
		return snapshot.Allocation{Size: size, Frames: snapshot.StackOf(snapshot.Frame{Filename: "/u/m.py", Line: 1, Name: name})}
	}
	allocs := []snapshot.Allocation{mk("big", total-wide-narrow), mk("wide</title><script>x()</script>\x1b[31m", wide), mk("narrow", narrow)}
	var buf bytes.Buffer
	if err := FlameSVG(&buf, snapshot.FlameTree(allocs), "t\x07"); err != nil {
		t.Fatal(err)
	}
	titles, _ := svgFrames(t, buf.Bytes())
	joined := strings.Join(titles, "|")
	if !strings.Contains(joined, "wide</title><script>") || strings.Contains(joined, "narrow") {
		t.Errorf("drawn frames: %q", joined)
	}
	if bytes.Contains(buf.Bytes(), []byte("<script>")) || bytes.ContainsAny(buf.Bytes(), "\x1b\x07") {
		t.Error("a name from the file reached the SVG raw")
	}
}

// TestReportDirWritesFlame: report --plot's folder holds flame.svg.
func TestReportDirWritesFlame(t *testing.T) {
	s, err := snapshot.Open(context.Background(), "../testdata/snapshots/h200/train.pickle")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pics, err := ReportDir(dir, ".svg", snapshot.Analyze(s, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "flame.svg"))
	if err != nil {
		t.Fatalf("no flame.svg among %v: %v", pics, err)
	}
	if titles, _ := svgFrames(t, data); len(titles) < 10 {
		t.Errorf("flame.svg has %d frames", len(titles))
	}
}
