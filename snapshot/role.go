package snapshot

import (
	"cmp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"memscope/internal/pages"
	"memscope/internal/par"
)

// Role is what an allocation is to the training program, in PyTorch's own
// vocabulary (torch.profiler._memory_profiler.Category): a second axis
// beside the keyword categories, which say which kind of layer made it.
type Role uint8

// Roles. Workspace covers library scratch (cuBLAS and cuDNN workspaces,
// NCCL buffers); Unknown is an allocation no rule can place.
const (
	RoleUnknown Role = iota
	RoleParameter
	RoleGradient
	RoleOptimizerState
	RoleActivation
	RoleInput
	RoleTemporary
	RoleWorkspace
)

var roleNames = [...]string{"Unknown", "Parameter", "Gradient", "Optimizer State", "Activation", "Input",
	"Temporary", "Workspace"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "Unknown"
}

// ParseRole maps a role's name (any case) to the Role.
func ParseRole(name string) (Role, bool) {
	for i, n := range roleNames {
		if strings.EqualFold(n, name) {
			return Role(i), true
		}
	}
	return RoleUnknown, false
}

// RoleNames lists the roles in display order, Unknown last.
func RoleNames() []string {
	return append(append([]string(nil), roleNames[1:]...), roleNames[0])
}

// stackTraits is what the role rules read from one stack. Equal stacks
// share storage, so traits are cached per stack. It is 8 bytes: a
// snapshot of 900k distinct stacks keeps one per stack for its analysis.
type stackTraits struct {
	bits traitBits
	// user is the role the user's role rules give the innermost matching
	// frame (RoleUnknown: none).
	user Role
	// sitePos is 1 + the site frame's index in the stack (0: none). Sites
	// are compared by number (Timeline.siteID), not here.
	sitePos int32
}

// traitBits are the facts of a stack the rules read, one bit each.
type traitBits uint16

const (
	tEmpty    traitBits = 1 << iota // no frames at all
	tPython                         // any Python frame
	tBackward                       // made on the autograd engine (a backward pass)
	// tAccumulate: AccumulateGrad made it (a .grad being created).
	tAccumulate
	// tSetGrad: the stack assigns or clears a .grad (zero_grad, p.grad =
	// None): on a free, the tensor freed was a gradient.
	tSetGrad
	tOptimizer // optimizer code (torch.optim, fused/distributed optimizers)
	tParamInit // module construction, .to()/.cuda(), load_state_dict, init
	tForward   // inside a module's forward (or recomputing one)
	tWorkspace // cuBLAS/cuDNN workspace, NCCL buffers
	tDataLoad  // torch.utils.data, pin_memory, host-to-device copies
	// tFactory: a tensor factory or copy called from Python (torch.randint,
	// torch.tensor, .to(device)) with no torch op around it.
	tFactory
	// tTorchOp: a torch computation encloses the allocation (a Python frame
	// in torch, or an aten operator that is not a factory or copy).
	tTorchOp
)

// is reports whether t has every bit of b.
func (t *stackTraits) is(b traitBits) bool { return t.bits&b == b }

// roleClassifier decides roles, caching traits per stack and per frame.
type roleClassifier struct {
	cat    *Categorizer // the user's role rules (nil: none)
	stacks map[stackKey]*stackTraits
	frames map[frameName]frameInfo
	// byFrame caches frames and sites by frame: a snapshot's stacks
	// point at its table of distinct frames, so a million stacks of 30
	// frames look up a few thousand frames, without hashing their names.
	byFrame *frameCache[frameInfo]
	sites   *siteNames
	empty   stackTraits
}

// frameInfo is what one frame says to the role rules.
type frameInfo struct {
	traits frameTraits
	user   Role
}

// frameTraits is what one frame says.
type frameTraits uint32

const (
	ftPython frameTraits = 1 << iota
	ftBackward
	ftAccumulate
	ftSetGrad
	ftOptimizer
	ftParamInit
	ftForward
	ftWorkspace
	ftDataLoad
	ftFactory
	ftTorchOp
	ftFiltered
	ftAllocator // the caching allocator's malloc
	ftTensor    // a tensor or storage being made (at::detail::empty*, resize, Storage)
)

func newRoleClassifier(cat *Categorizer) *roleClassifier {
	return &roleClassifier{cat: cat, stacks: map[stackKey]*stackTraits{}, frames: map[frameName]frameInfo{},
		byFrame: newFrameCache[frameInfo](), sites: newSiteNames(), empty: stackTraits{bits: tEmpty}}
}

func (c *roleClassifier) traits(st Stack) *stackTraits {
	if st.Len() == 0 {
		return &c.empty
	}
	k := stackKey{st.Key(), st.Len()}
	if t, ok := c.stacks[k]; ok {
		return t
	}
	t := &stackTraits{}
	c.read(st, t)
	c.stacks[k] = t
	return t
}

// read fills t from the frames of st, which is not empty.
func (c *roleClassifier) read(st Stack, t *stackTraits) {
	var all frameTraits
	var site int
	if dense := c.byFrame.denseOf(st.Table()); dense != nil {
		all, site = c.readDense(st, t, dense)
	} else {
		for i := range st.Len() {
			fi := c.framePtr(st.At(i))
			all |= fi.traits
			if t.user == RoleUnknown {
				t.user = fi.user
			}
		}
		site = siteIndex(st, c.sites.siteKind)
	}
	t.bits = bitIf(all&ftPython != 0, tPython) | bitIf(all&ftBackward != 0, tBackward) |
		bitIf(all&ftAccumulate != 0, tAccumulate) | bitIf(all&ftSetGrad != 0, tSetGrad) |
		bitIf(all&ftOptimizer != 0, tOptimizer) | bitIf(all&ftParamInit != 0, tParamInit) |
		bitIf(all&ftForward != 0, tForward) |
		// A raw allocation (the caching allocator called without a tensor
		// being made) is library scratch: cuBLAS/cuDNN workspaces, cub
		// temp storage.
		bitIf(all&ftWorkspace != 0 || (all&ftAllocator != 0 && all&ftTensor == 0), tWorkspace) |
		bitIf(all&ftDataLoad != 0, tDataLoad) |
		bitIf(all&ftFactory != 0 && all&ftTorchOp == 0, tFactory) |
		bitIf(all&ftTorchOp != 0, tTorchOp)
	t.sitePos = int32(site + 1)
}

func bitIf(ok bool, b traitBits) traitBits {
	if ok {
		return b
	}
	return 0
}

// readDense is read's walk of st's frames by id, in the caches' arrays by
// index (dense is byFrame's): one pass for the traits, the user's role and
// the site, without framePtr's address arithmetic and calls. The frame
// pool's 187k stacks are 5.6M frames.
func (c *roleClassifier) readDense(st Stack, t *stackTraits, dense []denseSlot[frameInfo]) (all frameTraits, site int) {
	frames := st.Table().Frames
	kinds := c.sites.kindOf.denseOf(st.Table())
	choice, chosen := newSiteChoice(), false
	for i := range st.Len() {
		id := st.ID(i)
		f := &frames[id]
		var fi frameInfo
		if int(id) < len(dense) {
			d := &dense[id]
			if !d.ok {
				c.byFrame.fill(d, c.frame(*f))
			}
			fi = d.val
		} else {
			fi = c.framePtr(f)
		}
		all |= fi.traits
		if t.user == RoleUnknown {
			t.user = fi.user
		}
		if chosen {
			continue
		}
		var k siteKind
		if int(id) < len(kinds) {
			d := &kinds[id]
			if !d.ok {
				c.sites.kindOf.fill(d, c.sites.classify(f))
			}
			k = d.val
		} else {
			k = c.sites.siteKind(f)
		}
		chosen = choice.add(i, k, f)
	}
	return all, choice.index()
}

// readStacks reads the traits of every stack of the snapshot once, on
// every core, indexed by stack number less one: intervals then find their
// stacks' traits by index. Hashing a 16-byte key per interval was a
// quarter of the analysis of a trace of 124k distinct stacks, and each
// core's cache held every stack again.
func readStacks(stacks []Stack, cat *Categorizer, perWorker int) []stackTraits {
	out := make([]stackTraits, len(stacks))
	pages.Prefault(out) // read (t.user) before written
	workers := min(runtime.GOMAXPROCS(0), max(1, len(stacks)/perWorker))
	table := tableOf(stacks)
	var wg par.Group
	for w := range workers {
		lo, hi := w*len(stacks)/workers, (w+1)*len(stacks)/workers
		wg.Go(func() {
			c := newRoleClassifier(cat)
			c.useTable(table)
			for k := lo; k < hi; k++ {
				if stacks[k].Len() == 0 {
					out[k] = c.empty
					continue
				}
				c.read(stacks[k], &out[k])
			}
		})
	}
	wg.Wait()
	return out
}

// stackShare holds what the roles read of a snapshot's stacks, which is
// the same for each of its devices: their traits and their sites' numbers,
// made for the first device that asks. Per device, a trace of three devices
// over 200k distinct stacks and 1.6M distinct frames read every stack three
// times (0.5 s), each time in new per-frame arrays. Analyze shares them
// only between several devices: kept for one, they would outlive its
// classification and add to the peak.
type stackShare struct {
	traitsOnce, sitesOnce sync.Once
	byStack               []stackTraits
	sites                 siteNumbers
}

// traits is readStacks(stacks, cat, perWorker), read once when s is not nil
// (s's stacks and categorizer are the same at every call).
func (s *stackShare) traits(stacks []Stack, cat *Categorizer, perWorker int) []stackTraits {
	if s == nil {
		return readStacks(stacks, cat, perWorker)
	}
	s.traitsOnce.Do(func() { s.byStack = readStacks(stacks, cat, perWorker) })
	return s.byStack
}

// tableOf is the frame table of the first stack that has frames: the one a
// snapshot's stacks share.
func tableOf(stacks []Stack) *FrameTable {
	for _, st := range stacks {
		if st.Len() > 0 {
			return st.Table()
		}
	}
	return nil
}

// useTable keeps what is read from t's frames in arrays by index.
func (c *roleClassifier) useTable(t *FrameTable) {
	c.byFrame.useTable(t)
	c.sites.useTable(t)
}

func (c *roleClassifier) framePtr(f *Frame) frameInfo {
	if fi, ok := c.byFrame.Get(f); ok {
		return fi
	}
	fi := c.frame(*f)
	c.byFrame.Put(f, fi)
	return fi
}

func (c *roleClassifier) frame(f Frame) frameInfo {
	k := frameName{f.Filename, f.Name}
	if fi, ok := c.frames[k]; ok {
		return fi
	}
	fi := frameInfo{traits: frameTraitsOf(f), user: c.cat.userRole(f)}
	c.frames[k] = fi
	return fi
}

// frameTraitsOf reads one frame. C++ names are matched by their qualified
// parts (torch::autograd::Engine, not any name containing "autograd": the
// Python binding of torch.empty lives in torch::autograd too).
func frameTraitsOf(f Frame) frameTraits {
	if IsNoise(f) || IsProfilerFrame(f) {
		return ftFiltered
	}
	name := f.Name
	if isPythonFrame(f) {
		t := ftPython
		fn := normPath(f.Filename)
		torch := isTorchPath(fn)
		base := baseName(fn)
		switch {
		case torch && (strings.Contains(fn, "torch/autograd/") || base == "_tensor.py") &&
			(name == "backward" || name == "grad" || name == "_engine_run_backward"):
			t |= ftBackward
		case torch && strings.Contains(fn, "torch/optim/") && !strings.Contains(fn, "lr_scheduler"):
			t |= ftOptimizer
		case torch && strings.Contains(fn, "torch/utils/data/"):
			t |= ftDataLoad
		case torch && strings.Contains(fn, "torch/utils/checkpoint"):
			t |= ftForward
		case torch && base == "module.py" && (name == "_call_impl" || name == "_wrapped_call_impl"):
			t |= ftForward
		case torch && base == "module.py" && paramInitMethods[name]:
			t |= ftParamInit
		case torch && (strings.Contains(fn, "torch/nn/init.py") || strings.Contains(fn, "torch/nn/parameter.py") ||
			strings.Contains(fn, "fsdp/_flat_param.py")):
			t |= ftParamInit
		case torch && strings.Contains(fn, "torch/nn/modules/") && name == "__init__":
			t |= ftParamInit
		}
		if name == "zero_grad" {
			t |= ftSetGrad
		}
		if !torch && isOptimizerPath(fn) {
			t |= ftOptimizer
		}
		if name == "forward" {
			t |= ftForward
		}
		switch name {
		case "reset_parameters", "_init_weights", "init_weights", "from_pretrained", "load_state_dict",
			"_load_from_state_dict", "_load_state_dict_into_meta_model", "init_sharded_param", "_init_sharded_param":
			t |= ftParamInit
		case "_init_group":
			t |= ftOptimizer
		}
		if torch && !strings.Contains(fn, "torch/nn/modules/module.py") && !strings.Contains(fn, "torch/utils/") &&
			!strings.Contains(fn, "torch/optim/") && !strings.Contains(fn, "torch/autograd/") {
			t |= ftTorchOp
		}
		return t
	}
	var t frameTraits
	if strings.Contains(name, "CachingAllocator") {
		t |= ftAllocator
	}
	if strings.Contains(name, "at::detail::empty") || strings.Contains(name, "at::empty") || strings.Contains(name, "at::native::empty") ||
		strings.Contains(name, "resize") || strings.Contains(name, "Storage") || strings.Contains(name, "make_tensor") {
		t |= ftTensor
	}
	switch {
	case strings.Contains(name, "torch::autograd::Engine::") || strings.Contains(name, "torch::autograd::python::PythonEngine::"):
		t |= ftBackward
	case strings.Contains(name, "torch::autograd::AccumulateGrad"):
		t |= ftAccumulate | ftBackward
	case strings.Contains(name, "THPVariable_set_grad"):
		t |= ftSetGrad
	}
	lower := strings.ToLower(name)
	if strings.Contains(lower, "workspace") || strings.Contains(name, "getCurrentCUDABlasHandle") ||
		strings.Contains(name, "ProcessGroupNCCL") || strings.Contains(name, "ncclComm") {
		t |= ftWorkspace
	}
	if b, ok := strings.CutPrefix(name, "torch::autograd::THPVariable_"); ok {
		if j := strings.IndexByte(b, '('); j >= 0 {
			b = b[:j]
		}
		if factoryBindings[b] {
			t |= ftFactory
		}
	}
	if op, ok := atenOp(name); ok {
		switch {
		case factoryOps[op]:
			t |= ftFactory
		case !isAllocPrimitive(op):
			t |= ftTorchOp
		}
	}
	return t
}

// paramInitMethods are the nn.Module methods that (re)create parameters and
// buffers: moving or casting a module, loading a state dict.
var paramInitMethods = map[string]bool{
	"_apply": true, "convert": true, "to": true, "cuda": true, "to_empty": true, "half": true, "float": true,
	"bfloat16": true, "double": true, "type": true, "load_state_dict": true, "_load_from_state_dict": true,
	"register_parameter": true, "register_buffer": true,
}

// factoryBindings are torch's Python bindings that make a tensor from
// nothing or from host data (torch.randint, t.to, t.cuda).
var factoryBindings = map[string]bool{
	"to": true, "cuda": true, "tensor": true, "as_tensor": true, "randint": true, "randn": true, "rand": true,
	"randperm": true, "zeros": true, "ones": true, "full": true, "arange": true, "empty": true,
	"from_numpy": true, "pin_memory": true, "linspace": true, "normal": true, "randint_like": true,
}

// factoryOps are the aten operators of those bindings (and host-to-device
// copies).
var factoryOps = map[string]bool{
	"_to_copy": true, "to": true, "copy_": true, "randint": true, "randint_low": true, "randn": true,
	"rand": true, "randperm": true, "ones": true, "full": true, "arange": true, "arange_start": true,
	"arange_start_step": true, "lift_fresh": true, "_pin_memory": true, "linspace": true, "normal": true,
	"random_": true, "uniform_": true, "normal_": true, "fill_": true,
}

// isOptimizerPath matches optimizer code outside torch: apex, Megatron's
// distributed optimizer, bitsandbytes, torchao, transformers.
func isOptimizerPath(fn string) bool {
	return strings.Contains(fn, "/optim/") || strings.Contains(fn, "/optimizer/") ||
		strings.Contains(fn, "/optimizers/") || strings.HasSuffix(fn, "/optimization.py") ||
		strings.Contains(fn, "distrib_optimizer")
}

// lifetime is what the trace says of an allocation beyond its stack: where
// it was freed and which optimizer steps it lived in. An allocation seen
// only in the final snapshot has alive set and nothing else.
type lifetime struct {
	known bool // the trace holds its alloc
	alive bool // never freed within the trace
	free  *stackTraits
	// inStep: allocated inside an Optimizer.step range; stepFree: freed
	// before that range ended. zeroGradFree: freed inside an
	// Optimizer.zero_grad range.
	inStep, stepFree, zeroGradFree bool
	// frameless is set when the trace records stacks for other
	// allocations but none for this one: with Python-only stacks that is
	// the autograd engine's thread (backward), which has no Python frames.
	// framelessFree is the same of its free.
	frameless, framelessFree bool
	// sameSite: it was freed at the line that made it (both stacks have a
	// site, of one text).
	sameSite bool
}

// decide is the role of an allocation made at stack alloc with lifetime lt.
// The user's role rules come first (the innermost matching frame decides);
// then the built-in rules in order (each from a real stack shape; see
// docs/roles.md):
//  1. library scratch (cuBLAS/cuDNN workspace, NCCL) is Workspace;
//  2. made by AccumulateGrad, or freed by zero_grad/.grad = None, it is a
//     Gradient;
//  3. made by optimizer code or inside Optimizer.step: freed before the
//     step ends it is a Temporary, else Optimizer State;
//  4. made while building, moving or loading a module: Parameter;
//  5. made by the autograd engine: freed inside backward it is a Temporary
//     (an activation's gradient, a scratch buffer), else a Gradient (it
//     outlived backward: AccumulateGrad kept it as .grad); recomputed
//     forwards (checkpointing) follow rule 6;
//  6. made in a forward: freed by the backward it is an Activation (saved
//     for backward), freed outside backward a Temporary, still alive an
//     Activation (an output);
//  7. made by a factory or copy in the user's own code outside any module
//     (the batch, its labels): Input;
//  8. made at the line that then freed it: Temporary.
func (c *roleClassifier) decide(alloc *stackTraits, lt lifetime) Role {
	free := lt.free
	freedInBackward := free != nil && (free.is(tBackward) || lt.framelessFree)
	sameSite := free != nil && lt.sameSite
	switch {
	case alloc.user != RoleUnknown:
		return alloc.user
	case alloc.is(tWorkspace):
		return RoleWorkspace
	case alloc.is(tAccumulate), free != nil && free.is(tSetGrad), lt.zeroGradFree:
		return RoleGradient
	case alloc.is(tOptimizer) || lt.inStep:
		if lt.stepFree || (free != nil && free.is(tOptimizer)) {
			return RoleTemporary
		}
		return RoleOptimizerState
	case alloc.is(tParamInit) && !alloc.is(tForward) && !alloc.is(tBackward):
		return RoleParameter
	case (alloc.is(tBackward) || lt.frameless) && !alloc.is(tForward):
		if freedInBackward {
			return RoleTemporary
		}
		return RoleGradient
	case alloc.is(tForward):
		switch {
		case lt.alive || !lt.known:
			return RoleActivation
		case freedInBackward && !sameSite:
			return RoleActivation
		}
		return RoleTemporary
	case alloc.is(tPython) && (alloc.is(tFactory) || alloc.is(tDataLoad)):
		if freedInBackward {
			return RoleActivation
		}
		return RoleInput
	case alloc.is(tPython) && lt.known && !lt.alive:
		switch {
		case freedInBackward:
			return RoleActivation
		case sameSite:
			return RoleTemporary
		}
	}
	return RoleUnknown
}

// window is an event range [first, last) of one annotated stage.
type window struct{ first, last int }

// windowsNamed returns the ranges of the stages whose name starts with
// prefix, in order.
func windowsNamed(stages []Stage, prefix string) []window {
	var out []window
	for i := range stages {
		if strings.HasPrefix(stages[i].Name, prefix) {
			out = append(out, window{stages[i].First, stages[i].Last})
		}
	}
	return out
}

// within returns the window holding event i, if any. Windows of one name
// are in order and do not overlap (a step ends before the next begins), so
// a binary search finds it: a run of 300 steps has 300 windows and a
// million intervals.
func within(ws []window, i int) (window, bool) {
	k := sort.Search(len(ws), func(k int) bool { return ws[k].last > i })
	if k < len(ws) && ws[k].first <= i {
		return ws[k], true
	}
	return window{}, false
}

// classifyRoles decides the role of every interval of the timeline from
// its alloc stack, its free stack and the optimizer's annotated ranges.
func (t *Timeline) classifyRoles(anns []Annotation) { t.classifyRolesBy(anns, rolesPerWorker) }

// classifyRolesBy is classifyRoles with perWorker intervals at least per
// goroutine.
func (t *Timeline) classifyRolesBy(anns []Annotation, perWorker int) {
	ranges := t.stageRanges(anns)
	steps := windowsNamed(ranges, "Optimizer.step#")
	zeroGrads := windowsNamed(ranges, "Optimizer.zero_grad#")
	n := int32(len(t.Events))
	withFrames := false
	for i := range t.Events {
		if t.Events[i].Action == ActionAlloc && t.FramesAt(i).Len() > 0 {
			withFrames = true
			break
		}
	}
	t.roles = make([]Role, len(t.Intervals))
	var byStack []stackTraits
	if t.stackTraits != nil {
		byStack, t.stackTraits = t.stackTraits(), nil
	} else {
		byStack = t.share.traits(t.stacks, t.cat, perWorker)
	}
	t.numberSites(byStack)
	// The blocks alive before the trace have stacks of their own (from
	// the segments), as many as the blocks: read by index too, not
	// through each worker's map (200k blocks of distinct stacks: 0.25 s).
	byBlock := readStacks(t.blockStacks, t.cat, perWorker)
	// Intervals are independent: classify them on every core, each worker
	// with its own cache for the stacks that have no number (blocks alive
	// before the trace, whose frames come from the segments). The user's
	// role rules are read only.
	workers := min(runtime.GOMAXPROCS(0), max(1, len(t.Intervals)/perWorker))
	var wg par.Group
	for w := range workers {
		lo, hi := w*len(t.Intervals)/workers, (w+1)*len(t.Intervals)/workers
		wg.Go(func() {
			c := newRoleClassifier(t.cat)
			for j := lo; j < hi; j++ {
				t.roles[j] = t.classifyRole(c, byStack, byBlock, j, n, withFrames, steps, zeroGrads)
			}
		})
	}
	wg.Wait()
}

// rolesPerWorker is the fewest intervals worth a goroutine of their own.
const rolesPerWorker = 20000

// classifyRole decides the role of interval j; byStack holds the traits of
// each stack of the snapshot (see readStacks), byBlock those of blockStacks.
func (t *Timeline) classifyRole(c *roleClassifier, byStack, byBlock []stackTraits, j int, n int32, withFrames bool, steps, zeroGrads []window) Role {
	iv := &t.Intervals[j]
	var alloc *stackTraits
	switch {
	case iv.Stack != 0:
		alloc = &byStack[iv.Stack-1]
	case iv.block != 0 && int(iv.block) <= len(byBlock):
		alloc = &byBlock[iv.block-1] // a block's frames, from the segments
	default:
		alloc = c.traits(t.FramesOf(iv))
	}
	lt := lifetime{known: !iv.PreWindow(), alive: iv.End == n}
	if iv.PreWindow() && iv.End < n {
		// Its frames are the free's: the alloc is unknown.
		alloc = &c.empty
	}
	if iv.End < n {
		fi := iv.End
		if iv.FreeRequested >= 0 {
			fi = iv.FreeRequested
		}
		lt.free = &c.empty
		if k := iv.FreeStack; k != 0 {
			lt.free = &byStack[k-1]
			if a := iv.Stack; a != 0 && lt.known {
				site := t.siteID[a-1]
				lt.sameSite = site != 0 && site == t.siteID[k-1]
			}
		}
		lt.framelessFree = withFrames && lt.free.is(tEmpty)
		_, lt.zeroGradFree = within(zeroGrads, int(fi))
	}
	if lt.known {
		// alloc is the interval's own stack's traits here (only an
		// interval from before the window has another): empty says it has
		// no frames, without reading the stack (a cache miss an interval).
		lt.frameless = withFrames && alloc.is(tEmpty)
		if w, ok := within(steps, int(iv.Start)); ok {
			lt.inStep = true
			lt.stepFree = iv.End < n && int(iv.End) < w.last
		}
	}
	return c.decide(alloc, lt)
}

// Role is the role of interval j.
func (t *Timeline) Role(j int) Role {
	if j < 0 || j >= len(t.roles) {
		return RoleUnknown
	}
	return t.roles[j]
}

// RoleOfStack is the role of an allocation known only from the snapshot
// (no trace): alive at the dump, made at stack st.
func RoleOfStack(st Stack) Role {
	c := newRoleClassifier(nil)
	return c.decide(c.traits(st), lifetime{alive: true})
}

// RoleTotals sums allocations by role, largest first, in RoleNames order
// on ties.
func RoleTotals(allocs []Allocation) []CategoryTotal {
	var sums [len(roleNames)]CategoryTotal
	for _, a := range allocs {
		s := &sums[a.Role]
		s.Bytes += a.Size
		s.Blocks++
	}
	return roleTotals(sums)
}

// roleTotals orders the sums of each role as RoleTotals does.
func roleTotals(sums [len(roleNames)]CategoryTotal) []CategoryTotal {
	var out []CategoryTotal
	for _, r := range []Role{RoleParameter, RoleGradient, RoleOptimizerState, RoleActivation, RoleInput,
		RoleTemporary, RoleWorkspace, RoleUnknown} {
		if s := sums[r]; s.Blocks > 0 {
			s.Name = r.String()
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(x, y CategoryTotal) int { return cmp.Compare(y.Bytes, x.Bytes) })
	return out
}
