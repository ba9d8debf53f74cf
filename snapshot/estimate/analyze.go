package estimate

import (
	"cmp"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"memscope/snapshot"
)

// PhaseTotal is the memory of one phase.
type PhaseTotal struct {
	Name    string
	Bytes   int64
	Tensors int
}

// ModuleTotal is the memory of a merged module pattern: every all-digit
// part of the dotted path becomes "*", so layers.0.mlp and layers.1.mlp
// total under layers.*.mlp; Instances counts the distinct paths merged.
type ModuleTotal struct {
	Pattern   string
	Bytes     int64
	Tensors   int
	Instances int
}

// StackGroup is the tensors created at one identical stack.
type StackGroup struct {
	Frames  snapshot.Stack
	Bytes   int64
	Tensors int
}

// DeviceStats is the analysis of one device of an estimate.
type DeviceStats struct {
	Device string
	// PeakBytes is peak_memory_mb in bytes (the listed sum when absent).
	PeakBytes   int64
	ListedBytes int64
	// UnlistedBytes is peak - listed, never negative: tensors under 1 MiB
	// and the tensor that set the peak, which the writer does not list.
	UnlistedBytes int64
	// PeakBelowListed is set when the file's peak is smaller than the
	// listed sum (reported, not hidden).
	PeakBelowListed bool
	Tensors         int
	Phases          []PhaseTotal
	Modules         []ModuleTotal
	// ModuleTree is the full module hierarchy, root first, each node with
	// the bytes of the tensors created under it.
	ModuleTree  *snapshot.TreeNode
	StackGroups []StackGroup
	Categories  []snapshot.CategoryTotal
	// Allocations are the tensors, largest first.
	Allocations []snapshot.Allocation
}

// Analysis is the analysis of a whole estimate file.
type Analysis struct {
	Estimate *Estimate
	Devices  []DeviceStats
}

// Device returns the stats of a device key, or nil.
func (a *Analysis) Device(key string) *DeviceStats {
	for i := range a.Devices {
		if a.Devices[i].Device == key {
			return &a.Devices[i]
		}
	}
	return nil
}

var reDigits = regexp.MustCompile(`^\d+$`)

// MergedPattern replaces every all-digit part of a dotted module path by "*".
func MergedPattern(module string) string {
	parts := strings.Split(module, ".")
	for i, p := range parts {
		if reDigits.MatchString(p) {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, ".")
}

// Analyze computes the per-device analysis. cat may be nil.
func Analyze(e *Estimate, cat *snapshot.Categorizer) *Analysis {
	if cat == nil {
		cat = snapshot.NewCategorizer(nil)
	}
	a := &Analysis{Estimate: e}
	for i := range e.Devices {
		a.Devices = append(a.Devices, analyzeDevice(&e.Devices[i], cat))
	}
	return a
}

func analyzeDevice(d *Device, cat *snapshot.Categorizer) DeviceStats {
	st := DeviceStats{Device: d.Device, Tensors: len(d.Tensors), ModuleTree: &snapshot.TreeNode{Label: "all"}}
	phases := map[string]*PhaseTotal{}
	type modAcc struct {
		ModuleTotal
		paths map[string]bool
	}
	mods := map[string]*modAcc{}
	groupIdx := map[snapshot.StackKey]int{} // groups in order of first appearance, for stable ties
	var noStack StackGroup
	for i := range d.Tensors {
		t := &d.Tensors[i]
		st.ListedBytes += t.Size
		p := phases[t.Phase]
		if p == nil {
			p = &PhaseTotal{Name: t.Phase}
			phases[t.Phase] = p
		}
		p.Bytes += t.Size
		p.Tensors++
		pat := MergedPattern(t.Module)
		if t.Module == "Unknown" {
			// Tensors made outside any module's forward (parameters,
			// gradients, optimizer state) split by phase, as the
			// profiler's viewer does: one "Unknown" row would hide most of
			// the memory.
			pat = "Unknown (" + t.Phase + ")"
		}
		m := mods[pat]
		if m == nil {
			m = &modAcc{ModuleTotal: ModuleTotal{Pattern: pat}, paths: map[string]bool{}}
			mods[pat] = m
		}
		m.Bytes += t.Size
		m.Tensors++
		m.paths[t.Module] = true
		n := st.ModuleTree
		n.Bytes += t.Size
		n.Blocks++
		for _, part := range strings.Split(t.Module, ".") {
			n = n.Child(part)
			n.Bytes += t.Size
			n.Blocks++
		}
		if t.Create.Len() == 0 {
			noStack.Bytes += t.Size
			noStack.Tensors++
		} else {
			gi, ok := groupIdx[t.Create.Key()]
			if !ok {
				gi = len(st.StackGroups)
				groupIdx[t.Create.Key()] = gi
				st.StackGroups = append(st.StackGroups, StackGroup{Frames: t.Create})
			}
			st.StackGroups[gi].Bytes += t.Size
			st.StackGroups[gi].Tensors++
		}
		st.Allocations = append(st.Allocations, cat.Categorized(snapshot.Allocation{Size: t.Size, RequestedSize: t.Size,
			State: snapshot.StateActiveAllocated, Frames: t.Create,
			Tensor: &snapshot.Tensor{Shape: t.Shape, Module: t.Module, Phase: t.Phase, ReleaseFrames: t.Release}}))
	}
	st.ModuleTree.Finish()
	if math.IsNaN(d.PeakMiB) {
		st.PeakBytes = st.ListedBytes
	} else {
		st.PeakBytes = int64(math.Round(d.PeakMiB * (1 << 20)))
	}
	if st.PeakBytes >= st.ListedBytes {
		st.UnlistedBytes = st.PeakBytes - st.ListedBytes
	} else {
		st.PeakBelowListed = true
	}
	for _, p := range phases {
		st.Phases = append(st.Phases, *p)
	}
	slices.SortFunc(st.Phases, func(a, b PhaseTotal) int { return comparePhases(a.Name, b.Name) })
	for _, m := range mods {
		m.Instances = len(m.paths)
		st.Modules = append(st.Modules, m.ModuleTotal)
	}
	slices.SortFunc(st.Modules, func(a, b ModuleTotal) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Pattern, b.Pattern)
	})
	if noStack.Tensors > 0 {
		st.StackGroups = append(st.StackGroups, noStack)
	}
	slices.SortStableFunc(st.StackGroups, func(a, b StackGroup) int { return cmp.Compare(b.Bytes, a.Bytes) })
	snapshot.SortBySize(st.Allocations, false)
	st.Categories = snapshot.CategoryTotals(st.Allocations, cat)
	return st
}

var phaseOrder = []string{"initialization", "setup_model_and_optimizer", "forward_backward_iter_", "optimizer_step_iter_"}

// comparePhases orders phases as a run goes: initialization, setup, then by
// iteration number forward/backward before the optimizer step; unknown
// names last, alphabetically.
func comparePhases(a, b string) int {
	ka, ia := phaseKey(a)
	kb, ib := phaseKey(b)
	if ka < 2 || kb < 2 {
		if ka != kb {
			return ka - kb
		}
	} else if ka < 4 && kb < 4 && ia != ib {
		return ia - ib
	}
	if ka != kb {
		return ka - kb
	}
	return strings.Compare(a, b)
}

func phaseKey(name string) (order, iter int) {
	for i, p := range phaseOrder {
		if i < 2 && name == p {
			return i, 0
		}
		if i >= 2 && strings.HasPrefix(name, p) {
			n, err := strconv.Atoi(name[len(p):])
			if err == nil {
				return i, n
			}
		}
	}
	return len(phaseOrder), 0
}
