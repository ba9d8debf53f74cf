package estimate

import (
	"context"
	"os"
	"strings"
	"testing"

	"memscope/format"
	"memscope/snapshot"
)

func TestEstimateSample(t *testing.T) {
	e, err := Open(context.Background(), "../../testdata/estimates/SYNTHETIC_peak_snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(e, nil)
	d := a.Device("cuda:0")
	if d == nil || d.Tensors != 3 || d.PeakBytes != 1536<<20 || d.ListedBytes != 770<<20 || d.UnlistedBytes != 766<<20 {
		t.Fatalf("device: %+v", d)
	}
	// Frames are innermost first; the source line is kept.
	top := d.Allocations[0]
	if top.Frames.At(0).Name != "__init__" || top.Frames.At(0).Line != 800 || !strings.Contains(top.Frames.Source(0), "Parameter(torch.empty(") {
		t.Errorf("create stack: %+v", top.Frames)
	}
	if d.Allocations[1].ReleaseFrames().Len() != 1 {
		t.Errorf("release stack: %+v", d.Allocations[1].ReleaseFrames())
	}
	if d.Modules[0].Pattern != "GPTModel.decoder.layers.*.mlp.linear_fc1" || d.Modules[0].Instances != 2 || d.Modules[0].Bytes != 768<<20 {
		t.Errorf("merged modules: %+v", d.Modules)
	}
	// Unknown-module tensors are kept in their phase.
	var fb PhaseTotal
	for _, p := range d.Phases {
		if p.Name == "forward_backward_iter_0" {
			fb = p
		}
	}
	if fb.Tensors != 2 || fb.Bytes != 258<<20 {
		t.Errorf("phase with an Unknown-module tensor: %+v", fb)
	}
	// The module tree is root first.
	if n := d.ModuleTree.Children[0]; n.Label != "GPTModel" || n.Bytes != 768<<20 {
		t.Errorf("module tree root: %+v", n)
	}
}

func TestEstimateBadInput(t *testing.T) {
	cases := []struct {
		name, data, want string
		isErr            bool
	}{
		{"missing size", `{"cuda:0": {"peak_memory_mb": 1, "tensors": [{"module": "a"}]}}`, "no usable size", true},
		{"size from size_mb", `{"cuda:0": {"peak_memory_mb": 10, "tensors": [{"size_mb": 2.0}]}}`, "no size_bytes; size_mb used", false},
		{"sizes disagree", `{"cuda:0": {"peak_memory_mb": 10, "tensors": [{"size_bytes": 1048576, "size_mb": 5.0}]}}`, "disagrees with size_mb", false},
		{"stacks not frames", `{"cuda:0": {"peak_memory_mb": 10, "tensors": [{"size_bytes": 1048576, "create_stack_trace": ["hello", 3]}]}}`, "not stack frame strings", false},
		{"non-object device", `{"cuda:0": [1, 2], "cuda:1": {"peak_memory_mb": 1, "tensors": []}}`, `device "cuda:0" is not an object`, false},
		{"truncated", `{"cuda:0": {"peak_memory_mb": 1, "tensors": [{"size_bytes": 10`, "truncated", true},
		{"tensors not a list", `{"cuda:0": {"tensors": 5}}`, "tensors: expected a list", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := Decode(context.Background(), []byte(c.data))
			if c.isErr {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("error %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w := strings.Join(e.Warnings, "|"); !strings.Contains(w, c.want) {
				t.Errorf("warnings %q lack %q", w, c.want)
			}
		})
	}
	// A peak below the listed sum is reported, never negative.
	e, err := Decode(context.Background(), []byte(`{"cuda:0": {"peak_memory_mb": 1, "tensors": [{"size_bytes": 4194304}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := Analyze(e, nil).Devices[0]
	if !d.PeakBelowListed || d.UnlistedBytes != 0 {
		t.Errorf("peak below listed: %+v", d)
	}
}

func TestPhaseOrder(t *testing.T) {
	names := []string{"optimizer_step_iter_10", "forward_backward_iter_2", "initialization", "zzz",
		"forward_backward_iter_10", "optimizer_step_iter_2", "setup_model_and_optimizer"}
	want := []string{"initialization", "setup_model_and_optimizer", "forward_backward_iter_2", "optimizer_step_iter_2",
		"forward_backward_iter_10", "optimizer_step_iter_10", "zzz"}
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if comparePhases(names[j], names[i]) < 0 {
				names[i], names[j] = names[j], names[i]
			}
		}
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("got %v", names)
	}
}

func TestMergedPattern(t *testing.T) {
	for in, want := range map[string]string{
		"GPTModel.decoder.layers.12.mlp.linear_fc1": "GPTModel.decoder.layers.*.mlp.linear_fc1",
		"model.layers.3.experts.7.w1":               "model.layers.*.experts.*.w1",
		"Unknown":                                   "Unknown",
		"layer1.conv2":                              "layer1.conv2",
	} {
		if got := MergedPattern(in); got != want {
			t.Errorf("%s: %s", in, got)
		}
	}
}

func FuzzDecodeEstimate(f *testing.F) {
	f.Add([]byte(`{"cuda:0": {"peak_memory_mb": 10, "tensors": [{"size_bytes": 1048576, "size_mb": 1.0, "shape": "torch.Size([1])", "module": "a.0.b", "phase": "initialization", "create_stack_trace": ["  File \"x.py\", line 3, in f\n    y = g()\n"], "release_stack_trace": []}]}}`))
	f.Add([]byte(`{"cuda:1": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(context.Background(), data)
		if err != nil {
			return
		}
		for _, d := range Analyze(e, nil).Devices {
			if d.UnlistedBytes < 0 {
				t.Fatal("negative unlisted")
			}
		}
	})
}

// TestEstimatesAsTheProfilerWritesThem uses the file the profiler's own
// writer produced: its hook frames never name a tensor's origin, lambda
// frames make nothing Optimizer State, Unknown modules split by phase.
func TestEstimatesAsTheProfilerWritesThem(t *testing.T) {
	e, err := Open(context.Background(), "../../testdata/estimates/WRITER_tiny_gpt_cpu_peak_snapshot.json")
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(e, nil)
	d := &a.Devices[0]
	for _, al := range d.Allocations {
		loc := al.Location()
		if loc == "" || strings.Contains(loc, "memory_profiler") || strings.Contains(loc, "_pytree") || strings.Contains(loc, "dispatch") || strings.Contains(loc, "<lambda>") {
			t.Errorf("location names the profiler: %q", loc)
		}
		i := al.LocationIndex()
		if i < 0 || snapshot.IsProfilerFrame(*al.Frames.At(i)) {
			t.Errorf("location frame %d is the profiler's", i)
		}
		if al.Category == "Optimizer State" {
			if f := al.Frames.At(int(al.CategoryFrame)); !strings.Contains(f.Filename, "optim") {
				t.Errorf("Optimizer State decided by %s %s", f.Filename, f.Name)
			}
		}
		if al.CategoryFrame >= 0 && snapshot.IsProfilerFrame(*al.Frames.At(int(al.CategoryFrame))) {
			t.Errorf("category decided by a profiler frame: %+v", al.Frames.At(int(al.CategoryFrame)))
		}
	}
	var unknown int64
	for _, m := range d.Modules {
		if m.Pattern == "Unknown" {
			t.Error("Unknown modules form one row")
		}
		if strings.HasPrefix(m.Pattern, "Unknown (") {
			unknown += m.Bytes
		}
	}
	var want int64
	for _, al := range d.Allocations {
		if al.Module() == "Unknown" {
			want += al.Size
		}
	}
	if unknown != want || want == 0 {
		t.Errorf("Unknown rows by phase sum to %d, Unknown tensors %d", unknown, want)
	}
}

// TestEstimateShapes: device order, the empty file, the earlier key name.
func TestEstimateShapes(t *testing.T) {
	e, err := Decode(context.Background(), []byte(`{"cpu": {"peak_memory_mb": 1, "tensors": []}, "cuda:10": {"peak_memory_mb": 1, "tensors": []},
		"cuda:2": {"peak_memory_mb": 1, "tensors": [{"size_bytes": 1048576, "stack_trace": ["  File \"model.py\", line 7, in f\n    x = g()\n"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, d := range e.Devices {
		order = append(order, d.Device)
	}
	if strings.Join(order, ",") != "cuda:2,cuda:10,cpu" {
		t.Errorf("device order %v, want GPUs first by number", order)
	}
	if st := e.Devices[0].Tensors[0].Create; st.Len() != 1 || st.At(0).Filename != "model.py" || st.At(0).Line != 7 {
		t.Errorf("stack_trace is read as the creation stack: %+v", st)
	}
	for _, body := range []string{"{}", " {\n}\n"} {
		if k := format.Sniff([]byte(body)); k != format.Estimate {
			t.Errorf("%q sniffed as %q", body, k)
		}
		e, err := Decode(context.Background(), []byte(body))
		if err != nil || len(e.Devices) != 0 {
			t.Errorf("%q: %v %+v", body, err, e)
		}
	}
	dir := t.TempDir()
	for name, want := range map[string]format.Kind{"peak_snapshot.json": format.Estimate, "memory_trace_rank0.json": format.MegatronTrace} {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if k, _ := format.SniffFile(p); k != want {
			t.Errorf("{} named %s sniffed as %q, want %q", name, k, want)
		}
	}
}
