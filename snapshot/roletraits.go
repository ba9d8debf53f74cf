package snapshot

// What the role rules read of a stack and of its frames (traits), and the
// traits of a snapshot's stacks read once, on every core.

import (
	"runtime"
	"strings"
	"sync"

	"memscope/internal/pages"
	"memscope/internal/par"
)

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
