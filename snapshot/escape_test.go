package snapshot_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"memscope/internal/pickletest"
	"memscope/snapshot"
	"memscope/snapshot/report"
)

// TestTextOutputEscapesFileStrings: a frame named with terminal escape
// sequences (set the window title, clear the screen) reaches the text
// report and diff only as visible escapes; JSON stays exact.
func TestTextOutputEscapesFileStrings(t *testing.T) {
	evil := []any{pickletest.FrameDict("/w/\x1b]0;PWNED\x07model.py", 12, "forward\x1b[2J\u009b31m"), pickletest.FrameDict("/w/train.py", 3, "main")}
	data := pickletest.Of(pickletest.Dict{
		{"segments", []any{pickletest.SegmentDict(4096, 2048,
			pickletest.BlockDict(4096, 1024, 1000, "active_allocated", evil),
			pickletest.BlockDict(5120, 1024, 0, "inactive", []any{}))}},
		{"device_traces", []any{[]any{pickletest.Dict{{"action", "alloc"}, {"addr", 4096}, {"size", 1000}, {"stream", 0}, {"frames", evil}}}}},
	})
	s, err := snapshot.Decode(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	a := snapshot.Analyze(s, nil)
	reports := []report.FileReport{{Path: "evil\x1b[31m.pickle", Analysis: a}}
	var text, js bytes.Buffer
	if err := report.WriteText(&text, reports, report.Options{TopN: 5}); err != nil {
		t.Fatal(err)
	}
	d := snapshot.Compare(snapshot.SideOf("a\x07", a), snapshot.SideOf("b", a))
	if err := d.WriteText(&text, 5); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, c := range []string{"\x1b", "\x07", "\u009b"} {
		if strings.Contains(out, c) {
			t.Errorf("text output holds a raw %q", c)
		}
	}
	if !strings.Contains(out, `\x1b]0;PWNED\x07model.py`) {
		t.Errorf("the escaped frame is not shown:\n%s", out)
	}
	if err := report.WriteJSON(&js, reports, report.Options{TopN: 5}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `\u001b]0;PWNED\u0007model.py`) {
		t.Errorf("JSON must keep the exact string (JSON-escaped):\n%s", js.String())
	}
}
