package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"memscope/format"
	"memscope/snapshot"
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

// TestPeakTopN: the peak's live list in JSON and text holds the TopN
// largest allocations live at the peak, none for 0, all for a negative
// TopN, as the live set (PeakLive) orders them; the text counts the rest.
func TestPeakTopN(t *testing.T) {
	s, err := snapshot.Open(context.Background(), "../../testdata/snapshots/h100/gpt_adamw.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	a := snapshot.Analyze(s, nil)
	live := a.PeakLive(&a.Devices[0])
	rep := []FileReport{{Path: "gpt.pickle", Kind: format.Snapshot, Analysis: a}}
	for _, n := range []int{0, 1, 7, len(live), len(live) + 3, -1} {
		var b bytes.Buffer
		if err := WriteJSON(&b, rep, Options{TopN: n}); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Files []struct {
				Devices []struct {
					Peak struct {
						Live []struct{ Size int64 }
					}
				}
			}
		}
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		want := len(live)
		if n >= 0 {
			want = min(n, len(live))
		}
		rows := got.Files[0].Devices[0].Peak.Live
		if len(rows) != want {
			t.Fatalf("top %d: %d live rows, want %d", n, len(rows), want)
		}
		for k, r := range rows {
			if r.Size != live[k].Size {
				t.Fatalf("top %d: row %d is %d bytes, want %d", n, k, r.Size, live[k].Size)
			}
		}
		b.Reset()
		if err := WriteText(&b, rep, Options{TopN: n}); err != nil {
			t.Fatal(err)
		}
		more := fmt.Sprintf("… %d more", len(live)-n)
		if has := strings.Contains(b.String(), more); has != (n >= 0 && n < len(live)) {
			t.Errorf("top %d: the text says %q: %v", n, more, has)
		}
	}
}
