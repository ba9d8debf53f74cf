package snapshot

import (
	"cmp"
	"slices"
)

// TreeNode is a node of an allocation tree: a category, a call site, a
// stack frame, or (as a leaf) one allocation.
type TreeNode struct {
	Label string
	// Frame is set on call-stack nodes.
	Frame  *Frame
	Bytes  int64
	Blocks int
	// Alloc is set on leaves.
	Alloc    *Allocation
	Children []*TreeNode
	index    map[string]*TreeNode
}

// Child returns the child with label, adding it when missing.
func (n *TreeNode) Child(label string) *TreeNode {
	if n.index == nil {
		n.index = map[string]*TreeNode{}
	}
	c := n.index[label]
	if c == nil {
		c = &TreeNode{Label: label}
		n.index[label] = c
		n.Children = append(n.Children, c)
	}
	return c
}

// Finish sorts every level of the tree, largest first (ties by label).
func (n *TreeNode) Finish() {
	n.index = nil
	slices.SortStableFunc(n.Children, func(a, b *TreeNode) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Label, b.Label)
	})
	for _, c := range n.Children {
		c.Finish()
	}
}

func leaf(a *Allocation) *TreeNode {
	return &TreeNode{Label: a.State.String(), Bytes: a.Size, Blocks: 1, Alloc: a}
}

// NoFrames labels allocations without a recorded stack.
const NoFrames = "(no frames recorded)"

// CategoryTree groups allocations by category, then call site (Location),
// then the allocations themselves, largest first at every level.
func CategoryTree(allocs []Allocation) *TreeNode {
	return groupTree(allocs, newSiteNames(), func(a *Allocation) string { return a.Category })
}

// LiveTree is the CategoryTree of LiveAt(i, limit). The sites of the
// timeline's stacks are kept from one call to the next: a cursor moved
// through 20,000 live allocations of distinct stacks found each site again
// (12 ms a move). Like LiveAt, it is for one goroutine at a time.
func (t *Timeline) LiveTree(i, limit int) *TreeNode {
	if t.treeNames == nil {
		t.treeNames = newSiteNames()
	}
	return groupTree(t.LiveAt(i, limit), t.treeNames, func(a *Allocation) string { return a.Category })
}

// RoleTree groups allocations by role (what the memory is), then call
// site, then the allocations themselves.
func RoleTree(allocs []Allocation) *TreeNode {
	return groupTree(allocs, newSiteNames(), func(a *Allocation) string { return a.Role.String() })
}

// groupTree groups allocs by group, then by site, found through names:
// sites by stack and frame, for a live set of 20,000 allocations has a few
// hundred stacks, and each site is a dozen substring tests.
func groupTree(allocs []Allocation, names *siteNames, group func(*Allocation) string) *TreeNode {
	root := &TreeNode{Label: "all"}
	for i := range allocs {
		a := &allocs[i]
		var loc string
		switch {
		case a.Module() != "":
			loc = a.Location()
		case a.Frames.Len() > 0:
			loc = names.of(a.Frames)
			if loc == noStack {
				loc = ""
			}
		}
		if loc == "" {
			loc = NoFrames
		}
		path := []*TreeNode{root, root.Child(group(a))}
		path = append(path, path[1].Child(loc))
		for _, n := range path {
			n.Bytes += a.Size
			n.Blocks++
		}
		path[2].Children = append(path[2].Children, leaf(a))
	}
	root.Finish()
	return root
}

// StackTree is the call-stack tree of the allocations: outermost frame at
// the top, innermost at the bottom, noise frames hidden, each node with the
// bytes and blocks allocated beneath it, allocations as leaves.
func StackTree(allocs []Allocation) *TreeNode { return stackTree(allocs, true) }

// FlameTree is the flame graph of allocations, as memory_viz draws it:
// StackTree (frames outermost first, those memory_viz's frameFilter hides
// left out) without the allocation leaves. Stacks with no shown frame sit
// under NoFrames.
func FlameTree(allocs []Allocation) *TreeNode { return stackTree(allocs, false) }

func stackTree(allocs []Allocation, leaves bool) *TreeNode {
	root := &TreeNode{Label: "all"}
	for i := range allocs {
		a := &allocs[i]
		root.Bytes += a.Size
		root.Blocks++
		n := root
		shown := 0
		for j := a.Frames.Len() - 1; j >= 0; j-- {
			f := a.Frames.At(j)
			if IsNoise(*f) {
				continue
			}
			shown++
			n = n.Child(f.String())
			n.Frame = f
			n.Bytes += a.Size
			n.Blocks++
		}
		if shown == 0 {
			n = n.Child(NoFrames)
			n.Bytes += a.Size
			n.Blocks++
		}
		if leaves {
			n.Children = append(n.Children, leaf(a))
		}
	}
	root.Finish()
	return root
}
