package snapshot

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Unknown is the category of allocations no rule matches (or that have no
// frames at all).
const Unknown = "Unknown"

// Rule assigns a category to a stack when any of its keywords occurs
// (case-insensitively) in the filename or function name of a shown frame
// (Python frames when the stack has any; see Categorizer).
type Rule struct {
	Name     string
	Keywords []string
}

// DefaultRules are tried in order; the first rule with a matching frame wins.
// The order puts specific causes (MoE, attention, optimizer, collectives)
// before generic ones ("forward" marks almost every activation).
var defaultRules = []Rule{
	{"Expert/MoE", []string{"moe", "expert", "router", "token_dispatcher", "grouped_gemm", "deepep", "deep_ep"}},
	{"Attention", []string{"attention", "attn", "flash", "sdpa", "scaled_dot_product", "rotary", "kv_cache"}},
	{"Linear/MatMul", []string{"linear", "matmul", "addmm", "gemm", "bmm", "einsum", "baddbmm"}},
	{"Optimizer State", []string{"optim", "adam", "sgd", "lamb", "lion", "zero_grad", "_multi_tensor", "_fused_adam", "distrib_optimizer"}},
	{"Communication", []string{"nccl", "all_gather", "allgather", "reduce_scatter", "all_to_all", "alltoall", "all_reduce", "allreduce", "distributed_c10d", "c10d", "broadcast", "deepep", "_functional_collectives"}},
	{"FSDP", []string{"fsdp", "flat_param", "fully_shard", "_fsdp_"}},
	{"Gradient", []string{"backward", "autograd", "grad_acc", "accumulate_grad", "_grad", "grad_buffer"}},
	{"Activation", []string{"forward", "activation", "gelu", "relu", "silu", "swiglu", "dropout", "layer_norm", "layernorm", "rmsnorm", "softmax", "checkpoint", "embedding"}},
}

// DefaultRules returns a copy of the built-in category rules.
func DefaultRules() []Rule {
	out := make([]Rule, len(defaultRules))
	for i, r := range defaultRules {
		out[i] = Rule{Name: r.Name, Keywords: append([]string(nil), r.Keywords...)}
	}
	return out
}

// Categorizer assigns categories to stacks, caching by stack identity (equal
// stacks in a snapshot share storage, so this is one lookup per distinct
// stack).
type Categorizer struct {
	rules []Rule
	cache map[*Frame]string
}

// NewCategorizer returns a categorizer over rules (DefaultRules when nil).
func NewCategorizer(rules []Rule) *Categorizer {
	if rules == nil {
		rules = defaultRules
	}
	lower := make([]Rule, len(rules))
	for i, r := range rules {
		kw := make([]string, 0, len(r.Keywords))
		for _, k := range r.Keywords {
			if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
				kw = append(kw, k)
			}
		}
		lower[i] = Rule{Name: r.Name, Keywords: kw}
	}
	return &Categorizer{rules: lower, cache: map[*Frame]string{}}
}

// Names lists the categories in rule order, then Unknown.
func (c *Categorizer) Names() []string {
	out := make([]string, 0, len(c.rules)+1)
	for _, r := range c.rules {
		out = append(out, r.Name)
	}
	return append(out, Unknown)
}

// Category returns the category of a stack.
func (c *Categorizer) Category(st Stack) string {
	if len(st) == 0 {
		return Unknown
	}
	if cat, ok := c.cache[&st[0]]; ok {
		return cat
	}
	cat := c.match(st)
	c.cache[&st[0]] = cat
	return cat
}

// match looks at the Python frames when the stack has any, else at every
// shown frame: C++ frames of the dispatcher (autograd::VariableType,
// at::native) appear under nearly every allocation and would otherwise
// swamp the rules.
func (c *Categorizer) match(st Stack) string {
	lowered := make([]string, 0, 2*len(st))
	for pass := 0; pass < 2 && len(lowered) == 0; pass++ {
		for _, f := range st {
			if IsNoise(f) || (pass == 0 && !strings.HasSuffix(f.Filename, ".py")) {
				continue
			}
			lowered = append(lowered, strings.ToLower(f.Filename), strings.ToLower(f.Name))
		}
	}
	for _, r := range c.rules {
		for _, kw := range r.Keywords {
			for _, s := range lowered {
				if strings.Contains(s, kw) {
					return r.Name
				}
			}
		}
	}
	return Unknown
}

// LoadRules reads a user rules file: one rule a line, "Name: kw1, kw2, ...",
// '#' starts a comment. The file's rules come first, in file order; a
// default rule with the same name is replaced, the other defaults follow.
func LoadRules(path string) ([]Rule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rules, err := ParseRules(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rules, nil
}

// ParseRules parses the rules file format (see LoadRules) and merges it
// with the defaults.
func ParseRules(r io.Reader) ([]Rule, error) {
	var user []Rule
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, kws, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("line %d: expected \"Category: keyword, keyword\"", n)
		}
		var kw []string
		for _, k := range strings.Split(kws, ",") {
			if k = strings.TrimSpace(k); k != "" {
				kw = append(kw, k)
			}
		}
		if len(kw) == 0 {
			return nil, fmt.Errorf("line %d: category %q has no keywords", n, name)
		}
		if strings.EqualFold(name, Unknown) {
			return nil, fmt.Errorf("line %d: %q is the fallback category and takes no keywords", n, Unknown)
		}
		user = append(user, Rule{Name: name, Keywords: kw})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := append([]Rule(nil), user...)
	for _, d := range defaultRules {
		replaced := false
		for _, u := range user {
			if strings.EqualFold(u.Name, d.Name) {
				replaced = true
			}
		}
		if !replaced {
			out = append(out, d)
		}
	}
	return out, nil
}

var noiseNames = []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
	"__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"}
var noiseFiles = []string{"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
	"Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"}

// IsNoise reports whether PyTorch's viewers hide this frame (unwinder,
// interpreter and dispatcher internals).
func IsNoise(f Frame) bool {
	for _, n := range noiseNames {
		if strings.Contains(f.Name, n) {
			return true
		}
	}
	for _, n := range noiseFiles {
		if strings.Contains(f.Filename, n) {
			return true
		}
	}
	return false
}

// Location is where an allocation was made, as "file:line function": the
// first shown Python frame (innermost), else the first shown frame that is
// not allocator or dispatcher plumbing. Those innermost C++ frames are the
// same for every allocation and say nothing about who asked for the memory.
func Location(st Stack) string {
	f, ok := LocationFrame(st)
	if !ok {
		return ""
	}
	return f.String()
}

// plumbing names allocator and dispatcher frames that sit under every
// allocation and never answer "who allocated this".
var plumbing = []string{"CachingAllocator", "c10::cuda::", "at::detail::empty", "at::empty", "empty_strided",
	"empty_cuda", "wrap_kernel_functor", "at::_ops::", "at::native::empty"}

func isPlumbing(f Frame) bool {
	for _, p := range plumbing {
		if strings.Contains(f.Name, p) {
			return true
		}
	}
	return false
}

// LocationFrame is the frame Location formats.
func LocationFrame(st Stack) (Frame, bool) {
	first := -1
	for i, f := range st {
		if IsNoise(f) || isPlumbing(f) {
			continue
		}
		if first < 0 {
			first = i
		}
		if strings.HasSuffix(f.Filename, ".py") {
			return f, true
		}
	}
	if first >= 0 {
		return st[first], true
	}
	return Frame{}, false
}

// Rules returns the categorizer's rules, in order.
func (c *Categorizer) Rules() []Rule {
	out := make([]Rule, len(c.rules))
	copy(out, c.rules)
	return out
}
