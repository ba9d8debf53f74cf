package report

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	"memscope/format"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
)

// TestPrepareWritesAlike: reports prepared one by one (their analyses
// dropped) are written, as JSON and as text, exactly as the reports they
// came from, keep their snapshot's notes, and give the same rows of a rank
// table.
func TestPrepareWritesAlike(t *testing.T) {
	paths := []string{"../../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../../testdata/snapshots/h200/train.pickle",
		"../../testdata/snapshots/synthetic/unknown_and_oom.pickle"}
	load := func() []FileReport {
		var out []FileReport
		for _, p := range paths {
			s, err := snapshot.Open(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, FileReport{Path: p, Kind: format.Snapshot, Analysis: snapshot.Analyze(s, nil)})
		}
		e, err := estimate.Open(context.Background(), "../../testdata/estimates/SYNTHETIC_peak_snapshot.json")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, FileReport{Path: "est.json", Kind: format.Estimate, Estimate: estimate.Analyze(e, nil)},
			FileReport{Path: "gone.pickle", Kind: format.Snapshot, Err: errors.New("no such file")})
		return out
	}
	opt := Options{TopN: 4, Allocations: true}
	write := func(reports []FileReport, asJSON bool) string {
		var b bytes.Buffer
		w := WriteText
		if asJSON {
			w = WriteJSON
		}
		if err := w(&b, reports, opt); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	ref := load()
	wantRanks := RankSetOf("dir", ref, paths)
	for _, asJSON := range []bool{true, false} {
		want := write(ref, asJSON)
		got := load()
		for i := range got {
			Prepare(&got[i], opt, asJSON, true)
			if got[i].Analysis != nil || got[i].Estimate != nil {
				t.Fatalf("json %v: report %d keeps its analysis", asJSON, i)
			}
			if !reflect.DeepEqual(got[i].Warnings(), ref[i].Warnings()) {
				t.Errorf("json %v: report %d notes %q, want %q", asJSON, i, got[i].Warnings(), ref[i].Warnings())
			}
		}
		if write(got, asJSON) != want {
			t.Errorf("json %v: prepared reports are written otherwise", asJSON)
		}
		if ranks := RankSetOf("dir", got, paths); !reflect.DeepEqual(ranks, wantRanks) {
			t.Errorf("json %v: prepared rank rows %+v, want %+v", asJSON, ranks.Rows, wantRanks.Rows)
		}
	}
	if len(ref[2].Warnings()) == 0 {
		t.Error("the snapshot with unknown fields has no notes: the comparison of notes proves nothing")
	}
}
