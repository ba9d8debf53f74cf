package snapshot

import (
	"runtime"
	"strings"
	"sync"
	"unicode"

	"memscope/internal/par"
)

// Unknown is the category of allocations no rule matches (or that have no
// frames at all).
const Unknown = "Unknown"

// Rule assigns a category to a stack when any of its keywords matches the
// base file name or the function name of a shown frame (Python frames when
// the stack has any; see Categorizer). Names are split into identifier parts
// (at punctuation and camelCase, lower-cased), and a keyword matches a run of
// whole parts: "lamb" matches lamb.py but not <lambda>, "layernorm" matches
// LayerNorm and layer_norm, and folder names never count.
type Rule struct {
	Name     string
	Keywords []string
	// Role marks a role rule (rules file: "role Parameter: kw, …"): Name is
	// a role, and an allocation whose stack has a matching frame takes it
	// before the built-in role rules (see Role).
	Role bool
}

// DefaultRules are tried in order; the first rule with a matching frame wins.
// The order puts specific causes (MoE, attention, optimizer, collectives)
// before generic ones ("forward" marks almost every activation).
var defaultRules = []Rule{
	{Name: "Expert/MoE", Keywords: []string{"moe", "expert", "experts", "router", "token_dispatcher", "grouped_gemm", "deepep", "deep_ep"}},
	{Name: "Attention", Keywords: []string{"attention", "attn", "flash", "sdpa", "scaled_dot_product", "rotary", "kv_cache"}},
	{Name: "Linear/MatMul", Keywords: []string{"linear", "matmul", "addmm", "gemm", "bmm", "einsum", "baddbmm"}},
	{Name: "Optimizer State", Keywords: []string{"optim", "optimizer", "adam", "adamw", "sgd", "lamb", "lion", "zero_grad", "multi_tensor", "fused_adam", "fused_adamw", "distrib_optimizer"}},
	{Name: "Communication", Keywords: []string{"nccl", "all_gather", "reduce_scatter", "all_to_all", "all_reduce", "distributed_c10d", "c10d", "broadcast", "deepep", "functional_collectives"}},
	{Name: "FSDP", Keywords: []string{"fsdp", "flat_param", "fully_shard"}},
	{Name: "Gradient", Keywords: []string{"backward", "autograd", "grad_acc", "accumulate_grad", "grad", "grad_buffer"}},
	{Name: "Activation", Keywords: []string{"forward", "activation", "activations", "gelu", "relu", "silu", "swiglu", "dropout", "layer_norm", "rms_norm", "softmax", "checkpoint", "embedding", "embeddings"}},
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
	// mu guards the caches below the rules: a background export draws
	// the timeline's bands while the UI goroutine reads the live set at
	// the cursor, and both decide stacks.
	mu    sync.Mutex
	rules []Rule
	// keys are the rules' keywords as part runs with separators removed,
	// in rule order: keys[i][j] belongs to rules[i].Keywords[j].
	keys [][]string
	// byFirst lists the keys by their first byte, in rule and keyword
	// order (firstRule).
	byFirst [256][]ruleKey
	// roleRules are the user's role rules, roleKeys their keywords as part
	// runs.
	roleRules []Rule
	roleKeys  [][]string
	cache     map[StackKey]Decision
	// frames caches what the rules make of each (file, function) pair: a
	// long run has hundreds of thousands of distinct stacks but only a few
	// thousand distinct frames, and splitting names into parts is most of
	// the cost of matching (11 s for the Timeline's bands on 1.5M events).
	frames map[[2]string]frameClass
	// byID holds, per table of denseMinFrames frames or more (a
	// snapshot's stacks share one), 1 + the index of each frame's class in
	// classes, by the frame's index (0: not read yet); table and ids are
	// the last one used. A trace of distinct stacks hashed two strings per
	// frame of each: 400k live stacks at a peak, 3.6M frames. Smaller
	// tables (a stack of its own, as estimates make) go by name.
	byID     map[*FrameTable][]int32
	table    *FrameTable
	ids      []int32
	classes  []frameClass
	classIDs map[frameClass]int32
	hits     []classHit // by class, as many as made yet (see classesIn)
}

// denseMinFrames is the smallest table whose frames' classes are kept by
// index: below it, a table's array would cost more than its lookups save.
const denseMinFrames = 64

// frameClass is what matching needs to know about a frame.
type frameClass struct {
	skip       bool // noise or profiler frame: never looked at
	py         bool
	file, name ruleHit // the first rule matching the file's base name, and the function name
}

// ruleHit is the first rule (in rule order) with a keyword matching a
// text, and that keyword's index; rule is -1 when none matches.
type ruleHit struct{ rule, key int }

// Decision says which rule categorised a stack: the frame (index into the
// stack) and the keyword that matched. Frame is -1 for Unknown.
type Decision struct {
	Category string
	Frame    int
	Keyword  string
}

// NewCategorizer returns a categorizer over rules (DefaultRules when nil).
func NewCategorizer(rules []Rule) *Categorizer {
	if rules == nil {
		rules = defaultRules
	}
	var lower, roles []Rule
	for _, r := range rules {
		kw := make([]string, 0, len(r.Keywords))
		for _, k := range r.Keywords {
			if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
				kw = append(kw, k)
			}
		}
		if r.Role {
			roles = append(roles, Rule{Name: r.Name, Keywords: kw, Role: true})
		} else {
			lower = append(lower, Rule{Name: r.Name, Keywords: kw})
		}
	}
	c := &Categorizer{rules: lower, keys: ruleKeys(lower), roleRules: roles, roleKeys: ruleKeys(roles),
		cache: map[StackKey]Decision{}, frames: map[[2]string]frameClass{}}
	for ri, keys := range c.keys {
		for ki, k := range keys {
			if k != "" { // matches nothing: parts are never empty
				c.byFirst[k[0]] = append(c.byFirst[k[0]], ruleKey{int32(ri), int32(ki), k})
			}
		}
	}
	return c
}

// ruleKey is keyword ki of rule ri, as a part run (see ruleKeys).
type ruleKey struct {
	ri, ki int32
	key    string
}

// ruleKeys are the rules' keywords as part runs with separators removed.
func ruleKeys(rules []Rule) [][]string {
	keys := make([][]string, len(rules))
	for i, r := range rules {
		for _, k := range r.Keywords {
			keys[i] = append(keys[i], strings.Join(identParts(k, nil), ""))
		}
	}
	return keys
}

// userRole is the role the user's role rules give a frame (its base file
// name or function name, matched as category keywords are), or
// RoleUnknown.
func (c *Categorizer) userRole(f Frame) Role {
	if c == nil || len(c.roleRules) == 0 || IsNoise(f) || IsProfilerFrame(f) {
		return RoleUnknown
	}
	file, name := identParts(baseName(f.Filename), nil), identParts(f.Name, nil)
	for i, r := range c.roleRules {
		for _, key := range c.roleKeys[i] {
			if matchParts(file, key) || matchParts(name, key) {
				role, _ := ParseRole(r.Name)
				return role
			}
		}
	}
	return RoleUnknown
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
	return c.Decide(st).Category
}

// Decide returns the category of a stack with the frame and keyword that
// decided it.
func (c *Categorizer) Decide(st Stack) Decision {
	if st.Len() == 0 {
		return Decision{Category: Unknown, Frame: -1}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.cache[st.Key()]; ok {
		return d
	}
	d := c.match(st)
	c.cache[st.Key()] = d
	return d
}

// decideOnce is Decide for a caller that keeps its own decision per stack
// (the timeline, by stack number): it skips the cache, whose map of
// hundreds of thousands of distinct stacks cost several times the match
// itself (a peak of 400k live allocations: 0.24 s of hashing for 0.04 s of
// matching).
func (c *Categorizer) decideOnce(st Stack) Decision {
	if st.Len() == 0 {
		return Decision{Category: Unknown, Frame: -1}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.match(st)
}

// match looks at the Python frames when the stack has any, else at every
// shown frame: C++ frames of the dispatcher (autograd::VariableType,
// at::native) appear under nearly every allocation and would otherwise
// swamp the rules.
func (c *Categorizer) match(st Stack) Decision {
	return c.decision(c.hitIn(st, frameClasses{}))
}

// stackHit is what decided a stack's category: the rule (-1 for Unknown),
// its keyword and the frame's index in the stack.
type stackHit struct{ rule, key, frame int32 }

// decision is the Decision h stands for.
func (c *Categorizer) decision(h stackHit) Decision {
	if h.rule < 0 {
		return Decision{Category: Unknown, Frame: -1}
	}
	r := c.rules[h.rule]
	return Decision{Category: r.Name, Frame: int(h.frame), Keyword: r.Keywords[h.key]}
}

// hitIn is match's rule, keyword and frame; classes, when it has ids,
// holds the class of every frame of st by id (classesIn), and hitIn then
// reads nothing else of c but its rules.
func (c *Categorizer) hitIn(st Stack, classes frameClasses) stackHit {
	if classes.ids != nil {
		return classes.hitIn(st)
	}
	// Rule order decides the category; within a rule the innermost frame
	// that matches is the one named (its file name before its function).
	best, frame := ruleHit{rule: -1}, -1
	for pass := 0; pass < 2; pass++ {
		looked := false
		for i := range st.Len() {
			fc := c.classAt(st, i)
			if fc.skip || (pass == 0 && !fc.py) {
				continue
			}
			looked = true
			for _, h := range [2]ruleHit{fc.file, fc.name} {
				if h.rule >= 0 && (best.rule < 0 || h.rule < best.rule) {
					best, frame = h, i
				}
			}
		}
		if looked {
			break
		}
	}
	if best.rule < 0 {
		return stackHit{rule: -1, frame: -1}
	}
	return stackHit{rule: int32(best.rule), key: int32(best.key), frame: int32(frame)}
}

// hitIn is Categorizer.hitIn read from the classes of st's frames: each
// frame's best hit, made once per class (classHit), and the first rule's
// hit ends the search, as nothing can come before it. A peak of 100k live
// allocations on distinct stacks of 30 frames read 3M classes of 40
// bytes each, 110 ms of its report (twice: the blocks, then the peak).
func (x frameClasses) hitIn(st Stack) stackHit {
	best := stackHit{rule: -1, frame: -1}
	for pass := 0; pass < 2; pass++ {
		looked := false
		for i := range st.Len() {
			h := x.hits[x.ids[st.ID(i)]-1]
			if h.skip || (pass == 0 && !h.py) {
				continue
			}
			looked = true
			if h.rule >= 0 && (best.rule < 0 || h.rule < best.rule) {
				best = stackHit{rule: h.rule, key: h.key, frame: int32(i)}
				if h.rule == 0 {
					return best
				}
			}
		}
		if looked {
			break
		}
	}
	return best
}

// classHit is what hitIn reads of a frameClass: its flags and the hit it
// offers, its file's unless its function's rule comes first.
type classHit struct {
	rule, key int32
	skip, py  bool
}

func hitOf(fc frameClass) classHit {
	h := fc.file
	if fc.name.rule >= 0 && (h.rule < 0 || fc.name.rule < h.rule) {
		h = fc.name
	}
	return classHit{rule: int32(h.rule), key: int32(h.key), skip: fc.skip, py: fc.py}
}

// decideAllMin is the fewest stacks decideAll decides on several cores;
// below it, one by one under the lock.
const decideAllMin = 4096

// decideAll is decideOnce for stacks 0 to n-1 (stack(i)), on every core for
// decideAllMin stacks or more of one frame table: each frame of the table
// is classified once, under the lock, and the stacks then read those
// classes alone. A peak of 400k live allocations on distinct stacks was
// 0.13 s of matching one by one.
func (c *Categorizer) decideAll(n int, stack func(i int) Stack) []stackHit {
	out := make([]stackHit, n)
	var table *FrameTable
	for i := range n {
		st := stack(i)
		if st.Len() == 0 {
			continue
		}
		if table == nil {
			table = st.Table()
		}
		if st.Table() != table {
			table = nil // several tables: one by one
			break
		}
	}
	if table == nil || n < decideAllMin {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i := range n {
			out[i] = c.hitIn(stack(i), frameClasses{})
		}
		return out
	}
	ids := 0
	for i := range n {
		ids += stack(i).Len()
	}
	// A table much larger than the stacks read (a trace of millions of
	// distinct frames) has only the frames they hold classified.
	classes := c.classesIn(table, len(table.Frames) <= ids, n, stack)
	workers := min(runtime.GOMAXPROCS(0), n/(decideAllMin/2))
	par.Each(workers, func(w int) {
		for i := w * n / workers; i < (w+1)*n/workers; i++ {
			out[i] = c.hitIn(stack(i), classes)
		}
	})
	return out
}

// frameClasses is the class of each frame of one table, by the frame's
// id: classes[ids[id]-1]. A class is 40 bytes and a table of a trace of
// random line numbers holds millions of frames over a few thousand
// (file, function) pairs, so a frame holds 4 bytes, not its class: 64 MB
// less for 1.6M frames, allocated again at each peak's decision.
type frameClasses struct {
	ids  []int32
	hits []classHit // by class: what hitIn reads of it
}

// classesIn is the class of every frame of t that stacks 0 to n-1 hold,
// or of every frame of t when all is set (a table no larger than the
// stacks' frames); the others' entries are 0. The arrays are the
// categorizer's own (classAt's, kept by table), grown under the lock:
// later calls only add to them, so readers need no lock.
func (c *Categorizer) classesIn(t *FrameTable, all bool, n int, stack func(i int) Stack) frameClasses {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.useIDs(t)
	if all {
		for id := range t.Frames {
			c.classID(t, uint32(id))
		}
	} else {
		for i := range n {
			st := stack(i)
			for k := range st.Len() {
				c.classID(t, st.ID(k))
			}
		}
	}
	for _, fc := range c.classes[len(c.hits):] {
		c.hits = append(c.hits, hitOf(fc))
	}
	return frameClasses{ids: c.ids, hits: c.hits}
}

// useIDs makes t's the index classAt and classID use (c.ids), grown to
// its frames.
func (c *Categorizer) useIDs(t *FrameTable) {
	if t != c.table {
		if c.byID == nil {
			c.byID = map[*FrameTable][]int32{}
		}
		if c.table != nil {
			c.byID[c.table] = c.ids
		}
		c.table, c.ids = t, c.byID[t]
	}
	if len(t.Frames) > len(c.ids) { // new, or the table grew
		c.ids = append(c.ids, make([]int32, len(t.Frames)-len(c.ids))...)
	}
}

// classID is 1 + the index in c.classes of the class of t's frame id,
// classified when first asked; t is c.table (useIDs).
func (c *Categorizer) classID(t *FrameTable, id uint32) int32 {
	if k := c.ids[id]; k != 0 {
		return k
	}
	fc := c.classify(t.Frames[id])
	k, ok := c.classIDs[fc]
	if !ok {
		if c.classIDs == nil {
			c.classIDs = map[frameClass]int32{}
		}
		c.classes = append(c.classes, fc)
		k = int32(len(c.classes))
		c.classIDs[fc] = k
	}
	c.ids[id] = k
	return k
}

func (c *Categorizer) classAt(st Stack, i int) frameClass {
	t, id := st.Table(), st.ID(i)
	if len(t.Frames) < denseMinFrames {
		return c.classify(*st.At(i))
	}
	c.useIDs(t)
	return c.classes[c.classID(t, id)-1]
}

func (c *Categorizer) classify(f Frame) frameClass {
	k := [2]string{f.Filename, f.Name}
	if fc, ok := c.frames[k]; ok {
		return fc
	}
	fc := frameClass{skip: IsNoise(f) || IsProfilerFrame(f), py: strings.HasSuffix(f.Filename, ".py")}
	if !fc.skip {
		fc.file = c.firstRule(identParts(baseName(f.Filename), nil))
		fc.name = c.firstRule(identParts(f.Name, nil))
	}
	c.frames[k] = fc
	return fc
}

// firstRule is the first rule, and its first keyword, that matches parts
// (matchParts). A key matches from part i only if it begins with that
// part's first byte: only those keys are tried at each part (every key at
// every part made classifying a frame 15 us, 4.5 ms of bigtrain's
// analysis).
func (c *Categorizer) firstRule(parts []string) ruleHit {
	best := ruleHit{-1, -1}
	for i, p := range parts {
		if p == "" {
			continue
		}
		for _, k := range c.byFirst[p[0]] {
			if best.rule >= 0 && (int(k.ri) > best.rule || int(k.ri) == best.rule && int(k.ki) >= best.key) {
				break // the keys are in order: none later is first
			}
			if matchFrom(parts, i, k.key) {
				best = ruleHit{int(k.ri), int(k.ki)}
				break
			}
		}
	}
	return best
}

// baseName is the file name without its folders (either separator: Windows
// paths appear in real snapshots).
func baseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}

// identParts splits a name into lower-case identifier parts: at every
// character that is not a letter or digit, and at camelCase boundaries
// ("MultiheadAttention" → multihead, attention; "NCCLComm" → nccl, comm).
func identParts(s string, out []string) []string {
	rs := []rune(s)
	start := -1
	isAlnum := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	for i := 0; i <= len(rs); i++ {
		if i == len(rs) || !isAlnum(rs[i]) {
			if start >= 0 {
				out = append(out, strings.ToLower(string(rs[start:i])))
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev, r := rs[i-1], rs[i]
		upper := unicode.IsUpper(r)
		if upper && (unicode.IsLower(prev) || unicode.IsDigit(prev)) ||
			upper && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]) {
			out = append(out, strings.ToLower(string(rs[start:i])))
			start = i
		}
	}
	return out
}

// matchParts reports whether key (parts joined without separators) equals
// the concatenation of a run of consecutive parts.
func matchParts(parts []string, key string) bool {
	for i := range parts {
		if matchFrom(parts, i, key) {
			return true
		}
	}
	return false
}

// matchFrom says whether parts i, i+1, ... joined begin with key, ending
// at a part's end.
func matchFrom(parts []string, i int, key string) bool {
	rest := key
	for j := i; j < len(parts) && strings.HasPrefix(rest, parts[j]); j++ {
		rest = rest[len(parts[j]):]
		if rest == "" {
			return true
		}
	}
	return false
}

// Rules returns the categorizer's rules, in order: the category rules,
// then the role rules.
func (c *Categorizer) Rules() []Rule {
	out := make([]Rule, 0, len(c.rules)+len(c.roleRules))
	out = append(out, c.rules...)
	return append(out, c.roleRules...)
}
