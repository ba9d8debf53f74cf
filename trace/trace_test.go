package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"memscope/format"
)

const samples = "../testdata/traces/megatron_trace_memory"

func loadPair(t *testing.T, real, sim string, iteration int) *Comparison {
	t.Helper()
	r, err := LoadPath(context.Background(), real)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadPath(context.Background(), sim)
	if err != nil {
		t.Fatal(err)
	}
	return Compare(r, s, iteration, nil)
}

// TestCompareMatchesReference checks every field of the JSON against the
// committed output of scripts/reference_compare.py (json.load).
func TestCompareMatchesReference(t *testing.T) {
	cases := []struct {
		ref, real, sim string
		iteration      int
	}{
		{"compare_megatron.json", samples + "/real", samples + "/sim", -1},
		{"compare_generated.json", "../testdata/traces/generated/memory_traces", "../testdata/traces/generated/memory_traces_scaling", -1},
		{"compare_generated_it1.json", "../testdata/traces/generated/memory_traces", "../testdata/traces/generated/memory_traces_scaling", 1},
	}
	for _, c := range cases {
		t.Run(c.ref, func(t *testing.T) {
			want := readJSON(t, "../testdata/reference/"+c.ref)
			var buf bytes.Buffer
			if err := loadPair(t, c.real, c.sim, c.iteration).WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			var got any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			// The reference was run from the repository root. Warnings are
			// the program's own words, tested apart.
			compareJSON(t, "", dropKey(normPaths(got), "warnings"), normPaths(want))
		})
	}
}

func readJSON(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func dropKey(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, key)
		for _, e := range x {
			dropKey(e, key)
		}
	case []any:
		for _, e := range x {
			dropKey(e, key)
		}
	}
	return v
}

func normPaths(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "path" {
				x[k] = filepath.Base(e.(string))
			} else {
				x[k] = normPaths(e)
			}
		}
	case []any:
		for i := range x {
			x[i] = normPaths(x[i])
		}
	}
	return v
}

// compareJSON compares decoded JSON, numbers to 1e-9 relative.
func compareJSON(t *testing.T, path string, got, want any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: got %T, want object", path, got)
			return
		}
		if len(g) != len(w) {
			t.Errorf("%s: keys %v, want %v", path, keysOf(g), keysOf(w))
		}
		for k := range w {
			compareJSON(t, path+"."+k, g[k], w[k])
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			t.Errorf("%s: got %v, want %v", path, got, want)
			return
		}
		for i := range w {
			compareJSON(t, path+"["+itoa(i)+"]", g[i], w[i])
		}
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: got %v, want %v", path, got, want)
		}
	default:
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", path, got, want)
		}
	}
}

func keysOf(m map[string]any) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	return k
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestSamplesPairing(t *testing.T) {
	c := loadPair(t, samples+"/real", samples+"/sim", -1)
	if len(c.Ranks) != 4 || c.Summary.Paired != 2 {
		t.Fatalf("ranks %d paired %d", len(c.Ranks), c.Summary.Paired)
	}
	for _, rc := range c.Ranks {
		switch rc.Rank {
		case 0, 2:
			// The real files' peak_allocated_MB is cumulative (the same in
			// iterations 1-9, above iteration 9's samples): iteration 9's own
			// maximum is used. The simulation has one iteration: its value
			// stands.
			wantSim := map[int]float64{0: 61579.28, 2: 62193.85}[rc.Rank]
			if rc.Real == nil || rc.Sim == nil || rc.Real.Peak != rc.Real.MaxAllocated || !rc.Real.It.PeakCumulative ||
				rc.Real.It.FilePeak != wantSim || rc.Sim.Peak != wantSim || rc.Sim.It.PeakCumulative {
				t.Errorf("rank %d: %+v %+v", rc.Rank, rc.Real, rc.Sim)
			}
			if want := (rc.Sim.Peak - rc.Real.Peak) / rc.Real.Peak * 100; rc.PeakErrorPct != want {
				t.Errorf("rank %d: peak error %v, want %v", rc.Rank, rc.PeakErrorPct, want)
			}
			if rc.Real.Iteration != 9 || rc.Sim.Iteration != 0 {
				t.Errorf("rank %d: iterations %d/%d, want each side's last (9/0)", rc.Rank, rc.Real.Iteration, rc.Sim.Iteration)
			}
		case 1, 3:
			if rc.Real != nil || rc.Sim == nil || !math.IsNaN(rc.PeakErrorPct) {
				t.Errorf("rank %d should be simulation-only: %+v", rc.Rank, rc)
			}
		}
	}
}

func TestMegatronFormats(t *testing.T) {
	data := []byte(`{"0": {"samples": [{"timestamp_s": 1.0, "reserved_memory_MB": 10.0, "allocated_memory_MB": 5.0},
	  {"timestamp_s": 1.5, "reserved_memory_MB": NaN, "allocated_memory_MB": Infinity}],
	  "peak_allocated_MB": -1, "static_memory_MB": 3.5, "theoretical_memory_MB": -1, "source": "nvml", "extra": [1, {"a": 2}]},
	 "warmup": {"samples": []},
	 "2": {"samples": []},
	 "1": {"samples": [{"timestamp_s": 2, "allocated_memory_MB": 7}], "peak_allocated_MB": 9.25}}`)
	r, err := ParseMegatron("memory_trace_rank12_x.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rank != 12 || len(r.Iterations) != 3 {
		t.Fatalf("rank %d iterations %d", r.Rank, len(r.Iterations))
	}
	if r.Iterations[0].Num != 0 || r.Iterations[1].Num != 1 || r.Iterations[2].Num != 2 {
		t.Error("iterations not sorted by number")
	}
	it0 := r.Iterations[0]
	if it0.Static != 3.5 || it0.Theoretical != Unset || it0.PeakAllocated != Unset || it0.Source != "nvml" {
		t.Errorf("optional fields: %+v", it0)
	}
	if len(it0.T) != 1 || it0.Duration() != 0 || it0.Peak() != 5 {
		t.Errorf("a sample with an infinite value is skipped: %v %v", it0.T, it0.Allocated)
	}
	if got := r.Iterations[1].Peak(); got != 9.25 {
		t.Errorf("peak_allocated_MB should win: %v", got)
	}
	if !math.IsNaN(r.Iterations[1].Reserved[0]) {
		t.Error("a missing field should read as NaN")
	}
	if len(r.Iterations[2].T) != 0 {
		t.Error("empty iteration")
	}
	w := strings.Join(r.Warnings, "|")
	if !strings.Contains(w, `iteration key "warmup" is not a number`) || !strings.Contains(w, `"extra"`) || !strings.Contains(w, "1 samples without a finite") {
		t.Errorf("warnings: %v", r.Warnings)
	}
}

// TestCumulativePeak flags a peak_allocated_MB that repeats across
// iterations and lies above an iteration's own samples, and only that.
func TestCumulativePeak(t *testing.T) {
	iter := func(peak float64, samples ...float64) string {
		var b strings.Builder
		for i, v := range samples {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"timestamp_s": %d, "allocated_memory_MB": %v}`, i, v)
		}
		return fmt.Sprintf(`{"samples": [%s], "peak_allocated_MB": %v}`, b.String(), peak)
	}
	cases := []struct {
		name string
		its  []string
		want []bool // PeakCumulative per iteration
		peak []float64
	}{
		{"repeated and above the samples", []string{iter(50, 10, 50), iter(100, 10, 100), iter(100, 10, 90), iter(100, 10, 80)},
			[]bool{false, false, true, true}, []float64{50, 100, 90, 80}},
		{"repeated but reached each time", []string{iter(100, 100), iter(100, 100)}, []bool{false, false}, []float64{100, 100}},
		{"within the rounding of two decimals", []string{iter(100.005, 100.0), iter(100.005, 100.0)}, []bool{false, false}, []float64{100.005, 100.005}},
		{"just past the rounding", []string{iter(100.01, 100.0), iter(100.01, 100.0)}, []bool{true, true}, []float64{100, 100}},
		{"one iteration above its samples (sampling misses the peak)", []string{iter(100, 90)}, []bool{false}, []float64{100}},
		{"different values above the samples", []string{iter(100, 90), iter(110, 90)}, []bool{false, false}, []float64{100, 110}},
		{"unset peaks", []string{iter(-1, 90), iter(-1, 80)}, []bool{false, false}, []float64{90, 80}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("{")
			for i, it := range c.its {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"%d": %s`, i, it)
			}
			b.WriteString("}")
			r, err := ParseMegatron("memory_trace_rank0.json", []byte(b.String()))
			if err != nil {
				t.Fatal(err)
			}
			flagged := false
			for i, it := range r.Iterations {
				if it.PeakCumulative != c.want[i] || it.Peak() != c.peak[i] {
					t.Errorf("iteration %d: cumulative %v peak %v, want %v %v", i, it.PeakCumulative, it.Peak(), c.want[i], c.peak[i])
				}
				flagged = flagged || it.PeakCumulative
			}
			if got := strings.Contains(strings.Join(r.Warnings, "|"), "cumulative"); got != flagged {
				t.Errorf("warning %v, flagged %v: %v", got, flagged, r.Warnings)
			}
		})
	}
}

func TestBadTraces(t *testing.T) {
	cases := []struct {
		name, data, want string
	}{
		{"truncated (still being written)", `{"0": {"samples": [{"timestamp_s": 1.0, "reserved_memory_MB": 10`, "unexpected end of data"},
		{"samples not a list", `{"0": {"samples": "lots"}}`, `iteration "0": samples: line 1 column 19 (byte 18): expected an array`},
		{"value not a number", `{"0": {"samples": [{"timestamp_s": "soon"}]}}`, "timestamp_s"},
		{"iteration not an object", `{"0": [1, 2]}`, "expected an object for the iteration"},
		{"garbage", `{"samples" oops`, "expected ':'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMegatron("memory_trace_rank0.json", []byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const oneIter = `{"0": {"samples": [{"timestamp_s": 0, "reserved_memory_MB": 10, "allocated_memory_MB": %s}, {"timestamp_s": 1, "reserved_memory_MB": 10, "allocated_memory_MB": %s}], "peak_allocated_MB": -1}}`

func iter(a, b string) string {
	return strings.ReplaceAll(strings.Replace(strings.Replace(oneIter, "%s", a, 1), "%s", b, 1), "\n", "")
}

func TestSetErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"real/memory_trace_rank0_a.json": iter("0", "0"),            // zero real peak
		"real/memory_trace_rank1_a.json": iter("5", "10"),           // fine
		"real/memory_trace_rank1_b.json": iter("5", "10"),           // duplicate rank 1
		"real/memory_trace_rank2_a.json": `{"0": {"samples": [{"ti`, // truncated
		"real/memory_trace_rank4_a.json": iter("1", "2"),            // real only
		"sim/memory_trace_rank0_s.json":  iter("1", "1"),
		"sim/memory_trace_rank1_s.json":  iter("4", "8"),
		"sim/memory_trace_rank3_s.json":  iter("4", "8"), // sim only
		"empty/notes.txt":                "nothing to see",
	})
	c := loadPair(t, filepath.Join(dir, "real"), filepath.Join(dir, "sim"), -1)
	errs := ""
	for _, e := range c.Errors {
		errs += e.Err.Error() + "\n"
	}
	if !strings.Contains(errs, "rank2_a.json: iteration \"0\"") || !strings.Contains(errs, "truncated") {
		t.Errorf("truncated file not named: %s", errs)
	}
	if !strings.Contains(errs, "rank 1 is also in") || !strings.Contains(errs, "rank1_b.json") {
		t.Errorf("duplicate rank not reported: %s", errs)
	}
	rows := map[int]RankComparison{}
	for _, rc := range c.Ranks {
		rows[rc.Rank] = rc
	}
	if rc := rows[0]; rc.Real == nil || rc.Sim == nil || !math.IsNaN(rc.PeakErrorPct) || !math.IsNaN(rc.CurveErrorPct) {
		t.Errorf("zero real peak must give no error figure: %+v", rc)
	}
	if rc := rows[1]; math.Abs(rc.PeakErrorPct-(-20)) > 1e-9 {
		t.Errorf("rank 1 peak error %v, want -20", rc.PeakErrorPct)
	}
	if rows[3].Real != nil || rows[3].Sim == nil || rows[4].Sim != nil || rows[4].Real == nil {
		t.Error("one-sided ranks not listed")
	}
	if !reflect.DeepEqual(c.Summary.Underestimated, []int{1}) || c.Summary.WorstRank != 1 {
		t.Errorf("summary %+v", c.Summary)
	}
	_, err := LoadDir(context.Background(), filepath.Join(dir, "empty"))
	if err == nil || !strings.Contains(err.Error(), "no trace files") || !strings.Contains(err.Error(), "memory_trace*.json") {
		t.Errorf("empty dir: %v", err)
	}
	// The parent holds two runs; the one named sim is the simulation.
	real, sim, note, err := SplitRuns(dir)
	if err != nil || filepath.Base(real) != "real" || filepath.Base(sim) != "sim" || note != "" {
		t.Errorf("SplitRuns: %q %q %q %v", real, sim, note, err)
	}
}

func TestSplitRunsMegatronNames(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"memory_traces_scaling/memory_trace_rank0.json": iter("1", "2"),
		"memory_traces/memory_trace_rank0.json":         iter("1", "2"),
	})
	real, sim, _, err := SplitRuns(dir)
	if err != nil || filepath.Base(real) != "memory_traces" || filepath.Base(sim) != "memory_traces_scaling" {
		t.Errorf("got %q %q %v", real, sim, err)
	}
}

func TestLogs(t *testing.T) {
	megatron := "" +
		"[2025-01-01 10:00:00] Theoretical memory footprints: weight and optimizer=40960.00 MB, activation=12000.50 MB, total=52960.50 MB\n" +
		"[Rank 0] (after 10 iterations) memory (MB) | allocated: 9554.87 | max allocated: 12003.60 | reserved: 12232.0 | max reserved: 12232.0\n" +
		"[Rank 1] (after 10 iterations) memory (MB) | allocated: 9554.87 | max allocated: 13003.60 | reserved: 14232.0 | max reserved: 14232.0\n" +
		" iteration 20/ 100 | ... \n" +
		"INFO:megatron: [Rank 0] (after 20 iterations) memory (MB) | allocated: 9554.870117 | max allocated: 12103.599609 | reserved: 12232.0 | max reserved: 12500.0 | total device memory used: 15000.0\n"
	ranks, err := ParseLog("train.log", []byte(megatron))
	if err != nil {
		t.Fatal(err)
	}
	if len(ranks) != 2 || ranks[0].Rank != 0 || ranks[1].Rank != 1 {
		t.Fatalf("ranks: %+v", ranks)
	}
	it := ranks[0].Iterations[0]
	if !reflect.DeepEqual(it.T, []float64{10, 20}) || !reflect.DeepEqual(it.Allocated, []float64{12003.60, 12103.599609}) ||
		!reflect.DeepEqual(it.Reserved, []float64{12232.0, 12500.0}) || it.Theoretical != 52960.50 || it.X != Steps {
		t.Errorf("rank 0 series: %+v", it)
	}

	titan := "" +
		"[rank0]:[titan] 2025-06-04 08:51:48,074 - root - INFO - \x1b[31mstep:  1  \x1b[32mloss: 12.2254  \x1b[33mmemory: 27.34GiB(28.78%)  \x1b[34mtps: 375\x1b[39m\n" +
		"[rank1]:[titan] 2025-06-04 08:51:48,074 - root - INFO - step:  1  loss: 12.2254  memory: 30.00GiB(31.58%)  tps: 375\n" +
		"[rank0]:[titan] 2025-06-04 08:52:48,074 - root - INFO - step:  2  loss: 11.0  memory: 28.00GiB(29.47%)  tps: 380\n"
	ranks, err = ParseLog("titan.log", []byte(titan))
	if err != nil {
		t.Fatal(err)
	}
	if len(ranks) != 2 {
		t.Fatalf("ranks %d", len(ranks))
	}
	it = ranks[0].Iterations[0]
	if !reflect.DeepEqual(it.T, []float64{1, 2}) || math.Abs(it.Reserved[0]-27.34*1024) > 1e-9 || it.Peak() != 28*1024 {
		t.Errorf("torchtitan series: %+v", it)
	}
	if format.Sniff([]byte(titan)) != format.TitanLog || format.Sniff([]byte(megatron)) != format.MegatronLog {
		t.Error("log kinds not sniffed")
	}
	if _, err := ParseLog("x.log", []byte("just a log\n")); err == nil || !strings.Contains(err.Error(), "no memory lines") {
		t.Errorf("log without memory lines: %v", err)
	}
}

func TestTorchtitanExport(t *testing.T) {
	rec := `{"step": %d, "timestamp": 1717000000.5, "device_mem_stats": {"max_active_gib": %g, "max_active_pct": 30.1,
	  "max_reserved_gib": %g, "max_reserved_pct": 33.0, "num_alloc_retries": %d, "num_ooms": 0, "new_stat": 1}, "metadata": {"loss": 2.5}}`
	mk := func(step int, a, r float64, retries int) string {
		s := strings.Replace(rec, "%d", itoa(step), 1)
		s = strings.Replace(s, "%g", jsonNum(a), 1)
		s = strings.Replace(s, "%g", jsonNum(r), 1)
		return strings.Replace(s, "%d", itoa(retries), 1)
	}
	for _, body := range []string{
		"[" + mk(2, 20.5, 24, 0) + "," + mk(1, 10, 12, 3) + "]",
		`{"history": [` + mk(2, 20.5, 24, 0) + "," + mk(1, 10, 12, 3) + `], "version": 1}`,
	} {
		r, err := ParseTorchtitanExport("rank3_memory.json", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		it := r.Iterations[0]
		if r.Rank != 3 || !reflect.DeepEqual(it.T, []float64{1, 2}) || it.Allocated[1] != 20.5*1024 || it.Reserved[0] != 12*1024 {
			t.Errorf("series: rank %d %+v", r.Rank, it)
		}
		w := strings.Join(r.Warnings, "|")
		if !strings.Contains(w, "3 allocation retries") || !strings.Contains(w, `"device_mem_stats.new_stat"`) {
			t.Errorf("warnings: %v", r.Warnings)
		}
	}
	if _, err := ParseTorchtitanExport("x.json", []byte(`{"a": 1}`)); err == nil {
		t.Error("an object without records should fail")
	}
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

func TestMinMaxKeepsPeaks(t *testing.T) {
	ys := make([]float64, 100000)
	for i := range ys {
		ys[i] = float64(i % 100)
	}
	ys[54321] = 1e6
	ys[77777] = -5
	idx := MinMax(ys, 30)
	if len(idx) > 60 {
		t.Fatalf("%d points for 30 buckets", len(idx))
	}
	var hasPeak, hasLow bool
	for i, j := range idx {
		if i > 0 && j <= idx[i-1] {
			t.Fatal("indices not ascending")
		}
		hasPeak = hasPeak || j == 54321
		hasLow = hasLow || j == 77777
	}
	if !hasPeak || !hasLow {
		t.Error("the global peak or trough was dropped")
	}
	mins, maxs := Columns(ys, 60)
	peak := math.Inf(-1)
	for c := range maxs {
		peak = math.Max(peak, maxs[c])
		if mins[c] > maxs[c] {
			t.Fatal("min above max")
		}
	}
	if peak != 1e6 {
		t.Errorf("columns lost the peak: %v", peak)
	}
	// Fewer samples than columns: every column still has a value.
	mins, _ = Columns([]float64{1, 2, 3}, 10)
	for c, v := range mins {
		if math.IsNaN(v) {
			t.Errorf("column %d empty", c)
		}
	}
}

// TestWriteMegatronMode: recordings are readable by the team (0644 less
// the umask), not 0600, and leave no temporary file behind.
func TestWriteMegatronMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "memory_trace_rank0.json")
	it := Iteration{Key: "0", T: []float64{0, 1}, Allocated: []float64{1, 2}, Reserved: []float64{2, 3},
		PeakAllocated: Unset, Static: Unset, Theoretical: Unset}
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	if err := WriteMegatron(p, []Iteration{it}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files left in the folder", len(ents))
	}
}

// TestPairOnlyByNumber: ranks pair by equal numbers, or as --pair says;
// one trace per side is not a reason to pair rank 0 with rank 3.
func TestPairOnlyByNumber(t *testing.T) {
	dir := t.TempDir()
	tr := `{"0": {"samples": [{"timestamp_s": 0, "allocated_memory_MB": 10}, {"timestamp_s": 1, "allocated_memory_MB": %d}]}}`
	writeFiles(t, dir, map[string]string{
		"real/memory_trace_rank0.json": fmt.Sprintf(tr, 100),
		"sim/memory_trace_rank3.json":  fmt.Sprintf(tr, 90),
	})
	load := func(p Pairing) *Comparison {
		r, err := LoadPath(context.Background(), dir+"/real")
		if err != nil {
			t.Fatal(err)
		}
		s, err := LoadPath(context.Background(), dir+"/sim")
		if err != nil {
			t.Fatal(err)
		}
		return Compare(r, s, -1, p)
	}
	if c := load(nil); c.Summary.Paired != 0 || len(c.Ranks) != 2 {
		t.Errorf("unpaired by default: %d rows, %d paired", len(c.Ranks), c.Summary.Paired)
	}
	p, err := ParsePairing("0:3")
	if err != nil {
		t.Fatal(err)
	}
	c := load(p)
	if c.Summary.Paired != 1 || len(c.Ranks) != 1 || c.Ranks[0].SimRank != 3 || c.Ranks[0].PeakErrorPct != -10 {
		t.Errorf("--pair 0:3: %+v", c.Ranks)
	}
	var buf bytes.Buffer
	if err := c.WriteText(&buf); err != nil || !strings.Contains(buf.String(), "    0:3 ") || !strings.Contains(buf.String(), "(--pair)") {
		t.Errorf("the row names both ranks:\n%s", buf.String())
	}
	if c := load(Pairing{0: 5}); c.Summary.Paired != 0 || !strings.Contains(strings.Join(c.Notes, "|"), "no such") {
		t.Errorf("a pair naming a missing rank is said: %v", c.Notes)
	}
	for _, bad := range []string{"0", "a:b", "0:1,0:2", "0:1,2:1", "-1:0"} {
		if _, err := ParsePairing(bad); err == nil {
			t.Errorf("ParsePairing(%q) accepted", bad)
		}
	}
}

// TestNonFiniteSamples: NaN, null, missing and infinite times or values are
// skipped with a warning, the JSON always encodes, and an infinite value is
// neither a peak nor an underestimate.
func TestNonFiniteSamples(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"real/memory_trace_rank0.json": `{"0": {"samples": [{"timestamp_s": 0, "allocated_memory_MB": 10},
			{"timestamp_s": NaN, "allocated_memory_MB": 500}, {"timestamp_s": null, "allocated_memory_MB": 500},
			{"allocated_memory_MB": 500}, {"timestamp_s": 2, "allocated_memory_MB": Infinity},
			{"timestamp_s": 3, "allocated_memory_MB": 100}]}}`,
		"sim/memory_trace_rank0.json": `{"0": {"samples": [{"timestamp_s": 0, "allocated_memory_MB": 10}, {"timestamp_s": -Infinity, "allocated_memory_MB": 5},
			{"timestamp_s": 1, "allocated_memory_MB": 90, "reserved_memory_MB": Infinity}]}}`,
	})
	r, _ := LoadPath(context.Background(), dir+"/real")
	s, _ := LoadPath(context.Background(), dir+"/sim")
	c := Compare(r, s, -1, nil)
	rc := c.Ranks[0]
	if rc.Real.Samples != 2 || rc.Real.Peak != 100 || rc.Real.Duration != 3 || rc.Sim.Samples != 2 || !math.IsNaN(rc.Sim.MaxReserved) {
		t.Errorf("skipped samples: %+v %+v", rc.Real, rc.Sim)
	}
	if !strings.Contains(strings.Join(rc.Real.Warnings, "|"), "4 samples without a finite") {
		t.Errorf("warnings: %v", rc.Real.Warnings)
	}
	if len(c.Summary.Underestimated) != 1 || rc.PeakErrorPct != -10 {
		t.Errorf("peak error %v underestimated %v", rc.PeakErrorPct, c.Summary.Underestimated)
	}
	var buf bytes.Buffer
	if err := c.WriteJSON(&buf); err != nil || !json.Valid(buf.Bytes()) {
		t.Errorf("JSON: %v\n%s", err, buf.String())
	}
}

// TestTimeColumns: columns follow time, not sample count.
func TestTimeColumns(t *testing.T) {
	// Two samples at a plateau held for 80% of the iteration.
	ts := []float64{10, 10.1, 10.9, 11}
	ys := []float64{0, 100, 100, 0}
	got := TimeColumns(ts, ys, 10, 10, 1)
	for c := 1; c <= 8; c++ {
		if got[c] != 100 {
			t.Errorf("column %d = %v, want the plateau 100 (%v)", c, got[c], got)
		}
	}
	if got[0] != 100 || got[9] != 100 {
		// the columns at the ramps reach the plateau at their inner edge
		t.Errorf("ramp columns: %v", got)
	}
	// Index-based columns make a triangle of it.
	if _, idx := Columns(ys, 10); idx[0] != 0 || idx[9] != 0 {
		t.Errorf("Columns is by index: %v", idx)
	}
	// A series half as long leaves the second half empty.
	half := TimeColumns([]float64{0, 0.25, 0.5}, []float64{1, 2, 1}, 10, 0, 1)
	for c := 0; c < 10; c++ {
		if empty := math.IsNaN(half[c]); empty != (c > 5) {
			t.Errorf("column %d empty=%v: %v", c, empty, half)
		}
	}
	// A peak between column edges is kept; NaN samples are ignored.
	pk := TimeColumns([]float64{0, 0.55, 1}, []float64{0, 50, math.NaN()}, 4, 0, 1)
	if pk[2] != 50 {
		t.Errorf("the sample peak lands in its column: %v", pk)
	}
	if z := TimeColumns([]float64{5}, []float64{7}, 3, 5, 0); z[0] != 7 || !math.IsNaN(z[1]) {
		t.Errorf("zero span: %v", z)
	}
}

// TestLogsAsLaunchersWriteThem reads the fixtures of
// scripts/gen_log_fixtures.py: every rank keeps its own series whatever
// wraps its lines.
func TestLogsAsLaunchersWriteThem(t *testing.T) {
	const dir = "../testdata/traces/logs/"
	type want struct {
		steps         []float64
		alloc, res    []float64 // MiB; nil: not checked
		theoretical   float64
		warningSubstr string
	}
	gib := func(v ...float64) []float64 {
		for i := range v {
			v[i] *= 1024
		}
		return v
	}
	cases := []struct {
		file  string
		ranks map[int]want
	}{
		{"megatron_torchrun.log", map[int]want{
			0: {steps: []float64{10, 20}, alloc: []float64{12010, 12020}, res: []float64{14000, 14000}, theoretical: 52960.50},
			1: {steps: []float64{10, 20}, alloc: []float64{12110, 12120}, res: []float64{14100, 14100}, theoretical: 52960.50},
			2: {steps: []float64{10, 20}, alloc: []float64{12210, 12220}},
			3: {steps: []float64{10, 20}, alloc: []float64{12310, 12320}},
		}},
		{"megatron_logger.log", map[int]want{
			0: {steps: []float64{10, 20}, alloc: []float64{11010, 11020}, theoretical: 49960},
			1: {steps: []float64{10, 20}, alloc: []float64{11060, 11070}, theoretical: 49960},
		}},
		{"titan_srun.log", map[int]want{
			2: {steps: []float64{1, 2, 3, 9}, res: gib(22.1, 22.2, 22.3, 99)},
			3: {steps: []float64{1, 2, 3}, res: gib(23.1, 23.2, 23.3)},
		}},
		{"titan_default.log", map[int]want{
			0: {steps: []float64{10, 20}, alloc: gib(28.1, 28.2), res: gib(30, 30), warningSubstr: "2 validation/evaluation lines"},
			1: {steps: []float64{10, 20}, alloc: gib(29.1, 29.2), res: gib(31, 31)},
		}},
		{"megatron_theory_only.log", map[int]want{0: {theoretical: 49960, warningSubstr: "only the theoretical"}}},
	}
	near := func(a, b []float64) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-6 {
				return false
			}
		}
		return true
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			if k, err := format.SniffFile(dir + c.file); err != nil || !k.IsTrace() {
				t.Fatalf("not recognised as a log: %q %v", k, err)
			}
			ranks, err := ReadFile(dir + c.file)
			if err != nil {
				t.Fatal(err)
			}
			if len(ranks) != len(c.ranks) {
				t.Fatalf("%d ranks, want %d", len(ranks), len(c.ranks))
			}
			for _, r := range ranks {
				w, ok := c.ranks[r.Rank]
				if !ok {
					t.Errorf("unexpected rank %d", r.Rank)
					continue
				}
				it := r.Iterations[0]
				if !near(it.T, w.steps) || (w.alloc != nil && !near(it.Allocated, w.alloc)) || (w.res != nil && !near(it.Reserved, w.res)) {
					t.Errorf("rank %d: steps %v alloc %v res %v", r.Rank, it.T, it.Allocated, it.Reserved)
				}
				if w.theoretical != 0 && it.Theoretical != w.theoretical {
					t.Errorf("rank %d: theoretical %v, want %v", r.Rank, it.Theoretical, w.theoretical)
				}
				if w.warningSubstr != "" && !strings.Contains(strings.Join(r.Warnings, "|"), w.warningSubstr) {
					t.Errorf("rank %d warnings %v lack %q", r.Rank, r.Warnings, w.warningSubstr)
				}
			}
		})
	}
}

// TestLogAfterLongPreamble: a log whose first memory line comes after more
// than one sniffing chunk is found in a directory and read when named.
func TestLogAfterLongPreamble(t *testing.T) {
	line := "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0 | reserved: 3.0 | max reserved: 4.0\n"
	noise := strings.Repeat("NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P/IPC/read\n", 1+2*format.SniffWindow/56)
	for _, c := range []struct {
		name   string
		body   string
		wantOK bool
	}{
		{"just inside the first read", strings.Repeat("x\n", 1000) + line, true},
		{"past two chunks", noise + line, true},
		{"straddling the first chunk edge", noise[:format.SniffWindow-41] + "\n" + line, true},
		{"no memory line at all", noise, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "train.log")
			if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			files, _ := FindFiles(dir)
			if got := len(files) == 1; got != c.wantOK {
				t.Errorf("found in a directory: %v, want %v", got, c.wantOK)
			}
			ranks, err := ReadFile(p)
			if (err == nil) != c.wantOK {
				t.Fatalf("read when named: %v", err)
			}
			if c.wantOK && ranks[0].Iterations[0].Peak() != 2 {
				t.Errorf("series: %+v", ranks[0].Iterations[0])
			}
		})
	}
}

// TestTorchtitanExportsAsWritten reads the fixtures of
// scripts/gen_titan_exports.py: json.dump's namedtuple arrays, NaN and
// Infinity, the memory_tracker layout with its peak allocated field.
func TestTorchtitanExportsAsWritten(t *testing.T) {
	const dir = "../testdata/traces/titan/"
	for _, f := range []string{"collector_rank2_memory.json", "memory_tracker_rank1.json"} {
		if k, err := format.SniffFile(dir + f); k != format.TitanExport || err != nil {
			t.Errorf("%s sniffed as %q (%v)", f, k, err)
		}
	}
	ranks, err := ReadFile(dir + "collector_rank2_memory.json")
	if err != nil {
		t.Fatal(err)
	}
	r := ranks[0]
	it := r.Iterations[0]
	if r.Rank != 2 || !reflect.DeepEqual(it.T, []float64{1, 2, 3, 4}) || it.Allocated[0] != 21*1024 || it.Reserved[3] != 28*1024 || it.Active != nil {
		t.Errorf("collector: rank %d %+v", r.Rank, it)
	}
	if len(it.Marks) != 2 || it.Marks[0].X != 2 || it.Marks[0].OOM || it.Marks[1].X != 4 || !it.Marks[1].OOM {
		t.Errorf("marks: %+v", it.Marks)
	}
	w := strings.Join(r.Warnings, "|")
	if !strings.Contains(w, "step 2: 3 allocation retries") || !strings.Contains(w, "step 4: 1 OOMs") || strings.Contains(w, "not understood") {
		t.Errorf("warnings: %v", r.Warnings)
	}

	ranks, err = ReadFile(dir + "memory_tracker_rank1.json")
	if err != nil {
		t.Fatal(err)
	}
	r, it = ranks[0], ranks[0].Iterations[0]
	if r.Rank != 1 || !reflect.DeepEqual(it.T, []float64{10, 20, 30}) || it.Allocated[1] != 34*1024 || it.Active[1] != 32*1024 ||
		it.Reserved[2] != 39*1024 || it.Peak() != 35*1024 || len(r.Warnings) != 0 {
		t.Errorf("memory_tracker: rank %d %+v %v", r.Rank, it, r.Warnings)
	}

	// Stats arrays of another length are refused with the file's position.
	if _, err := ParseTorchtitanExport("x.json", []byte(`[{"step": 1, "device_mem_stats": [1, 2, 3]}]`)); err == nil ||
		!strings.Contains(err.Error(), "records[0].device_mem_stats: an array of 3 values") {
		t.Errorf("short stats array: %v", err)
	}
}

// TestStepSeriesHaveNoDuration: logs count steps, not seconds: no duration
// and no duration ratio.
func TestStepSeriesHaveNoDuration(t *testing.T) {
	r, err := LoadPath(context.Background(), "../testdata/traces/logs/megatron_torchrun.log")
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadPath(context.Background(), "../testdata/traces/logs/megatron_logger.log")
	if err != nil {
		t.Fatal(err)
	}
	c := Compare(r, s, -1, nil)
	rc := c.Ranks[0]
	if !math.IsNaN(rc.Real.Duration) || !math.IsNaN(rc.DurationRatio) || math.IsNaN(rc.PeakErrorPct) {
		t.Errorf("steps: duration %v ratio %v error %v", rc.Real.Duration, rc.DurationRatio, rc.PeakErrorPct)
	}
	var buf bytes.Buffer
	if err := c.WriteJSON(&buf); err != nil || !strings.Contains(buf.String(), `"duration_s": null`) {
		t.Errorf("JSON: %v", err)
	}
}

// TestSecondsRoundToMicroseconds: time fields of the JSON carry the
// samples' precision, not float noise.
func TestSecondsRoundToMicroseconds(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{{0.8499999999999996, "0.85"}, {0.4642, "0.4642"}, {1.0000004, "1"}, {1.0000006, "1.000001"}, {math.NaN(), "null"}} {
		b, _ := json.Marshal(secondsOrNil(c.in))
		if string(b) != c.want {
			t.Errorf("%v: %s, want %s", c.in, b, c.want)
		}
	}
}
