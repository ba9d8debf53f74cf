package snapshot

import (
	"cmp"
	"runtime"
	"slices"
	"sort"
	"strings"

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

// The names PyTorch gives the optimizer's annotated ranges (a number
// follows).
const (
	optStep     = "Optimizer.step#"
	optZeroGrad = "Optimizer.zero_grad#"
)

// classifyRoles decides the role of every interval of the timeline from
// its alloc stack, its free stack and the optimizer's annotated ranges.
func (t *Timeline) classifyRoles(anns []Annotation) { t.classifyRolesBy(anns, rolesPerWorker) }

// classifyRolesBy is classifyRoles with perWorker intervals at least per
// goroutine.
func (t *Timeline) classifyRolesBy(anns []Annotation, perWorker int) {
	// Only the optimizer's ranges: a stage pairs with annotations of its
	// own name alone, and a model annotated in every layer has a hundred
	// thousand others (the stages pair them).
	var opt []Annotation
	for _, a := range anns {
		if strings.HasPrefix(a.Name, optStep) || strings.HasPrefix(a.Name, optZeroGrad) {
			opt = append(opt, a)
		}
	}
	ranges := t.stageRanges(opt)
	steps := windowsNamed(ranges, optStep)
	zeroGrads := windowsNamed(ranges, optZeroGrad)
	n := int32(len(t.Events))
	withFrames := false
	for i := range t.Events {
		if t.Events[i].Action() == ActionAlloc && t.FramesAt(i).Len() > 0 {
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
	// Intervals are independent: classify them on every core, each worker
	// with a classifier of its own (the user's role rules are read only).
	workers := min(runtime.GOMAXPROCS(0), max(1, len(t.Intervals)/perWorker))
	var wg par.Group
	for w := range workers {
		lo, hi := w*len(t.Intervals)/workers, (w+1)*len(t.Intervals)/workers
		wg.Go(func() {
			c := newRoleClassifier(t.cat)
			for j := lo; j < hi; j++ {
				t.roles[j] = t.classifyRole(c, byStack, j, n, withFrames, steps, zeroGrads)
			}
		})
	}
	wg.Wait()
}

// rolesPerWorker is the fewest intervals worth a goroutine of their own.
const rolesPerWorker = 20000

// classifyRole decides the role of interval j; byStack holds the traits of
// each stack of the snapshot (see readStacks).
func (t *Timeline) classifyRole(c *roleClassifier, byStack []stackTraits, j int, n int32, withFrames bool, steps, zeroGrads []window) Role {
	iv := &t.Intervals[j]
	alloc := &c.empty // no frames
	if iv.Stack != 0 {
		alloc = &byStack[iv.Stack-1]
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
