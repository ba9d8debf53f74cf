package snapshot

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"memscope/snapshot/schema"
)

// truthFile is what gpt_adamw.truth.json holds: every live tensor at the
// dump, read from the objects themselves ([data_ptr, storage bytes, role,
// name]).
type truthFile struct {
	Tensors [][4]any `json:"tensors"`
}

func analyzeFile(t *testing.T, path string) *Analysis {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return Analyze(s, nil)
}

// TestRolesMatchObjectTruth joins the truth's data_ptr with the active
// blocks' addresses: the bytes of every parameter, gradient and optimizer
// state must land in that role (≥ 99% each), and so must the batch (Input).
func TestRolesMatchObjectTruth(t *testing.T) {
	for _, name := range []string{"gpt_adamw", "cnn_sgd", "gpt_ckpt"} {
		t.Run(name, func(t *testing.T) { rolesMatchTruth(t, name) })
	}
}

func rolesMatchTruth(t *testing.T, name string) {
	raw, err := os.ReadFile("../testdata/snapshots/h100/" + name + ".truth.json")
	if err != nil {
		t.Fatal(err)
	}
	var truth truthFile
	if err := json.Unmarshal(raw, &truth); err != nil {
		t.Fatal(err)
	}
	a := analyzeFile(t, "../testdata/snapshots/h100/"+name+".pickle.gz")
	byAddr := map[uint64]*Allocation{}
	d := &a.Devices[0]
	for i := range d.Allocations {
		byAddr[d.Allocations[i].Address] = &d.Allocations[i]
	}
	total, right := map[string]float64{}, map[string]float64{}
	wrong := map[string]map[string]float64{}
	for _, tn := range truth.Tensors {
		ptr, size, role := uint64(tn[0].(float64)), tn[1].(float64), tn[2].(string)
		total[role] += size
		al := byAddr[ptr]
		switch {
		case al != nil && al.Role.String() == role:
			right[role] += size
		default:
			got := "(no block)"
			if al != nil {
				got = al.Role.String()
			}
			if wrong[role] == nil {
				wrong[role] = map[string]float64{}
			}
			wrong[role][got] += size
		}
	}
	for _, role := range []string{"Parameter", "Gradient", "Optimizer State", "Input"} {
		if total[role] == 0 {
			t.Fatalf("truth has no %s", role)
		}
		pct := 100 * right[role] / total[role]
		t.Logf("%s: %.2f%% of %.0f bytes", role, pct, total[role])
		if pct < 99 {
			t.Errorf("%s: %.2f%% of %.0f bytes in the right role, want ≥ 99%%; the rest is %v", role, pct, total[role], wrong[role])
		}
	}
	// The cuBLAS workspaces are no tensor the program holds.
	if name != "gpt_adamw" {
		return
	}
	var ws int64
	for _, al := range d.Allocations {
		if al.Role == RoleWorkspace {
			ws += al.Size
		}
	}
	if ws < 64<<20 {
		t.Errorf("workspace %d bytes, want the two cuBLAS workspaces (2 × 32 MiB) and more", ws)
	}
}

// frames builds a stack innermost first from "file|function" pairs; a
// Python frame gets line 10.
func frames(spec ...string) Stack {
	var st []Frame
	for _, s := range spec {
		file, name := s, ""
		for i := range s {
			if s[i] == '|' {
				file, name = s[:i], s[i+1:]
				break
			}
		}
		f := Frame{Filename: file, Name: name}
		if isPythonFrame(f) {
			f.Line = 10
		}
		st = append(st, f)
	}
	return StackOf(st...)
}

const sp = "/venv/lib/python3.12/site-packages/"

// Real stack shapes, C++ + Python (PyTorch's default) and Python only.
var (
	engineCpp = []string{"??|torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)",
		"??|torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)",
		"??|torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"}
	allocCpp = []string{"??|torch::unwind::unwind()", "CUDACachingAllocator.cpp|c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long)",
		"??|at::detail::empty_cuda(c10::ArrayRef<long>)", "RegisterCUDA_0.cpp|at::(anonymous namespace)::create_out(c10::ArrayRef<long>)",
		"??|at::_ops::mm::call(at::Tensor const&, at::Tensor const&)"}
	forwardPy = []string{sp + "torch/nn/functional.py|linear", "/home/u/model.py|forward",
		sp + "torch/nn/modules/module.py|_call_impl", "/home/u/train.py|main"}
)

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestRoleRules runs each rule on the stack shapes PyTorch writes, with and
// without C++ frames, from the trace's lifetime and from a lone snapshot.
func TestRoleRules(t *testing.T) {
	c := newRoleClassifier(nil)
	tr := func(spec ...string) *stackTraits { return c.traits(frames(spec...)) }
	backwardFree := tr(engineCpp...)
	userFree := tr("??|THPVariable_dealloc(_object*)", "/home/u/train.py|main")
	zeroGradFree := tr("??|THPVariable_set_grad(THPVariable*, _object*, void*)", sp+"torch/optim/optimizer.py|zero_grad")
	cases := []struct {
		name  string
		alloc *stackTraits
		lt    lifetime
		want  Role
	}{
		{"backward output alive at the dump (AccumulateGrad kept it)", tr(cat(allocCpp, engineCpp)...), lifetime{alive: true}, RoleGradient},
		{"backward output freed in backward", tr(cat(allocCpp, engineCpp)...), lifetime{known: true, free: backwardFree}, RoleTemporary},
		{"backward output freed by zero_grad", tr(cat(allocCpp, engineCpp)...), lifetime{known: true, free: zeroGradFree}, RoleGradient},
		{"python-only: frameless alloc alive after backward", &c.empty, lifetime{known: true, alive: true, frameless: true}, RoleGradient},
		{"python-only: frameless alloc freed frameless", &c.empty, lifetime{known: true, frameless: true, free: &c.empty, framelessFree: true}, RoleTemporary},
		{"frameless without any stacks in the trace", &c.empty, lifetime{known: true, alive: true}, RoleUnknown},
		{"Module.to() → Parameter", tr(cat(allocCpp, []string{sp + "torch/nn/modules/module.py|convert", sp + "torch/nn/modules/module.py|_apply",
			sp + "torch/nn/modules/module.py|to", "/home/u/train.py|main"})...), lifetime{alive: true}, RoleParameter},
		{"nn.Linear(device=cuda) → Parameter", tr("??|torch::autograd::THPVariable_empty(_object*, _object*, _object*)",
			sp+"torch/nn/modules/linear.py|__init__", "/home/u/model.py|__init__"), lifetime{alive: true}, RoleParameter},
		{"Adam state", tr(sp+"torch/optim/adam.py|_init_group", sp+"torch/optim/adam.py|step", "/home/u/train.py|main"), lifetime{alive: true}, RoleOptimizerState},
		{"SGD momentum buffer", tr(sp+"torch/optim/sgd.py|_single_tensor_sgd", sp+"torch/optim/sgd.py|step", "/home/u/train.py|main"),
			lifetime{known: true, alive: true}, RoleOptimizerState},
		{"optimizer scratch freed inside the step", tr(sp+"torch/optim/adam.py|_multi_tensor_adam", "/home/u/train.py|main"),
			lifetime{known: true, inStep: true, stepFree: true}, RoleTemporary},
		{"frameless alloc inside Optimizer.step, kept", &c.empty, lifetime{known: true, inStep: true, alive: true}, RoleOptimizerState},
		{"forward output freed by backward → Activation", tr(cat(allocCpp, forwardPy)...), lifetime{known: true, free: backwardFree}, RoleActivation},
		{"forward intermediate freed in forward → Temporary", tr(cat(allocCpp, forwardPy)...), lifetime{known: true, free: userFree}, RoleTemporary},
		{"forward, snapshot only → Activation", tr(forwardPy...), lifetime{alive: true}, RoleActivation},
		{"cuBLAS workspace", tr(cat([]string{"??|at::cuda::getCurrentCUDABlasHandle()"}, forwardPy)...), lifetime{alive: true}, RoleWorkspace},
		{"a raw allocator call (no tensor made): reduction scratch", tr(cat([]string{
			"CUDACachingAllocator.cpp|c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)",
			"??|void at::native::gpu_reduce_kernel<float, float>(at::TensorIterator&) [clone .isra.0]",
			"??|at::_ops::sum_dim_IntList::call(at::Tensor const&)"}, forwardPy)...), lifetime{known: true, free: userFree}, RoleWorkspace},
		{"a resize of a tensor's storage is no workspace", tr(cat([]string{
			"CUDACachingAllocator.cpp|c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)",
			"??|at::native::resize_bytes_cuda(c10::StorageImpl*, unsigned long)"}, forwardPy)...), lifetime{alive: true}, RoleActivation},
		{"cuDNN workspace", tr("??|at::native::(anonymous namespace)::Workspace::Workspace(unsigned long)", "/home/u/train.py|main"), lifetime{alive: true}, RoleWorkspace},
		{"the batch: torch.randint at the top level", tr("??|torch::autograd::THPVariable_randint(_object*, _object*, _object*)",
			"??|at::_ops::randint_low::call(long, long)", "/home/u/train.py|<lambda>"), lifetime{alive: true}, RoleInput},
		{"the batch: .to(device) of a loader tensor", tr("??|at::_ops::_to_copy::call(at::Tensor const&)", "??|torch::autograd::THPVariable_to(_object*)",
			"/home/u/train.py|main"), lifetime{alive: true}, RoleInput},
		// torch::autograd:: is a namespace, not a gradient: the Python
		// binding of torch.empty lives there.
		{"torch.empty at the top level is no gradient", tr("??|torch::autograd::THPVariable_empty(_object*, _object*, _object*)",
			"??|at::_ops::empty_memory_format::call()", "/home/u/train.py|main"), lifetime{alive: true}, RoleInput},
		{"top-level op freed at its own line → Temporary", tr("??|at::_ops::add_Tensor::call()", "/home/u/train.py|main"),
			lifetime{known: true, free: userFree, sameSite: true}, RoleTemporary},
		{"top-level op freed at another line", tr("??|at::_ops::add_Tensor::call()", "/home/u/train.py|main"),
			lifetime{known: true, free: userFree}, RoleUnknown},
	}
	for _, tc := range cases {
		if got := c.decide(tc.alloc, tc.lt); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestRolesFromTrace replays a small trace written the way PyTorch writes
// it (Python-only stacks: the engine thread records none) and checks that
// the lifetime, not the stack alone, decides.
func TestRolesFromTrace(t *testing.T) {
	fwd, opt := frames(forwardPy...), frames(sp+"torch/optim/adam.py|_init_group", "/home/u/train.py|main")
	user := frames("/home/u/train.py|main")
	zero := frames(sp+"torch/optim/optimizer.py|zero_grad", "/home/u/train.py|main")
	s := &Snapshot{}
	ev := func(a Action, addr uint64, us int64, st Stack) TraceEntry {
		return TraceEntry{Addr: addr, Size: 1 << 20, TimeUS: us, Stack: s.AddStack(st)}.With(a)
	}
	trace := []TraceEntry{
		ev(ActionAlloc, 0x1000, 1, fwd),                   // activation
		ev(ActionAlloc, 0x2000, 2, fwd),                   // forward temporary
		ev(ActionFreeCompleted, 0x2000, 3, user),          // freed by user code
		ev(ActionAlloc, 0x3000, 4, Stack{}),               // backward: activation gradient
		ev(ActionFreeCompleted, 0x1000, 5, Stack{}),       // the activation freed by the engine
		ev(ActionAlloc, 0x4000, 6, Stack{}),               // backward: a .grad
		ev(ActionFreeCompleted, 0x3000, 7, Stack{}),       // freed in backward
		ev(ActionAlloc, 0x5000, 9, Stack{}),               // inside Optimizer.step, kept
		ev(ActionAlloc, 0x6000, 10, opt),                  // optimizer scratch
		ev(ActionFreeCompleted, 0x6000, 11, opt),          // freed inside the step
		ev(ActionFreeCompleted, 0x4000, 13, zero),         // the .grad freed by zero_grad
		ev(ActionAlloc, 0x7000, 14, user),                 // a last alloc
		ev(ActionFreeCompleted, 0x7000, 15, user),         // freed at its line
		ev(ActionAlloc, 0x8000, 16, frames(forwardPy...)), // alive at the end
		// An op at the top level freed at its own line, by another stack
		// (the dealloc's), and one freed at another line.
		ev(ActionAlloc, 0x9000, 17, frames("??|at::_ops::add_Tensor::call()", "/home/u/train.py|main")),
		ev(ActionFreeCompleted, 0x9000, 18, frames("??|THPVariable_dealloc(_object*)", "/home/u/train.py|main")),
		ev(ActionAlloc, 0xa000, 19, frames("??|at::_ops::add_Tensor::call()", "/home/u/train.py|main")),
		ev(ActionFreeCompleted, 0xa000, 20, frames("??|THPVariable_dealloc(_object*)", "/home/u/data.py|main")),
	}
	s.Traces = [][]TraceEntry{trace}
	s.Annotations = []Annotation{
		{Name: "Optimizer.step#Adam.step", Stage: "START", TimeUS: 8},
		{Name: "Optimizer.step#Adam.step", Stage: "END", TimeUS: 12},
	}
	tl := Replay(s, 0, nil)
	want := map[uint64]Role{0x1000: RoleActivation, 0x2000: RoleTemporary, 0x3000: RoleTemporary, 0x4000: RoleGradient,
		0x5000: RoleOptimizerState, 0x6000: RoleTemporary, 0x7000: RoleTemporary, 0x8000: RoleActivation,
		0x9000: RoleTemporary, 0xa000: RoleUnknown}
	for j, iv := range tl.Intervals {
		if w, ok := want[iv.Addr]; ok && tl.Role(j) != w {
			t.Errorf("%#x: %s, want %s", iv.Addr, tl.Role(j), w)
		}
	}
}

// TestRoleTotalsOrder: largest first, and every allocation counted once.
func TestRoleTotalsOrder(t *testing.T) {
	allocs := []Allocation{{Size: 10, Role: RoleGradient}, {Size: 30, Role: RoleParameter}, {Size: 5, Role: RoleGradient},
		{Size: 1, Role: RoleUnknown}}
	got := RoleTotals(allocs)
	if len(got) != 3 || got[0].Name != "Parameter" || got[1].Name != "Gradient" || got[1].Bytes != 15 || got[1].Blocks != 2 ||
		got[2].Name != "Unknown" {
		t.Errorf("RoleTotals = %+v", got)
	}
}

// TestWithin: a window holds [first, last); between, before and after the
// windows nothing does.
func TestWithin(t *testing.T) {
	ws := []window{{10, 20}, {20, 25}, {40, 50}}
	for i, want := range map[int]int{9: -1, 10: 0, 19: 0, 20: 1, 24: 1, 25: -1, 39: -1, 40: 2, 49: 2, 50: -1, -1: -1} {
		w, ok := within(ws, i)
		got := -1
		if ok {
			got = slices.Index(ws, w)
		}
		if got != want {
			t.Errorf("within(%d) = window %d, want %d", i, got, want)
		}
	}
	if _, ok := within(nil, 0); ok {
		t.Error("no window holds anything")
	}
}

// TestUserRoleRules: "role Name: keywords" lines of a rules file set roles
// before the built-in rules, matched on a frame's base file name or
// function as category keywords are; a bad role name is an error.
func TestUserRoleRules(t *testing.T) {
	rules, err := ParseRules(strings.NewReader("# LoRA adapters are parameters\nrole Parameter: lora_init\nrole optimizer state: my_shard\nAttention: my_attn\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := NewCategorizer(rules)
	if slices.Contains(c.Names(), "Parameter") || !slices.Contains(c.Names(), "my_attn") && !slices.Contains(c.Names(), "Attention") {
		t.Errorf("role rules are no categories: %v", c.Names())
	}
	if got := NewCategorizer(c.Rules()).Rules(); len(got) != len(c.Rules()) || !got[len(got)-1].Role {
		t.Errorf("Rules() keeps the role rules for a copy: %+v", got[len(got)-2:])
	}
	rc := newRoleClassifier(c)
	lora := frames(cat(allocCpp, []string{"/home/u/lora_init.py|make", "/home/u/model.py|forward",
		sp + "torch/nn/modules/module.py|_call_impl"})...)
	if got := rc.decide(rc.traits(lora), lifetime{known: true, alive: true}); got != RoleParameter {
		t.Errorf("a lora_init.py frame: %s, want Parameter (before the forward rule)", got)
	}
	shard := frames("/home/u/zero.py|my_shard_state", "/home/u/train.py|main")
	if got := rc.decide(rc.traits(shard), lifetime{alive: true}); got != RoleOptimizerState {
		t.Errorf("my_shard_state: %s, want Optimizer State", got)
	}
	if got := rc.decide(rc.traits(frames(forwardPy...)), lifetime{alive: true}); got != RoleActivation {
		t.Errorf("no rule matches: the built-in rules decide (%s)", got)
	}
	for _, bad := range []string{"role Weights: w", "role Unknown: x", "role Parameter:"} {
		if _, err := ParseRules(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestRolesOnAllCores: classifying roles on several goroutines (a chunk
// each, its own caches) gives each interval the role one goroutine gives,
// on both sides of the chunk size, on the real samples.
func TestRolesOnAllCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, p := range []string{"../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../testdata/snapshots/h100/train_cpp_stacks.pickle.gz",
		"../testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle", "../testdata/snapshots/h200/ring.pickle"} {
		a := analyzeFile(t, p)
		for _, d := range a.Devices {
			tl := a.Timeline(d.Device)
			if tl == nil || len(tl.Intervals) < 8 {
				continue
			}
			tl.classifyRolesBy(a.Snapshot.Annotations, len(tl.Intervals)+1) // one goroutine
			one := slices.Clone(tl.roles)
			for _, per := range []int{len(tl.Intervals), len(tl.Intervals) / 4, 1} {
				tl.classifyRolesBy(a.Snapshot.Annotations, per)
				if !slices.Equal(one, tl.roles) {
					t.Errorf("%s cuda:%d: %d per goroutine gives other roles than one goroutine", p, d.Device, per)
				}
			}
		}
	}
}

// TestStackTableAgrees checks the per-stack table the roles and sites are
// read from against the per-stack cache it replaced: each interval's frames
// are its alloc's (a block's alive before the trace, the block's), its free
// stack number its free event's, each stack's traits are what the cache
// reads from them on any number of cores, and each interval's site is what
// its frames give. Real files (stacks repeated a million times, a ring
// buffer that overflowed) and generated ones (distinct stacks over a shared
// frame pool, or over frames of their own).
func TestStackTableAgrees(t *testing.T) {
	paths := []string{"../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../testdata/snapshots/h100/train_cpp_stacks.pickle.gz",
		"../testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle", "../testdata/snapshots/h200/ring.pickle"}
	if _, err := exec.LookPath("python3"); err == nil {
		dir := t.TempDir()
		for name, args := range map[string][]string{
			"pool":     {"--entries", "6000", "--frames", "shared", "--frame-pool", "300", "--stacks", "2000", "--depth", "12"},
			"unshared": {"--entries", "6000", "--frames", "unshared", "--stacks", "3000", "--depth", "8", "--frees", "random"},
		} {
			p := filepath.Join(dir, name+".pickle")
			if out, err := exec.Command("python3", append(append([]string{"../scripts/gen_snapshot.py"}, args...), p)...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			paths = append(paths, p)
		}
	}
	blocks := 0
	for _, p := range paths {
		a := analyzeFile(t, p)
		checked := 0
		blockFrames := map[uint64]Stack{}
		for _, seg := range a.Snapshot.Segments {
			for i := range seg.Blocks {
				if b := &seg.Blocks[i]; b.Stack != 0 {
					blockFrames[b.Address] = a.Snapshot.BlockFrames(b)
				}
			}
		}
		for _, d := range a.Devices {
			tl := a.Timeline(d.Device)
			if tl == nil {
				continue
			}
			cache := newRoleClassifier(tl.cat)
			for _, per := range []int{1, len(tl.stacks) + 1} {
				table := readStacks(tl.stacks, tl.cat, per)
				for k, st := range tl.stacks {
					if want := *cache.traits(st); table[k] != want {
						t.Fatalf("%s stack %d, %d per core: table %+v, cache %+v", p, k+1, per, table[k], want)
					}
				}
			}
			names := newSiteNames()
			for j := range tl.Intervals {
				iv := &tl.Intervals[j]
				if iv.Start >= 0 {
					// An interval's frames are its alloc's.
					st := tl.FramesAt(int(iv.Start))
					if fr := tl.FramesOf(iv); st.Len() != fr.Len() || (st.Len() > 0 && st.Key() != fr.Key()) {
						t.Fatalf("%s interval %d: its frames are not its alloc's", p, j)
					}
					checked++
				}
				if want, ok := blockFrames[iv.Addr]; ok && iv.PreWindow() && int(iv.End) == len(tl.Events) {
					// A block alive before the trace keeps the block's.
					if fr := tl.FramesOf(iv); fr.Len() == 0 || fr.Key() != want.Key() {
						t.Fatalf("%s interval %d: frames of block %#x lost", p, j, iv.Addr)
					}
					blocks++
				}
				if fi := iv.FreeRequested; fi >= 0 || int(iv.End) < len(tl.Events) {
					if fi < 0 {
						fi = iv.End
					}
					if want := tl.stackNumber(tl.Events[fi].Stack); iv.FreeStack != want {
						t.Fatalf("%s interval %d: free stack %d, its free event has %d", p, j, iv.FreeStack, want)
					}
				}
				if got, want := tl.siteOf(iv, newSiteNames()), names.of(tl.FramesOf(iv)); got != want {
					t.Fatalf("%s interval %d: site %q, its frames give %q", p, j, got, want)
				}
			}
		}
		if checked == 0 {
			t.Errorf("%s: no interval has a stack number", p)
		}
	}
	if blocks == 0 {
		t.Error("no interval of a block alive before the trace was checked")
	}
}

// TestReadDenseAfterGrowth: a classifier whose caches hold a table's frames
// by index (useTable) reads the same traits and site as one that finds
// frames by address, for stacks of frames the table had then, frames it
// got since (ids past the arrays, the table's array unmoved), both mixed,
// and frames of another table.
func TestReadDenseAfterGrowth(t *testing.T) {
	frames := []Frame{
		{Filename: "/usr/lib/python3.11/site-packages/torch/optim/adamw.py", Name: "step", Line: 10},
		{Filename: "/work/train.py", Name: "train_step", Line: 88},
		{Filename: "??", Name: "at::native::empty_cuda", Line: 0},
		{Filename: "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py", Name: "forward", Line: 125},
		{Filename: "??", Name: "torch::autograd::generated::MmBackward0::apply", Line: 0},
		{Filename: "/work/model.py", Name: "forward", Line: 42},
	}
	table := &FrameTable{Frames: make([]Frame, 3, len(frames))}
	copy(table.Frames, frames[:3])
	dense := newRoleClassifier(nil)
	dense.useTable(table)
	table.Frames = append(table.Frames, frames[3:]...) // the same array, longer
	other := &FrameTable{Frames: frames}
	for _, c := range []struct {
		name  string
		table *FrameTable
		ids   []uint32
	}{
		{"frames it had", table, []uint32{2, 0, 1}},
		{"frames it got since", table, []uint32{4, 3, 5}},
		{"both", table, []uint32{2, 4, 3, 1, 0}},
		{"native only", table, []uint32{2, 4}},
		{"another table", other, []uint32{2, 3, 5}},
	} {
		st := NewStack(c.table, c.ids)
		if (dense.byFrame.denseOf(c.table) == nil) != (c.table == other) {
			t.Fatalf("%s: the dense arrays are used for the wrong table", c.name)
		}
		var got stackTraits
		dense.read(st, &got)
		want := *newRoleClassifier(nil).traits(st)
		if got != want {
			t.Errorf("%s: %+v, by address %+v", c.name, got, want)
		}
		if i := SiteIndex(st); int(got.sitePos) != i+1 {
			t.Errorf("%s: site at %d, SiteIndex %d", c.name, got.sitePos-1, i)
		}
	}
}

// TestSharedStackFacts: with traces on several devices, Analyze reads the
// stacks' traits and numbers their sites once (stackShare), and every
// device's roles, sites and peak are what a replay of that device alone
// gives. The devices' traces differ (whole, first half, last two thirds).
func TestSharedStackFacts(t *testing.T) {
	for _, p := range []string{"../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../testdata/snapshots/h100/train_cpp_stacks.pickle.gz",
		"../testdata/snapshots/h200/ring.pickle"} {
		s, err := Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		tr := s.Trace(0)
		if len(tr) < 3 {
			t.Fatalf("%s: %d trace entries on cuda:0", p, len(tr))
		}
		s.Traces = [][]TraceEntry{tr, tr[:len(tr)/2], tr[len(tr)/3:]}
		a := Analyze(s, nil)
		shared := a.Timeline(0)
		if shared == nil || shared.share == nil {
			t.Fatalf("%s: three traced devices, no shared stack facts", p)
		}
		for d := range 3 {
			got, want := a.Timeline(d), Replay(s, d, nil)
			if got.share != shared.share {
				t.Fatalf("%s cuda:%d: not the share of cuda:0", p, d)
			}
			if !reflect.DeepEqual(got.PeakTop(50), want.PeakTop(50)) {
				t.Errorf("%s cuda:%d: the peak's allocations differ from a replay alone", p, d)
			}
			names := newSiteNames()
			for j := range got.Intervals {
				if got.Role(j) != want.Role(j) {
					t.Fatalf("%s cuda:%d interval %d: role %v, alone %v", p, d, j, got.Role(j), want.Role(j))
				}
				if g, w := got.siteOf(&got.Intervals[j], names), want.siteOf(&want.Intervals[j], names); g != w {
					t.Fatalf("%s cuda:%d interval %d: site %q, alone %q", p, d, j, g, w)
				}
			}
		}
		if &a.Timeline(1).siteID[0] != &shared.siteID[0] {
			t.Errorf("%s: cuda:1 numbered the sites again", p)
		}
		// One traced device shares nothing: its traits go with its
		// classification.
		s.Traces = [][]TraceEntry{tr}
		if one := Analyze(s, nil).Timeline(0); one == nil || one.share != nil {
			t.Errorf("%s: one traced device, a share", p)
		}
	}
}

// TestAssignRolesWithoutTrace: without a trace, each block's role is its
// stack's, read once per distinct stack (numbered as the binder interns
// them: stackNumbers); the roles equal those of a classifier asked block
// by block. The blocks are a real snapshot's (C++ and Python frames),
// with stacks shared, prefixes of one array (same address, other
// lengths), empty and of 1<<16 frames.
func TestAssignRolesWithoutTrace(t *testing.T) {
	s, err := Open(context.Background(), "../testdata/snapshots/h100/gpt_adamw.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	cat := NewCategorizer(nil)
	a := Analyze(s, cat)
	var allocs []Allocation
	for i := range a.Devices {
		allocs = append(allocs, a.Devices[i].Allocations...)
	}
	if len(allocs) < 100 {
		t.Fatalf("%d blocks: the test checks little", len(allocs))
	}
	var long Stack
	for _, al := range allocs {
		if st := al.Frames; st.Len() >= 8 {
			ids := make([]uint32, 0, 1<<16)
			for len(ids) < 1<<16 {
				for i := range st.Len() {
					ids = append(ids, st.ID(i))
				}
			}
			ids = ids[:1<<16]
			long = schema.NewStack(st.Table(), ids)
			for _, n := range []int{1, 3, 7} { // prefixes of one array
				allocs = append(allocs, Allocation{Address: uint64(n), Frames: schema.NewStack(st.Table(), ids[:n])})
			}
			break
		}
	}
	if long.Len() == 0 {
		t.Fatal("no stack of 8 frames to build from")
	}
	allocs = append(allocs, Allocation{Address: 1 << 40, Frames: long}, Allocation{Address: 1<<40 + 1, Frames: long}, Allocation{Address: 1<<40 + 2})
	for i := range allocs {
		allocs[i].Role = RoleUnknown
	}
	assignRoles(allocs, nil, cat, groupStacks(stackNumbers(allocs)))
	ref := newRoleClassifier(cat)
	seen := map[Role]bool{}
	for i, al := range allocs {
		want := ref.decide(ref.traits(al.Frames), lifetime{alive: true})
		if al.Role != want {
			t.Fatalf("block %d (%d frames): %v, want %v", i, al.Frames.Len(), al.Role, want)
		}
		seen[want] = true
	}
	if len(seen) < 3 {
		t.Errorf("roles %v: the test checks little", seen)
	}
}
