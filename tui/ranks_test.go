package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"memscope/model"
)

// rankFolder lays out iteration_{5,10}/rankR_memory_snapshot.pickle from
// four real snapshots (different peaks), and a broken rank 4 in step 10.
func rankFolder(t *testing.T) string {
	t.Helper()
	srcs := []string{"../testdata/snapshots/h200/train.pickle", "../testdata/snapshots/silmont2000_assignment2-systems__mem_snapshot.pickle",
		"../testdata/snapshots/h200/record_stream.pickle", "../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle"}
	dir := filepath.Join(t.TempDir(), "run")
	for _, it := range []int{5, 10} {
		for r, src := range srcs {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, fmt.Sprintf("iteration_%d", it), fmt.Sprintf("rank%d_memory_snapshot.pickle", r))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "iteration_10", "rank4_memory_snapshot.pickle"), []byte("\x80\x04cut"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRankOverview: a rank folder opens as one table on the Snapshot tab
// with each rank's figures; [ ] step iterations, s sorts by peak, enter
// opens a rank, [ ] there step the same rank, esc comes back.
func TestRankOverview(t *testing.T) {
	dir := rankFolder(t)
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1], dir)
		press(a, "2")
		src := a.source(a.c.snapSel)
		if src == nil || src.Kind != model.KindRanks {
			t.Fatalf("snapshot tab shows %v", src)
		}
		s := screen(a)
		checkScreen(t, s, size[0], size[1])
		golden(t, fmt.Sprintf("ranks_%dx%d", size[0], size[1]), s)
		if !strings.Contains(s, "step 10 (2 of 2") || !strings.Contains(s, "1 unreadable") || !strings.Contains(s, "✗") {
			t.Errorf("the latest iteration first, with its broken rank:\n%s", s)
		}
		for _, r := range a.snap.ranks.rows {
			if r.Err == nil && !strings.Contains(s, bytesStr(r.Peak)) {
				t.Errorf("rank %d's peak %s not shown", r.Label.Rank, bytesStr(r.Peak))
			}
		}
		press(a, "[")
		if s := screen(a); !strings.Contains(s, "step 5 (1 of 2") || strings.Contains(s, "unreadable") {
			t.Errorf("[ goes to step 5:\n%s", s)
		}
		press(a, "s")
		rows := a.snap.ranks.rows
		for i := 1; i < len(rows); i++ {
			if rows[i].Peak > rows[i-1].Peak {
				t.Errorf("s sorts by peak: %d after %d", rows[i].Peak, rows[i-1].Peak)
			}
		}
		want := rows[1]
		press(a, "home", "down", "enter")
		a.ws.Wait()
		a.refresh()
		cur := a.source(a.c.snapSel)
		if cur == nil || cur.Kind != model.KindSnapshot || cur.Paths[0] != want.Path {
			t.Fatalf("enter opened %v, want %s", cur, want.Path)
		}
		if s := screen(a); !strings.Contains(s, fmt.Sprintf("rank %d · step 5", want.Label.Rank)) {
			t.Errorf("the rank's snapshot:\n%s", s)
		}
		press(a, "]")
		a.ws.Wait()
		a.refresh()
		if cur := a.source(a.c.snapSel); !strings.Contains(cur.Paths[0], "iteration_10") || !strings.HasSuffix(cur.Paths[0], filepath.Base(want.Path)) {
			t.Errorf("] opened %s, want the same rank in step 10", cur.Paths[0])
		}
		press(a, "esc")
		if src := a.source(a.c.snapSel); src.Kind != model.KindRanks {
			t.Errorf("esc went to %v, want the ranks", src)
		}
		press(a, "3")
		if s := screen(a); !strings.Contains(s, "per-rank snapshots") {
			t.Errorf("Top on a rank folder:\n%s", s)
		}
	}
}
