package snapshot

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFrameFilterIsMemoryViz holds IsNoise to the lists of frameFilter in
// PyTorch's torch/utils/viz/MemoryViz.js (copied here from upstream, not
// from our code): a frame is hidden when its function name contains one of
// omitFunctions or its file name one of omitFilenames.
func TestFrameFilterIsMemoryViz(t *testing.T) {
	omitFunctions := []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
		"__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"}
	omitFilenames := []string{"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
		"Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"}
	if !slices.Equal(noiseNames, omitFunctions) || !slices.Equal(noiseFiles, omitFilenames) {
		t.Fatalf("the frame filter drifted from memory_viz's:\n%q\n%q", noiseNames, noiseFiles)
	}
	for _, n := range omitFunctions {
		if !IsNoise(Frame{Filename: "x.cpp", Name: "ns::" + n + "(int)"}) {
			t.Errorf("function %q is not hidden", n)
		}
	}
	for _, f := range omitFilenames {
		if !IsNoise(Frame{Filename: "/src/" + f + "x.cpp", Name: "f"}) {
			t.Errorf("file %q is not hidden", f)
		}
	}
	// memory_viz matches "/Register" with its slash: PyTorch 2.11 writes
	// bare "RegisterCUDA_0.cpp", which it shows.
	if IsNoise(Frame{Filename: "RegisterCUDA_0.cpp", Name: "at::(anonymous namespace)::create_out"}) {
		t.Error("a bare RegisterCUDA_0.cpp is shown by memory_viz")
	}
}

func TestSiteIndex(t *testing.T) {
	cases := []struct {
		name  string
		stack Stack
		want  int
	}{
		{"the user's line, not torch's einsum (MAGMA27)", frames(`D:\proj\.venv\Lib\site-packages\torch\functional.py|einsum`,
			`D:\proj\.venv\Lib\site-packages\einops\einops.py|einsum`, `D:\proj\cs336_basics\model.py|forward`), 2},
		{"C++ + Python: the user frame past the dispatcher", frames(cat(allocCpp, forwardPy)...), 6},
		{"a venv under /opt/torch is not torch", frames("/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/module.py|convert",
			"/opt/torch/train.py|main"), 1},
		{"a torch source checkout is torch", frames("/src/pytorch/torch/nn/modules/module.py|_call_impl", "/src/proj/model.py|forward"), 1},
		{"the standard library is not the user's", frames("/usr/lib/python3.12/threading.py|run", "/home/u/train.py|worker"), 1},
		{"only library Python: the innermost Python frame", frames(cat(allocCpp, []string{sp + "torch/nn/functional.py|linear",
			sp + "transformers/models/qwen2/modeling_qwen2.py|forward"})...), 5},
		{"C++ only (autograd engine): the autograd node", frames(cat(allocCpp, engineCpp)...), 5},
		{"C++ only, no node: the first frame that is neither plumbing nor dispatcher", frames(append(allocCpp,
			"VariableType_3.cpp|torch::autograd::VariableType::mm()", "??|at::native::linear(at::Tensor const&)")...), 6},
		{"the profiler's hook is never the site", frames(sp+"memory_profiler/core/memory_dispatch_mode.py|track_tensor_memory",
			sp+"torch/utils/_python_dispatch.py|__torch_dispatch__", "/home/u/train.py|main"), 2},
		{"only hidden frames: none", frames("??|torch::unwind::unwind()", "ceval.c|_PyEval_EvalFrameDefault"), -1},
		{"no frames", Stack{}, -1},
		{"a notebook cell is the user's", frames(sp+"torch/nn/functional.py|relu", "<ipython-input-3-abc>|<module>"), 1},
		{"frozen modules are the interpreter's", frames("<frozen runpy>|_run_code", "/home/u/train.py|main"), 1},
	}
	for _, tc := range cases {
		if got := SiteIndex(tc.stack); got != tc.want {
			t.Errorf("%s: %d, want %d (%v)", tc.name, got, tc.want, Site(tc.stack))
		}
	}
}

func TestSiteTextAndOp(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"at::native::mm(at::Tensor const&, at::Tensor const&)", "at::native::mm"},
		{"at::Tensor::sum(c10::optional<long>) const", "at::Tensor::sum"},
		{"at::(anonymous namespace)::create_out(c10::ArrayRef<long>)", "at::(anonymous namespace)::create_out"},
		{"torch::autograd::Node::operator()(std::vector<at::Tensor>&&)", "torch::autograd::Node::operator()"},
		{"c10::impl::wrap<at::Tensor (at::Tensor const&)>::call(at::Tensor const&)", "c10::impl::wrap::call"},
		{"void at::native::gpu_reduce_kernel<float, 4>(at::TensorIterator&, double, long) [clone .isra.0]", "at::native::gpu_reduce_kernel"},
		{"at::Tensor at::_sum_to<c10::SymInt>(at::Tensor, bool)", "at::_sum_to"},
		{"at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_mm(at::Tensor const&)", "at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_mm"},
		{"bool operator<(a const&, b const&)", "bool operator<"},
		{"f<int", "f<int"},
		{"__clone", "__clone"},
		{"(broken", "(broken"},
		{"()", "()"},
	} {
		if got := cppName(tc.in); got != tc.want {
			t.Errorf("cppName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := SiteText(Frame{Filename: "??", Name: "at::native::mm(at::Tensor const&)"}); got != "at::native::mm" {
		t.Errorf("SiteText of an unknown-file C++ frame = %q", got)
	}
	if got := SiteText(Frame{Filename: "/a/b.py", Line: 3, Name: "f"}); got != "/a/b.py:3 f" {
		t.Errorf("SiteText of a Python frame = %q", got)
	}
	for _, tc := range []struct {
		stack Stack
		want  string
	}{
		{frames(cat(allocCpp, forwardPy)...), "aten::mm"},
		{frames("??|at::_ops::empty_memory_format::call()", "??|at::native::layer_norm_backward_cuda()",
			"??|at::_ops::native_layer_norm_backward::call()"), "aten::native_layer_norm_backward"},
		{frames("??|at::_ops::empty_memory_format::call()", "/home/u/train.py|main"), "aten::empty_memory_format"},
		{frames(forwardPy...), "torch/nn/functional.py:10 linear"},
		{frames("/home/u/train.py|main"), ""},
	} {
		if got := Op(tc.stack); got != tc.want {
			t.Errorf("Op = %q, want %q", got, tc.want)
		}
	}
}

// TestSitesOnSamples: on every real snapshot, no site is a frame
// memory_viz hides, and a stack with a frame of the user's own code has it
// as its site, at the snapshot and at the peak.
func TestSitesOnSamples(t *testing.T) {
	var paths []string
	for _, g := range []string{"../testdata/snapshots/*.pickle", "../testdata/snapshots/h200/*.pickle",
		"../testdata/snapshots/h200/*.gz", "../testdata/snapshots/h100/*.gz"} {
		m, _ := filepath.Glob(g)
		paths = append(paths, m...)
	}
	if len(paths) < 10 {
		t.Fatalf("only %d samples", len(paths))
	}
	checked := 0
	for _, p := range paths {
		a := analyzeFile(t, p)
		for i := range a.Devices {
			d := &a.Devices[i]
			for _, al := range append(slices.Clone(d.Allocations), a.PeakLive(d)...) {
				k := SiteIndex(al.Frames)
				if k < 0 {
					continue
				}
				checked++
				f := al.Frames.At(k)
				if IsNoise(*f) || IsProfilerFrame(*f) {
					t.Fatalf("%s: site %v is a hidden frame", p, f)
				}
				user := al.Frames.IndexFunc(func(f *Frame) bool { return classifySite(*f) == kindUser })
				if user >= 0 && user != k {
					t.Fatalf("%s: site %v, but the user's own frame %v is in the stack", p, f, al.Frames.At(user))
				}
			}
		}
	}
	a := analyzeFile(t, "../testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle")
	d := &a.Devices[0]
	for _, al := range a.PeakLive(d) {
		if s := Site(al.Frames); strings.Contains(s, "site-packages") {
			t.Errorf("MAGMA27: site %q is library code", s)
		}
	}
	if s := d.Allocations[0].Location(); !strings.Contains(s, `cs336_basics\model.py:39 forward`) {
		t.Errorf("MAGMA27's largest block: site %q, want cs336_basics/model.py:39", s)
	}
	if checked == 0 {
		t.Fatal("no site checked")
	}
}

// TestOpLeavesFramesAlone: stacks point at frames shared across the
// snapshot, so formatting one (Op shortens torch's path) must not change
// it for every other stack.
func TestOpLeavesFramesAlone(t *testing.T) {
	path := "/usr/lib/python3/site-packages/torch/nn/functional.py"
	st := StackOf(Frame{Filename: path, Line: 2380, Name: "layer_norm"}, Frame{Filename: "/w/train.py", Line: 9, Name: "main"})
	other := NewStack(st.Table(), []uint32{st.ID(0)})
	for range 2 {
		if got, want := Op(st), "torch/nn/functional.py:2380 layer_norm"; got != want {
			t.Fatalf("Op = %q, want %q", got, want)
		}
	}
	if other.At(0).Filename != path || st.At(0).Filename != path {
		t.Errorf("the shared frame now says %q", other.At(0).Filename)
	}
}

// TestNumberSites: each stack's site number names the text of its site
// frame (sitePos), the same number for frames of one text (a C++ overload
// in two files' lines that read alike, a Python frame met again in another
// stack); site 0 for none, for a frame with no text and for one whose text
// is noStack's; the texts numbered in the order stacks first name them,
// each once, and each found by its text. Stacks share one frame table, as
// the decoder's do, and some hold frames of their own. With few frames
// and with many (on one goroutine and on several: both sides of
// sitesPerWorker, and past maxSiteShards), the same numbers on any number
// of goroutines.
func TestNumberSites(t *testing.T) {
	for _, many := range []int{0, 4 * sitesPerWorker} {
		table := &FrameTable{Frames: []Frame{
			{Filename: "/src/train.py", Line: 10, Name: "step"},
			{Filename: "/src/model.py", Line: 3, Name: "forward"},
			{Filename: "??", Name: "void at::native::add<float>(int)"},
			{Filename: "??", Name: "void at::native::add<double>(int)"}, // the same text
			{Filename: "/src/train.py", Line: 11, Name: "step"},
			{Filename: "", Name: ""},        // no text
			{Filename: "??", Name: noStack}, // noStack's text
		}}
		for i := range many {
			table.Frames = append(table.Frames, Frame{Filename: "??", Name: fmt.Sprintf("void ns::f%d<T%d>(int)", i/3, i%3)}) // three of a text
		}
		rng := rand.New(rand.NewPCG(3, 5))
		var stacks []Stack
		var byStack []stackTraits
		for range 2000 + 2*many {
			var st Stack
			if rng.IntN(10) == 0 {
				st = StackOf(Frame{Filename: "/own.py", Line: int64(rng.IntN(3)), Name: "own"})
			} else {
				ids := make([]uint32, 1+rng.IntN(4))
				for i := range ids {
					ids[i] = uint32(rng.IntN(len(table.Frames)))
				}
				st = NewStack(table, ids)
			}
			stacks = append(stacks, st)
			byStack = append(byStack, stackTraits{sitePos: int32(rng.IntN(st.Len() + 1))})
		}
		var first siteNumbers
		for _, c := range []struct{ procs, perWorker, shards int }{
			{1, sitesPerWorker, 1},
			{2, sitesPerWorker, 1 + min(1, many)},
			{3, sitesPerWorker, 1 + min(2, many)}, // many frames: 3 workers' worth
			// Past maxSiteShards goroutines, that many.
			{maxSiteShards + 1, 1, maxSiteShards},
		} {
			name := fmt.Sprintf("%d frames, %d goroutines of %d", len(table.Frames), c.procs, c.perWorker)
			n := numberSitesOn(byStack, stacks, c.procs, c.perWorker)
			checkSites(t, name, n, byStack, stacks)
			if c.procs == 1 {
				first = n
			} else if !slices.Equal(n.id, first.id) || !slices.Equal(n.name, first.name) {
				t.Errorf("%s: not the numbers one goroutine gives", name)
			}
			if len(n.index.shards) != c.shards {
				t.Errorf("%s: %d shards, want %d", name, len(n.index.shards), c.shards)
			}
		}
	}
}

func checkSites(t *testing.T, name string, n siteNumbers, byStack []stackTraits, stacks []Stack) {
	t.Helper()
	var order []string
	seen := map[string]bool{}
	for k, st := range stacks {
		want := noStack
		if p := byStack[k].sitePos; p > 0 {
			if text := SiteText(*st.At(int(p - 1))); text != "" {
				want = text
			}
		}
		if got := n.name[n.id[k]]; got != want {
			t.Fatalf("%s: stack %d: site %q, want %q", name, k, got, want)
		}
		if want == noStack && n.id[k] != 0 {
			t.Fatalf("%s: stack %d: %q is site %d", name, k, want, n.id[k])
		}
		if want != noStack && !seen[want] {
			seen[want] = true
			order = append(order, want)
		}
	}
	if !slices.Equal(n.name[1:], order) {
		t.Fatalf("%s: sites %q, want %q (in the order stacks name them)", name, n.name[1:], order)
	}
	for id, text := range n.name {
		if got, ok := n.index.find(text); !ok || got != int32(id) {
			t.Errorf("%s: index: %q is site %d (%v), want %d", name, text, got, ok, id)
		}
	}
	if _, ok := n.index.find("not a site"); ok {
		t.Errorf("%s: index: a text no frame has is found", name)
	}
	if n.index.len() != len(n.name) {
		t.Errorf("%s: %d texts indexed, %d sites", name, n.index.len(), len(n.name))
	}
}
