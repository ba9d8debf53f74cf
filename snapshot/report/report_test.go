package report

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"memscope/format"
	"memscope/snapshot/estimate"
)

// TestEstimateTextCountsAndColumns: counts agree with their nouns, and the
// top tensors table keeps its columns when a shape is long.
func TestEstimateTextCountsAndColumns(t *testing.T) {
	e, err := estimate.Open(context.Background(), "../../testdata/estimates/SYNTHETIC_peak_snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	// A long shape, as a 4-D activation of a large batch has.
	e.Devices[0].Tensors[0].Shape = "torch.Size([4096, 32768, 8, 128, 2, 2, 2, 2])"
	var b bytes.Buffer
	rep := []FileReport{{Path: "est.json", Kind: format.Estimate, Estimate: estimate.Analyze(e, nil)}}
	if err := WriteText(&b, rep, Options{TopN: 5}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"in 3 tensors", "1 tensor in 1 instance", "2 tensors in 2 instances", "Top 3 tensors"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"1 tensors", "1 instances"} {
		if strings.Contains(out, bad) {
			t.Errorf("report says %q", bad)
		}
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "SHAPE") {
			continue
		}
		col := strings.Index(l, "PHASE")
		for _, row := range lines[i+1 : i+4] {
			if !strings.Contains(row[col:], "_") || row[col-1] != ' ' || row[col-2] != ' ' {
				t.Errorf("PHASE column not at %d:\n%s\n%s", col, l, row)
			}
		}
	}
}

func TestCountWords(t *testing.T) {
	for _, c := range []struct {
		n          int
		word, want string
	}{{1, "entry", "1 entry"}, {2, "entry", "2 entries"}, {0, "OOM event", "0 OOM events"}, {3, "day", "3 days"}, {1, "tensor", "1 tensor"}} {
		if got := count(c.n, c.word); got != c.want {
			t.Errorf("count(%d, %q) = %q, want %q", c.n, c.word, got, c.want)
		}
	}
}
