package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"memscope/model"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestReportMatchesPythonReference compares every figure of `report --json`
// with the committed output of scripts/reference_report.py (pickle.load).
func TestReportMatchesPythonReference(t *testing.T) {
	refBytes, err := os.ReadFile("testdata/reference/report_snapshots.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Files []map[string]any `json:"files"`
	}
	if err := json.Unmarshal(refBytes, &ref); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range ref.Files {
		paths = append(paths, f["path"].(string))
	}
	out, stderr, code := runCLI(t, append([]string{"report", "--json", "--top", "10"}, paths...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Files []map[string]any `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Files) != len(ref.Files) {
		t.Fatalf("%d files, want %d", len(got.Files), len(ref.Files))
	}
	for i, rf := range ref.Files {
		gf := got.Files[i]
		if gf["path"] != rf["path"] || gf["error"] != nil || gf["kind"] != "torch-snapshot" {
			t.Errorf("file %d: path %v error %v kind %v", i, gf["path"], gf["error"], gf["kind"])
			continue
		}
		rdevs := rf["devices"].([]any)
		gdevs := gf["devices"].([]any)
		if len(rdevs) != len(gdevs) {
			t.Errorf("%s: %d devices, want %d", rf["path"], len(gdevs), len(rdevs))
			continue
		}
		for j := range rdevs {
			rd, gd := rdevs[j].(map[string]any), gdevs[j].(map[string]any)
			for k, v := range rd {
				if !subsetEqual(gd[k], v) {
					t.Errorf("%s %s %s:\n got %v\nwant %v", rf["path"], rd["device"], k, gd[k], v)
				}
			}
		}
	}
}

// subsetEqual reports whether got equals want in every field want has:
// objects are compared field by field, so the reference need not compute
// every figure memscope adds.
func subsetEqual(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !subsetEqual(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !subsetEqual(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// TestReportJSONSchema pins the documented field names.
func TestReportJSONSchema(t *testing.T) {
	out, _, code := runCLI(t, "report", "--json", "testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	file := got["files"].([]any)[0].(map[string]any)
	dev := file["devices"].([]any)[0].(map[string]any)
	top := dev["top"].([]any)[0].(map[string]any)
	cat := dev["categories"].([]any)[0].(map[string]any)
	want := map[string][]string{
		"file": {"devices", "error", "kind", "path"},
		"device": {"active_blocks", "active_bytes", "allocated_bytes", "blocks", "categories", "device",
			"efficiency_pct", "inactive_bytes", "leak_suspects", "oom_events", "peak", "pending_frees", "recommendations",
			"requested_bytes", "reserved_bytes", "roles", "rounding_waste_bytes", "segments", "stages", "steps", "top", "trace_entries"},
		"top": {"address", "category", "category_frame", "category_keyword", "location", "op", "requested_size", "role",
			"site", "size", "state"},
		"category": {"blocks", "bytes", "name"},
	}
	for name, obj := range map[string]map[string]any{"file": file, "device": dev, "top": top, "category": cat} {
		var keys []string
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !reflect.DeepEqual(keys, want[name]) {
			t.Errorf("%s keys %v, want %v", name, keys, want[name])
		}
	}
}

func TestReportExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pickle")
	if err := os.WriteFile(bad, []byte("\x80\x04garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := "testdata/snapshots/silmont2000_assignment2-systems__mem_snapshot.pickle"
	out, _, code := runCLI(t, "report", "--json", good, bad)
	if code != 1 {
		t.Errorf("one bad file: exit %d, want 1", code)
	}
	var got struct {
		Files []struct {
			Path    string  `json:"path"`
			Error   *string `json:"error"`
			Devices []any   `json:"devices"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Files) != 2 || got.Files[0].Error != nil || len(got.Files[0].Devices) == 0 {
		t.Errorf("good file not reported intact: %+v", got.Files)
	}
	if got.Files[1].Error == nil || !strings.Contains(*got.Files[1].Error, bad) {
		t.Errorf("bad file error should name the file: %+v", got.Files[1].Error)
	}
	if _, _, code := runCLI(t, "report"); code != 2 {
		t.Errorf("no PATH: exit %d, want 2", code)
	}
	if _, _, code := runCLI(t, "report", "--bogus", good); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
	if _, _, code := runCLI(t, "report", good); code != 0 {
		t.Errorf("good file: exit %d, want 0", code)
	}
}

func TestReportDirectoryLabelsRanks(t *testing.T) {
	// torchtitan layouts: iteration_N/rankR_memory_snapshot.pickle and
	// step_N/RRRRRR_step_N.pickle.
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/snapshots/silmont2000_assignment2-systems__mem_snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"memory_snapshot/iteration_10/rank1_memory_snapshot.pickle",
		"memory_snapshot/iteration_10/rank0_memory_snapshot.pickle",
		"profiling/memory_snapshot/step_000000000010_exit/000003_step_10.pickle",
		"notes/readme.txt"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := runCLI(t, "report", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"rank 0 · step 10", "rank 1 · step 10", "rank 3 · step 10 (OOM exit)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks label %q", want)
		}
	}
	if strings.Contains(out, "readme.txt") {
		t.Error("non-snapshot file reported")
	}
	if i, j := strings.Index(out, "rank 0 · step 10"), strings.Index(out, "rank 1 · step 10"); i > j {
		t.Error("ranks not in order")
	}
	empty := t.TempDir()
	out, _, code = runCLI(t, "report", empty)
	if code != 1 || !strings.Contains(out, "no snapshots found") {
		t.Errorf("empty dir: exit %d, output %q", code, out)
	}
}

func TestCompareCLI(t *testing.T) {
	out, stderr, code := runCLI(t, "compare", "testdata/traces/megatron_trace_memory")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The real files' peak_allocated_MB is cumulative: iteration 9's own
	// maximum stands in, and the text says so.
	for _, want := range []string{"61248.28     61579.28    +0.54%", "61589.41     62193.85    +0.98%", "(simulation only)", "4 ranks, 2 paired",
		"rank 0 real: peak_allocated_MB 61579.28 is cumulative", "0.55x"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "(simulation only)") != 2 {
		t.Errorf("ranks 1 and 3 should be simulation-only:\n%s", out)
	}
	if !strings.Contains(stderr, "warning: testdata/traces/megatron_trace_memory/real/memory_trace_rank0_wd4_tp1_pp2_l32_bs1.json: peak_allocated_MB is cumulative") {
		t.Errorf("each file's warnings go to stderr:\n%s", stderr)
	}
	// --sort error puts the worst rank first.
	out, _, _ = runCLI(t, "compare", "--sort", "error", "testdata/traces/generated")
	lines := strings.Split(out, "\n")
	if len(lines) < 6 || !strings.HasPrefix(strings.TrimSpace(lines[5]), "1 ") {
		t.Errorf("--sort error: first row should be rank 1 (-3%%):\n%s", out)
	}
	if _, _, code := runCLI(t, "compare", "--sort", "size", "a", "b"); code != 2 {
		t.Errorf("bad --sort: exit %d, want 2", code)
	}
	if _, _, code := runCLI(t, "compare", "a", "b", "c"); code != 2 {
		t.Errorf("three paths: exit %d, want 2", code)
	}
	_, stderr, code = runCLI(t, "compare", t.TempDir(), "testdata/traces/megatron_trace_memory/sim")
	if code != 1 || !strings.Contains(stderr, "no trace files") {
		t.Errorf("empty real dir: exit %d, %s", code, stderr)
	}
}

// TestEstimateReportMatchesReference compares `report --json` on peak
// snapshots with scripts/reference_estimate.py's committed output.
func TestEstimateReportMatchesReference(t *testing.T) {
	refBytes, err := os.ReadFile("testdata/reference/report_estimates.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]any
	if err := json.Unmarshal(refBytes, &ref); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range ref["files"].([]any) {
		paths = append(paths, f.(map[string]any)["path"].(string))
	}
	out, stderr, code := runCLI(t, append([]string{"report", "--json"}, paths...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	// No input is a rank folder: "ranks" is empty, and the reference (which
	// reads files one by one) has no such key.
	if r, ok := got["ranks"].([]any); !ok || len(r) != 0 {
		t.Errorf("ranks %v, want []", got["ranks"])
	}
	delete(got, "ranks")
	if !reflect.DeepEqual(got, ref) {
		gb, _ := json.MarshalIndent(got, "", " ")
		t.Errorf("report differs from the reference:\n%.3000s", gb)
	}
}

func TestRecordWithoutNVML(t *testing.T) {
	_, stderr, code := runCLI(t, "record", "--out", t.TempDir(), "--duration", "100ms")
	// This machine (and CI) has no NVIDIA driver: exit 1 with the reason.
	if code == 0 {
		t.Skip("an NVIDIA driver is present; the no-driver path cannot be checked here")
	}
	if code != 1 || !strings.Contains(stderr, "NVML") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, _, code := runCLI(t, "record"); code != 2 {
		t.Errorf("record without --out: exit %d, want 2", code)
	}
}

func TestRecordFakeThenCompare(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "record", "--source", "fake", "--out", dir, "--interval", "50ms", "--duration", "300ms", "--devices", "0,3")
	if code != 0 {
		t.Fatalf("record: exit %d: %s", code, stderr)
	}
	out, stderr, code := runCLI(t, "compare", "--json", dir, dir)
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	var got struct {
		Summary struct {
			Paired int `json:"paired"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Summary.Paired != 2 {
		t.Errorf("compare of the recording: %v %+v", err, got)
	}
}

// TestExplorerWithoutTerminal: `memscope PATH` with stdout not a terminal
// prints the text reports.
func TestExplorerWithoutTerminal(t *testing.T) {
	out, _, code := runCLI(t, "testdata/traces/megatron_trace_memory", "testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"4 ranks, 2 paired", "cuda:0  reserved 220.0 MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, code := runCLI(t, "no/such/path"); code != 1 {
		t.Errorf("missing path: exit %d, want 1", code)
	}
}

func TestDiffCLI(t *testing.T) {
	out, stderr, code := runCLI(t, "diff", "--json",
		"testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle",
		"testdata/snapshots/silmont2000_assignment2-systems__memory_forward_bf16_128.pickle")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := readRef(t, "testdata/reference/diff_fp32_bf16.json")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff differs from the reference:\n%s", out)
	}
	if _, _, code := runCLI(t, "diff", "a"); code != 2 {
		t.Errorf("one input: exit %d, want 2", code)
	}
}

func readRef(t *testing.T, p string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPeakLiveSumsToPeak: the live set reported at the peak adds up to the
// peak, with a trace and without one (device 1 of two_devices has none).
func TestPeakLiveSumsToPeak(t *testing.T) {
	out, _, code := runCLI(t, "report", "--json", "--top", "100000",
		"testdata/snapshots/synthetic/two_devices.pickle", "testdata/snapshots/h200/train.pickle")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got struct {
		Files []struct {
			Devices []struct {
				Device string `json:"device"`
				Peak   struct {
					Active    int64 `json:"active_bytes"`
					FromTrace bool  `json:"from_trace"`
					Live      []struct {
						Size int64 `json:"size"`
					} `json:"live"`
				} `json:"peak"`
			} `json:"devices"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	traced, untraced := 0, 0
	for _, f := range got.Files {
		for _, d := range f.Devices {
			var sum int64
			for _, l := range d.Peak.Live {
				sum += l.Size
			}
			if sum != d.Peak.Active {
				t.Errorf("%s: live at the peak sums to %d, peak %d", d.Device, sum, d.Peak.Active)
			}
			if d.Peak.FromTrace {
				traced++
			} else {
				untraced++
			}
		}
	}
	if traced == 0 || untraced == 0 {
		t.Errorf("want devices with and without a trace: %d, %d", traced, untraced)
	}
}

// TestOneDetectionForEveryCommand: each command names what a file it does
// not read looks like, exits 1, and the explorer says the same.
func TestOneDetectionForEveryCommand(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(`{"foo": [1, 2, 3]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A zip archive that is no torch.save (its header cut short), and one
	// of a checkpoint: torch.save's data.pkl first, {'weight': 1}.
	saved := filepath.Join(dir, "snapshot.pt")
	if err := os.WriteFile(saved, append([]byte("PK\x03\x04\x00\x00\x00\x00"), "archive/data.pkl"...), 0o644); err != nil {
		t.Fatal(err)
	}
	checkpoint := filepath.Join(dir, "model.pt")
	writeZip(t, checkpoint, "model/data.pkl", []byte("\x80\x02}q\x00X\x06\x00\x00\x00weightq\x01K\x01s."))
	const (
		megatron = "testdata/traces/megatron_trace_memory/real/memory_trace_rank0_wd4_tp1_pp2_l32_bs1.json"
		snap     = "testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle"
		log      = "testdata/traces/logs/titan_srun.log"
	)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report", other}, "JSON that is neither an allocator snapshot, an estimate nor a memory trace"},
		{[]string{"report", saved}, "a zip archive that is not a torch.save of an allocator snapshot, not what memscope report reads"},
		{[]string{"report", checkpoint}, "a torch.save archive that holds no allocator snapshot (a checkpoint?), not what memscope report reads"},
		{[]string{"report", megatron}, "a Megatron memory trace, not what memscope report reads: use memscope compare"},
		{[]string{"report", log}, "a torchtitan training log, not what memscope report reads: use memscope compare"},
		{[]string{"report", "testdata/traces/megatron_trace_memory"}, "holds 6 memory trace files: use memscope compare"},
		{[]string{"diff", snap, megatron}, "a Megatron memory trace, not what memscope diff reads"},
		{[]string{"compare", snap, megatron}, "an allocator snapshot, not what memscope compare reads: use memscope report"},
		{[]string{"report", "--json", other}, `"kind": "unknown"`},
	} {
		out, stderr, code := runCLI(t, c.args...)
		if code != 1 || !strings.Contains(out+stderr, c.want) {
			t.Errorf("%v: exit %d, want 1 and %q:\n%s%s", c.args, code, c.want, out, stderr)
		}
		if strings.Contains(out, "rank 0 · step") {
			t.Errorf("%v: an error header carries an invented label:\n%s", c.args, out)
		}
	}
	ws := model.New(context.Background(), nil)
	ws.Open(other)
	ws.Wait()
	if s := ws.Sources(); len(s) != 1 || s[0].Err == nil || !strings.Contains(s[0].Err.Error(), "JSON that is neither") {
		t.Errorf("the explorer says the same: %+v", s)
	}
}

// TestReportJSONStagesAndAnomalies pins the names of stages, steps and
// pending_frees on real H200 snapshots, and their figures against an
// independent pass over the pickles: big.pickle.gz has 30 AdamW steps
// (60 annotated stages); in record_stream.pickle five frees wait on a
// side stream. The waits were computed with the stdlib alone:
//
//	for each free_completed not right after its free_requested:
//	    wait = completed.time_us - requested.time_us  (median 32165, max 35075)
func TestReportJSONStagesAndAnomalies(t *testing.T) {
	out, _, code := runCLI(t, "report", "--json", "testdata/snapshots/h200/big.pickle.gz", "testdata/snapshots/h200/record_stream.pickle")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got struct {
		Files []struct {
			Devices []struct {
				Stages       []map[string]any `json:"stages"`
				Steps        map[string]any   `json:"steps"`
				Leaks        []any            `json:"leak_suspects"`
				PendingFrees map[string]any   `json:"pending_frees"`
			} `json:"devices"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		sort.Strings(k)
		return k
	}
	big, rs := got.Files[0].Devices[0], got.Files[1].Devices[0]
	if len(big.Stages) != 60 || big.Steps["marker"] != "Optimizer.step#AdamW.step" || big.Steps["count"] != 30.0 || len(big.Leaks) != 0 {
		t.Errorf("big: %d stages, steps %v, %d leak suspects", len(big.Stages), big.Steps, len(big.Leaks))
	}
	wantStage := []string{"allocated_bytes", "allocations", "delta_bytes", "depth", "end_active_bytes", "end_event", "end_us",
		"first_event", "name", "occurrence", "open_end", "open_start", "peak_bytes", "peak_event", "start_active_bytes", "start_us", "top_sites"}
	if k := keys(big.Stages[0]); !reflect.DeepEqual(k, wantStage) {
		t.Errorf("stage keys %v", k)
	}
	wantPending := []string{"at_peak_bytes", "deferred", "long", "long_bytes", "max_site", "max_size", "max_wait", "median_wait",
		"still_pending", "top_sites", "wait_unit"}
	pf := rs.PendingFrees
	if k := keys(pf); !reflect.DeepEqual(k, wantPending) {
		t.Errorf("pending_frees keys %v", k)
	}
	if pf["long"] != 5.0 || pf["median_wait"] != 32165.0 || pf["max_wait"] != 35075.0 || pf["wait_unit"] != "us" || len(rs.Stages) != 0 || rs.Steps != nil {
		t.Errorf("record_stream: %v, %d stages, steps %v", pf, len(rs.Stages), rs.Steps)
	}
}

// TestReportRanks: a folder of per-rank snapshots gets a "ranks" table per
// iteration whose figures are each file's own peak, and whose imbalance is
// the heaviest peak over the mean.
func TestReportRanks(t *testing.T) {
	dir := t.TempDir()
	srcs := []string{"testdata/snapshots/h200/train.pickle", "testdata/snapshots/h200/record_stream.pickle",
		"testdata/snapshots/h200/cpp.pickle"}
	for _, it := range []string{"iteration_5", "iteration_10_exit"} {
		for r, src := range srcs {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, it, fmt.Sprintf("rank%d_memory_snapshot.pickle", r))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, stderr, code := runCLI(t, "report", "--json", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Files []struct {
			Path    string `json:"path"`
			Devices []struct {
				Peak struct {
					Active   int64 `json:"active_bytes"`
					Reserved int64 `json:"reserved_bytes"`
				} `json:"peak"`
			} `json:"devices"`
		} `json:"files"`
		Ranks []struct {
			Path       string `json:"path"`
			Iterations []struct {
				Step    *int `json:"step"`
				OOMExit bool `json:"oom_exit"`
				Ranks   []struct {
					Rank     int    `json:"rank"`
					Path     string `json:"path"`
					Peak     int64  `json:"peak_bytes"`
					Reserved int64  `json:"reserved_bytes"`
				} `json:"ranks"`
				Imbalance struct {
					MaxOverMean float64 `json:"max_over_mean"`
					Heaviest    *int    `json:"heaviest_rank"`
				} `json:"imbalance"`
			} `json:"iterations"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	peaks := map[string][2]int64{}
	for _, f := range got.Files {
		peaks[f.Path] = [2]int64{f.Devices[0].Peak.Active, f.Devices[0].Peak.Reserved}
	}
	if len(got.Ranks) != 1 || len(got.Ranks[0].Iterations) != 2 {
		t.Fatalf("ranks: %+v", got.Ranks)
	}
	for i, it := range got.Ranks[0].Iterations {
		if *it.Step != []int{5, 10}[i] || it.OOMExit != (i == 1) || len(it.Ranks) != 3 {
			t.Errorf("iteration %d: %+v", i, it)
		}
		var sum, mx int64
		heavy := -1
		for r, row := range it.Ranks {
			if row.Rank != r || peaks[row.Path] != [2]int64{row.Peak, row.Reserved} {
				t.Errorf("rank %d: %+v, file says %v", r, row, peaks[row.Path])
			}
			sum += row.Peak
			if row.Peak > mx {
				mx, heavy = row.Peak, r
			}
		}
		want := math.Round(100*float64(mx)*3/float64(sum)) / 100
		if it.Imbalance.MaxOverMean != want || *it.Imbalance.Heaviest != heavy {
			t.Errorf("imbalance %+v, want %.2f at rank %d", it.Imbalance, want, heavy)
		}
	}
	text, _, _ := runCLI(t, "report", "--top", "0", dir)
	if !strings.Contains(text, "step 10 (OOM exit): 3 ranks") || !strings.Contains(text, "imbalance") {
		t.Errorf("text report:\n%s", text[:min(len(text), 1500)])
	}
}

// TestHistoryFlag: --history takes 1m to 24h, and no more samples per GPU
// than the ring may hold at the chosen interval (both sides of each bound).
func TestHistoryFlag(t *testing.T) {
	for _, c := range []struct {
		h, iv string
		ok    bool
	}{
		{"59s", "1s", false}, {"1m", "1s", true}, {"30m", "1s", true}, {"24h", "1s", true}, {"24h1s", "1s", false},
		{"24h", "500ms", true}, {"24h", "433ms", true}, {"24h", "432ms", false}, {"2h", "50ms", true}, {"3h", "50ms", false},
	} {
		h, _ := time.ParseDuration(c.h)
		iv, _ := time.ParseDuration(c.iv)
		if err := checkHistory(h, iv); (err == nil) != c.ok {
			t.Errorf("--history %s --interval %s: %v, want ok=%v", c.h, c.iv, err, c.ok)
		}
	}
	_, stderr, code := runCLI(t, "--history", "10s", "--no-live", "testdata/snapshots/h200/train.pickle")
	if code != 2 || !strings.Contains(stderr, "--history must be between") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestDemoShowsEstimateErrors: the demo's SYNTHETIC comparison has a rank
// the simulation underestimates and one it overestimates, by the scales
// it was derived with (the bundled real pair reads +0.00%).
func TestDemoShowsEstimateErrors(t *testing.T) {
	dir, err := extractDemo()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cmp := func(sub string) map[int]float64 {
		out, stderr, code := runCLI(t, "compare", "--json", filepath.Join(dir, "traces", sub))
		if code != 0 {
			t.Fatalf("compare %s: exit %d: %s", sub, code, stderr)
		}
		var got struct {
			Ranks []struct {
				Rank int      `json:"rank"`
				Err  *float64 `json:"peak_error_pct"`
			} `json:"ranks"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		m := map[int]float64{}
		for _, r := range got.Ranks {
			if r.Err != nil {
				m[r.Rank] = *r.Err
			}
		}
		return m
	}
	base, synth := cmp("megatron_trace_memory"), cmp("SYNTHETIC_estimate_errors")
	if len(synth) != 2 {
		t.Fatalf("synthetic pairs: %v", synth)
	}
	for rank, scale := range demoSimScale {
		// The simulated peak scales with the samples: (1+e')/(1+e) = scale.
		want := ((1+base[rank]/100)*scale - 1) * 100
		if math.Abs(synth[rank]-want) > 0.05 {
			t.Errorf("rank %d: peak error %.2f%%, want %.2f%% (base %.2f%%, scale %.2f)", rank, synth[rank], want, base[rank], scale)
		}
	}
	if !(synth[0] < -5 && synth[2] > 3) {
		t.Errorf("rank 0 should be underestimated and rank 2 over: %v", synth)
	}
}

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "4GiB": 4 << 30, "2G": 2 << 30, "1.5K": 1536, "100": 100, " 3 MB ": 3 << 20} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("%q: %d, %v; want %d", in, b, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1MiB", "0", "lots", "1e30G"} {
		var b byteSize
		if err := b.Set(bad); err == nil {
			t.Errorf("%q accepted as %d", bad, b)
		}
	}
}

// TestMaxInflateFlag: report refuses a .gz that expands past --max-inflate,
// naming the file and the flag, and reads it under a higher ceiling.
func TestMaxInflateFlag(t *testing.T) {
	const f = "testdata/snapshots/h100/gpt_adamw.pickle.gz"
	_, stderr, code := runCLI(t, "report", "--max-inflate", "64KiB", f)
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	out, _, _ := runCLI(t, "report", "--max-inflate", "64KiB", f)
	if !strings.Contains(out+stderr, f) || !strings.Contains(out+stderr, "--max-inflate") {
		t.Errorf("the error names neither the file nor the flag:\n%s\n%s", out, stderr)
	}
	if _, stderr, code := runCLI(t, "report", "--max-inflate", "64MiB", f); code != 0 {
		t.Errorf("64 MiB: exit %d: %s", code, stderr)
	}
	if _, _, code := runCLI(t, "report", "--max-inflate", "lots", f); code != 2 {
		t.Errorf("a bad size: exit %d, want 2", code)
	}
}

// TestDiffEstimateAgainstSnapshot: an estimate's peak sits on the row of
// the measured peak; totals only one kind has read n/a, not 0 B.
func TestDiffEstimateAgainstSnapshot(t *testing.T) {
	est := "testdata/estimates/WRITER_tiny_gpt_cpu_peak_snapshot.json"
	snap := "testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle"
	out, stderr, code := runCLI(t, "diff", "--json", est, snap)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Totals map[string]struct{ A, B, Delta *int64 } `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	pk := got.Totals["peak_active_bytes"]
	if pk.A == nil || pk.B == nil || pk.Delta == nil || *pk.A == 0 || *pk.B == 0 || *pk.Delta != *pk.B-*pk.A {
		t.Errorf("peak_active_bytes: %+v, want both sides", pk)
	}
	for name, onlyB := range map[string]bool{"reserved_bytes": true, "listed_bytes": false} {
		r := got.Totals[name]
		if r.Delta != nil || (r.A == nil) != onlyB || (r.B == nil) == onlyB {
			t.Errorf("%s: a %v b %v delta %v; want the missing side and the delta null", name, r.A, r.B, r.Delta)
		}
	}
	text, _, _ := runCLI(t, "diff", est, snap)
	if !strings.Contains(text, "n/a") || strings.Contains(text, "peak                ") {
		t.Errorf("text diff:\n%s", text)
	}
}

// TestReportErrorsOnStderr: a failed input is said on stderr too, so a
// redirected report does not hide it.
func TestReportErrorsOnStderr(t *testing.T) {
	out, stderr, code := runCLI(t, "report", "no/such.pickle")
	if code != 1 || !strings.Contains(stderr, "no/such.pickle") || !strings.Contains(out, "no/such.pickle") {
		t.Errorf("exit %d, stderr %q, stdout %q", code, stderr, out)
	}
}

// TestCLIEscapesNamesFromFiles: paths found in a folder (a comparison's real
// and sim runs, a saved folder named after its input) and notes about a
// file reach stdout and stderr escaped, colour sequences included.
func TestCLIEscapesNamesFromFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run\x1b[32m")
	tr := `{"0": {"samples": [{"timestamp_s": 0, "allocated_memory_MB": 1}, {"timestamp_s": 1, "allocated_memory_MB": 2}]}}`
	for _, side := range []string{"real", "sim"} {
		if err := os.MkdirAll(filepath.Join(dir, side), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, side, "memory_trace_rank0_\x1b[31m.json"), []byte(tr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := os.ReadFile("testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "snap\x1b[33m.pickle")
	if err := os.WriteFile(p, snap, 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, args := range [][]string{
		{"compare", dir},
		{"compare", "--out", out, dir},
		{"report", "--out", out, p},
	} {
		stdout, stderr, code := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%q: exit %d\n%s", args, code, stderr)
		}
		if strings.Contains(stdout+stderr, "\x1b") {
			t.Errorf("%q: an escape character from a file name reached the terminal:\n%q\n%q", args, stdout, stderr)
		}
	}
}

// TestOutFoldersNeverCollide: two saved reports of the same name in the
// same second get two folders.
func TestOutFoldersNeverCollide(t *testing.T) {
	root := t.TempDir()
	seen := map[string]bool{}
	for range 3 {
		dir, err := newRunFolder(root, "same", nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[dir] {
			t.Fatalf("%s handed out twice", dir)
		}
		seen[dir] = true
	}
}

// TestReadmeFiguresMatch: the README's claim about the bundled Megatron
// run is what compare computes, and help texts say their defaults once.
func TestReadmeFiguresMatch(t *testing.T) {
	out, _, code := runCLI(t, "compare", "--json", "testdata/traces/megatron_trace_memory")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var c struct {
		Ranks []struct {
			Rank         int      `json:"rank"`
			PeakErrorPct *float64 `json:"peak_error_pct"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Ranks {
		if r.PeakErrorPct == nil {
			continue
		}
		claim := fmt.Sprintf("%+.2f%% on rank %d", *r.PeakErrorPct, r.Rank)
		if !strings.Contains(string(readme), claim) {
			t.Errorf("README lacks %q (what compare computes)", claim)
		}
	}
	_, help, _ := runCLI(t, "compare", "--help")
	if regexp.MustCompile(`\(default: [^)]*\) \(default`).MatchString(help) {
		t.Errorf("a flag says its default twice:\n%s", help)
	}
}

// TestReplayWithoutTerminal: `memscope --replay DIR` with stdout not a
// terminal reports DIR's recording, not the current directory.
func TestReplayWithoutTerminal(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := runCLI(t, "record", "--source", "fake", "--out", dir, "--duration", "200ms", "--interval", "50ms"); code != 0 {
		t.Fatalf("record: exit %d: %s", code, stderr)
	}
	out, stderr, code := runCLI(t, "--replay", dir)
	if code != 0 || !strings.Contains(out, "one run") || strings.Contains(out+stderr, "current directory") {
		t.Errorf("exit %d:\n%s\n%s", code, out, stderr)
	}
}

// TestDemoSamplesWrittenAtOneInstant: the demo's samples carry one
// modification time, so the explorer (which shows a folder's newest
// snapshot) opens on the first listed, as it does on the repository's own
// folder, not on whichever sample was extracted last.
func TestDemoSamplesWrittenAtOneInstant(t *testing.T) {
	dir, err := extractDemo()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var first time.Time
	n := 0
	err = filepath.WalkDir(filepath.Join(dir, "snapshots"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if n == 0 {
			first = info.ModTime()
		} else if !info.ModTime().Equal(first) {
			t.Errorf("%s: modified %v, the first sample %v", p, info.ModTime(), first)
		}
		n++
		return nil
	})
	if err != nil || n < 2 {
		t.Fatalf("%d samples: %v", n, err)
	}
}

// writeZip writes a zip archive of one stored member, as torch.save
// stores its data.pkl.
func writeZip(t *testing.T, path, member string, data []byte) {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	f, err := w.CreateHeader(&zip.FileHeader{Name: member, Method: zip.Store})
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = os.WriteFile(path, b.Bytes(), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestReportTorchSave: a snapshot saved with torch.save reports as the
// pickle.dump of it does, in text (but for its format line) and in JSON,
// and is found in a folder beside a checkpoint, which is not.
func TestReportTorchSave(t *testing.T) {
	const pickled = "testdata/snapshots/synthetic/proto2.pickle"
	pkl, err := os.ReadFile(pickled)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	saved := filepath.Join(dir, "snapshot.pt")
	writeZip(t, saved, "snapshot/data.pkl", pkl)
	for _, args := range [][]string{{"report"}, {"report", "--json"}} {
		want, _, code := runCLI(t, append(args, pickled)...)
		if code != 0 {
			t.Fatalf("%v the pickle: exit %d", args, code)
		}
		got, stderr, code := runCLI(t, append(args, saved)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if len(args) == 1 && !strings.Contains(got, "format: torch.save archive (pickle protocol 2)") {
			t.Errorf("no torch.save format in:\n%.400s", got)
		}
		norm := func(s, path string) string {
			s = strings.ReplaceAll(s, path, "PATH")
			return strings.ReplaceAll(s, "torch.save archive (pickle protocol 2)", "pickle protocol 2")
		}
		if norm(got, saved) != norm(want, pickled) {
			t.Errorf("%v: the archive's report differs from the pickle's:\n%.600s", args, got)
		}
	}
	// In a folder, the archive of a snapshot is found, a checkpoint's
	// not.
	writeZip(t, filepath.Join(dir, "model.pt"), "model/data.pkl", []byte("\x80\x02}q\x00X\x06\x00\x00\x00weightq\x01K\x01s."))
	if out, stderr, code := runCLI(t, "report", dir); code != 0 || !strings.Contains(out, "snapshot.pt") || strings.Contains(out+stderr, "model.pt") {
		t.Errorf("a folder of .pt files: exit %d:\n%.300s%s", code, out, stderr)
	}
}
