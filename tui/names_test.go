package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"memscope/model"
)

// TestSourceNamesEscapedInTabs: a snapshot whose file name holds a colour
// sequence (SGR) shows it escaped in the tabs' headers, in a tab's
// loading line and in the status line. The last safety net before the
// terminal (textsafe.Styled) keeps colour sequences, since the program's
// own styling is made of them, so a name placed unescaped would recolour
// the screen.
func TestSourceNamesEscapedInTabs(t *testing.T) {
	b, err := os.ReadFile("../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "snap\x1b[31m.pickle")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	const raw, shown = "\x1b[31m", `snap\x1b[31m.pickle`
	a := newTestApp(t, 160, 40, p)
	for _, tab := range []struct{ key, name string }{{"2", "Snapshot"}, {"3", "Top"}, {"5", "Timeline"}} {
		press(a, tab.key)
		v := a.View().Content
		if strings.Contains(v, raw) {
			t.Errorf("%s tab: the file name's colour sequence reached the terminal raw", tab.name)
		}
		if !strings.Contains(ansi.Strip(v), shown) {
			t.Errorf("%s tab should name the file escaped (%s):\n%s", tab.name, shown, ansi.Strip(v))
		}
	}

	c := &tabContext{th: a.c.th}
	got := loadingView(c, &model.Source{Path: p, State: model.Loading})
	if strings.Contains(got, raw) || !strings.Contains(got, shown) {
		t.Errorf("loading line %q: want the name escaped", got)
	}

	a.setStatus("reloading %s", filepath.Base(p))
	v := a.View().Content
	if strings.Contains(v, raw) || !strings.Contains(ansi.Strip(v), "reloading "+shown) {
		t.Errorf("status line: want the name escaped:\n%s", ansi.Strip(v))
	}
}
