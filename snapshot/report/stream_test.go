package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"memscope/format"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
)

// TestWriteJSONIsIndent: the JSON report, whose stages and allocations
// are encoded a few at a time on several cores as it is written, is the
// bytes of the whole value encoded by encoding/json with SetIndent("",
// "  "): real snapshots with stages and allocations, two devices whose
// stage names and call sites hold the keys themselves, quotes and control
// characters, a device without stages, an estimate and a file that
// failed.
func TestWriteJSONIsIndent(t *testing.T) {
	var reports []FileReport
	for _, p := range []string{"../../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../../testdata/snapshots/h200/train.pickle"} {
		s, err := snapshot.Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, FileReport{Path: p, Kind: format.Snapshot, Analysis: snapshot.Analyze(s, nil)})
	}
	reports = append(reports, FileReport{Path: "two.pickle", Kind: format.Snapshot, Analysis: snapshot.Analyze(threeDevices(), nil)})
	e, err := estimate.Open(context.Background(), "../../testdata/estimates/SYNTHETIC_peak_snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	reports = append(reports, FileReport{Path: "est.json", Kind: format.Estimate, Estimate: estimate.Analyze(e, nil)},
		FileReport{Path: "gone.pickle", Kind: format.Snapshot, Err: errors.New("no such file")})
	opt := Options{TopN: 4, Allocations: true}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(jsonOf(reports, opt)); err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, piece := range []int{1, 100, indentChunk} {
		for _, chunk := range []int{1, 3, arrayChunk} {
			var got bytes.Buffer
			out := jsonOf(reports, opt)
			arrays := takeArrays(&out)
			if err := writeArrays(newIndentWriter(&got, "  ", piece), compactOf(t, &out), arrays, chunk); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Fatalf("written in pieces of %d, elements encoded %d at a time:\n%s\nwant:\n%s", piece, chunk, got.String(), want.String())
			}
		}
	}
	var got bytes.Buffer
	if err := WriteJSON(&got, reports, opt); err != nil || got.String() != want.String() {
		t.Fatalf("WriteJSON: %v, or other bytes than encoding/json's", err)
	}
	// What the comparison covers: stages on two devices of a file, with
	// the key in their names, and none on its third.
	var stages []int
	allocs := 0
	for _, f := range jsonOf(reports, opt).Files {
		if devs, ok := f.Devices.([]jsonDevice); ok {
			for _, d := range devs {
				stages = append(stages, len(d.Stages))
				if all, ok := d.Allocations.([]jsonAlloc); ok {
					allocs += len(all)
				}
			}
		}
	}
	if allocs < 2*3 {
		t.Fatalf("%d allocations: the test needs them written in chunks", allocs)
	}
	if len(stages) != 5 || stages[0] == 0 || stages[2] == 0 || stages[3] == 0 || stages[4] != 0 {
		t.Fatalf("stages by device %v: the test needs stages on the first and on the third file's first two, none on its last", stages)
	}
	if !strings.Contains(want.String(), `\"stages\":[]`) || !strings.Contains(want.String(), `\"allocations\":[]`) {
		t.Fatal("no stage name holds the keys: the test proves less than it says")
	}
}

// threeDevices is a snapshot of three devices, each a step of
// allocations; on the first two, within annotated ranges whose names are
// hard to write as JSON.
func threeDevices() *snapshot.Snapshot {
	s := &snapshot.Snapshot{}
	names := []string{`"stages":[]`, `a"b\c`, "tab\there\x01", `{"stages":[],"allocations":[]}`}
	for dev := range 3 {
		var tr []snapshot.TraceEntry
		us := int64(1_000_000)
		for i, name := range names {
			if dev < 2 {
				s.Annotations = append(s.Annotations, snapshot.Annotation{Name: name, Stage: "START", Device: dev, TimeUS: us})
			}
			for k := range 3 {
				us++
				st := s.AddStack(snapshot.StackOf(snapshot.Frame{Filename: "train.py", Line: int64(10*i + k), Name: name}))
				tr = append(tr, snapshot.TraceEntry{Addr: uint64(0x1000 * (10*i + k + 1)), Size: 1 << 20, TimeUS: us, Stack: st}.With(snapshot.ActionAlloc))
			}
			us++
			if dev < 2 {
				s.Annotations = append(s.Annotations, snapshot.Annotation{Name: name, Stage: "END", Device: dev, TimeUS: us})
			}
		}
		s.Traces = append(s.Traces, tr)
	}
	return s
}

// compactOf is out encoded by encoding/json, compact.
func compactOf(t *testing.T, out *jsonReport) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(out); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWriteArraysChecksKeys: arrays that have no key left to go to, or
// keys left without their array, are an error, and nothing is written.
func TestWriteArraysChecksKeys(t *testing.T) {
	var got bytes.Buffer
	one := func(key []byte) streamed {
		return streamed{key: key, n: 1, encode: func(enc *json.Encoder, i int) error { return enc.Encode(i) }}
	}
	for _, c := range []struct {
		compact string
		arrays  []streamed
	}{
		{`{"devices":[]}`, []streamed{one(stagesKey)}},
		{`{"stages":[],"allocations":[]}`, []streamed{one(stagesKey)}},
		{`{"stages":[]}`, []streamed{one(stagesKey), one(allocsKey)}},
	} {
		err := writeArrays(newIndentWriter(&got, "  ", indentChunk), []byte(c.compact), c.arrays, arrayChunk)
		if err == nil || got.Len() != 0 {
			t.Fatalf("%s with %d arrays: error %v, %d bytes written", c.compact, len(c.arrays), err, got.Len())
		}
	}
}

// TestWriteJSONStopsAtError: a report written in pieces of 8 bytes, its
// stages one at a time, to a writer that fails returns that error, after
// one write.
func TestWriteJSONStopsAtError(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	reports := []FileReport{{Path: "three.pickle", Kind: format.Snapshot, Analysis: snapshot.Analyze(threeDevices(), nil)}}
	var w failingWriter
	out := jsonOf(reports, Options{})
	arrays := takeArrays(&out)
	if err := writeArrays(newIndentWriter(&w, "  ", 8), compactOf(t, &out), arrays, 1); err == nil || err.Error() != "disk full" {
		t.Fatalf("error %v, want disk full", err)
	}
	if w.writes != 1 {
		t.Errorf("%d writes after the first failed", w.writes-1)
	}
}
