package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// matchReference is the categorizer's matching as it was before frames were
// cached: every text of every shown frame split and tried against every
// rule, in rule order.
func matchReference(c *Categorizer, st Stack) Decision {
	type text struct {
		frame int
		parts []string
	}
	var texts []text
	for pass := 0; pass < 2 && len(texts) == 0; pass++ {
		for i, f := range st.All() {
			if IsNoise(*f) || IsProfilerFrame(*f) || (pass == 0 && !strings.HasSuffix(f.Filename, ".py")) {
				continue
			}
			texts = append(texts, text{i, identParts(baseName(f.Filename), nil)}, text{i, identParts(f.Name, nil)})
		}
	}
	for ri, r := range c.rules {
		for _, t := range texts {
			for ki, key := range c.keys[ri] {
				if matchParts(t.parts, key) {
					return Decision{Category: r.Name, Frame: t.frame, Keyword: r.Keywords[ki]}
				}
			}
		}
	}
	return Decision{Category: Unknown, Frame: -1}
}

// TestCachedMatchingAgreesWithReference: the per-frame cache decides every
// stack as matching frame by frame did, on the sample snapshots and on
// random stacks mixing Python and C++ frames, noise, profiler frames and
// names that hit several rules, under the default rules and rules whose
// keywords overlap.
func TestCachedMatchingAgreesWithReference(t *testing.T) {
	var stacks []Stack
	paths, _ := filepath.Glob("../testdata/snapshots/*.pickle")
	for _, p := range paths {
		s, err := Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range s.Segments {
			for i := range seg.Blocks {
				stacks = append(stacks, s.BlockFrames(&seg.Blocks[i]))
			}
		}
		for _, tr := range s.Traces {
			for i := range tr {
				stacks = append(stacks, s.FramesOf(&tr[i]))
			}
		}
	}
	files := []string{"/ws/model/attention.py", "/ws/moe/experts.py", "/usr/lib/python3/site-packages/torch/optim/adam.py",
		"/ws/train.py", "??", "/ws/memory_profiler/hook.py", "/usr/lib/libc10_cuda.so", "C:\\ws\\MultiheadAttention.py", "/ws/Linear.py"}
	names := []string{"forward", "all_gather_into_tensor", "_multi_tensor_adam", "c10::cuda::CUDACachingAllocator::malloc",
		"__torch_dispatch__", "MultiheadAttention", "expert_mlp", "softmax", "at::native::empty_cuda", "<module>", "NCCLComm"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		fr := make([]Frame, rng.IntN(8))
		for i := range fr {
			fr[i] = Frame{Filename: files[rng.IntN(len(files))], Name: names[rng.IntN(len(names))], Line: int64(rng.IntN(500))}
		}
		stacks = append(stacks, StackOf(fr...))
	}
	for _, rules := range [][]Rule{nil, {
		{Name: "A", Keywords: []string{"forward", "attention"}},
		{Name: "B", Keywords: []string{"multihead attention", "adam", "train"}},
		{Name: "C", Keywords: []string{"experts", "all gather"}},
	}} {
		c := NewCategorizer(rules)
		for i, st := range stacks {
			if got, want := c.Decide(st), matchReference(c, st); got != want {
				t.Fatalf("rules %v, stack %d %v: got %+v, want %+v", rules != nil, i, fmt.Sprint(st), got, want)
			}
		}
	}
	if len(stacks) < 6000 {
		t.Errorf("only %d stacks: the comparison proves little", len(stacks))
	}
}

// TestCategorizerTables: stacks of tables on each side of denseMinFrames,
// taken in turn, and frames a table gets after the categorizer read some
// of it (its classes by index then end short of them), are decided as
// matching frame by frame does.
func TestCategorizerTables(t *testing.T) {
	kinds := []Frame{{Filename: "/ws/train.py", Name: "step"}, {Filename: "??", Name: "at::native::empty_cuda"},
		{Filename: "/usr/lib/python3/site-packages/torch/optim/adam.py", Name: "_multi_tensor_adam"},
		{Filename: "/ws/model/attention.py", Name: "forward"}, {Filename: "/ws/moe/experts.py", Name: "expert_mlp"},
		{Filename: "/usr/lib/libc10_cuda.so", Name: "c10::cuda::CUDACachingAllocator::malloc"}}
	table := func(n, shift int) *FrameTable {
		ft := &FrameTable{}
		for i := range n {
			f := kinds[(i+shift)%len(kinds)]
			f.Line = int64(i)
			ft.Frames = append(ft.Frames, f)
		}
		return ft
	}
	tables := []*FrameTable{table(2, 0), table(denseMinFrames-1, 1), table(denseMinFrames, 2), table(200, 3)}
	c := NewCategorizer(nil)
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 400 {
		ft := tables[rng.IntN(len(tables))]
		if round == 200 { // the largest grows
			tables[3].Frames = append(tables[3].Frames, table(10, 5).Frames...)
		}
		ids := make([]uint32, 1+rng.IntN(5))
		for i := range ids {
			ids[i] = uint32(rng.IntN(len(ft.Frames)))
		}
		st := NewStack(ft, ids)
		if got, want := c.Decide(st), matchReference(c, st); got != want {
			t.Fatalf("round %d, a table of %d: stack %v: got %+v, want %+v", round, len(ft.Frames), st, got, want)
		}
	}
	if len(c.byID) != 2 {
		t.Errorf("classes by index for %d tables, want the 2 of %d frames or more", len(c.byID), denseMinFrames)
	}
}

// TestFirstRuleByFirstByte: the rule and keyword firstRule finds through
// its index by first byte are the first, in rule then keyword order, that
// match the parts anywhere (matchParts), for the default rules and for
// user rules whose keywords share first bytes, span several parts or are
// nothing but separators; on part lists made of the keywords' own pieces,
// their prefixes and other words.
func TestFirstRuleByFirstByte(t *testing.T) {
	user, err := ParseRules(strings.NewReader("Caches: kv_cache, kvc, cache\nKernels: k, kernel_launch, ---\nAttention: attn\n"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, rules := range [][]Rule{nil, user} {
		c := NewCategorizer(rules)
		var vocab []string
		for _, keys := range c.keys {
			for _, k := range keys {
				vocab = append(vocab, identParts(k, nil)...)
				if len(k) > 2 {
					vocab = append(vocab, k[:2], k[len(k)-2:])
				}
			}
		}
		vocab = append(vocab, "x", "forward", "module", "py", "self", "k", "kv", "c")
		hits := 0
		for range 5000 {
			parts := make([]string, rng.IntN(6))
			for i := range parts {
				parts[i] = vocab[rng.IntN(len(vocab))]
			}
			want := ruleHit{-1, -1}
		search:
			for ri := range c.keys {
				for ki, key := range c.keys[ri] {
					if matchParts(parts, key) {
						want = ruleHit{ri, ki}
						break search
					}
				}
			}
			if got := c.firstRule(parts); got != want {
				t.Fatalf("parts %q: rule %v, want %v", parts, got, want)
			}
			if want.rule >= 0 {
				hits++
			}
		}
		if hits < 1000 {
			t.Fatalf("only %d of 5000 part lists matched a rule: the test proves little", hits)
		}
	}
}

// TestDecideLiveAtOnce: the categories of a live set of distinct stacks,
// decided one by one below decideAllMin and on every core well over it
// (manyUndecided estimates from a sample), are
// matchReference's, for LiveAt and LiveStats alike, with the default rules
// and user rules. Some stacks recur (decided once), some intervals have no
// frames.
func TestDecideLiveAtOnce(t *testing.T) {
	files := []string{"/ws/model/attention.py", "/ws/moe/experts.py", "/usr/lib/python3/site-packages/torch/optim/adam.py",
		"/ws/train.py", "??", "/ws/memory_profiler/hook.py", "/usr/lib/libc10_cuda.so", "/ws/Linear.py"}
	names := []string{"forward", "all_gather_into_tensor", "_multi_tensor_adam", "c10::cuda::CUDACachingAllocator::malloc",
		"__torch_dispatch__", "expert_mlp", "softmax", "<module>", "step"}
	table := cycledFrames(files, names, 200)
	user := []Rule{{Name: "A", Keywords: []string{"forward", "attention"}}, {Name: "B", Keywords: []string{"adam", "train"}}}
	for _, distinct := range []int{decideAllMin - 1, 2 * decideAllMin} {
		for _, rules := range [][]Rule{nil, user} {
			rng := rand.New(rand.NewPCG(uint64(distinct), 5))
			s := &Snapshot{}
			seen := map[string]bool{}
			var events []TraceEntry
			for len(s.Stacks) < distinct {
				ids := make([]uint32, 1+rng.IntN(8))
				for k := range ids {
					ids[k] = uint32(rng.IntN(len(table.Frames)))
				}
				if key := fmt.Sprint(ids); !seen[key] {
					seen[key] = true
					k := s.AddStack(NewStack(table, ids))
					events = append(events, TraceEntry{Addr: uint64(len(events)+1) << 12, Size: int64(1 + rng.IntN(1<<20)), Stack: k}.With(ActionAlloc))
				}
				if rng.IntN(10) == 0 { // a stack again, or no frames
					k := uint32(rng.IntN(len(s.Stacks) + 1))
					events = append(events, TraceEntry{Addr: uint64(len(events)+1) << 12, Size: 512, Stack: k}.With(ActionAlloc))
				}
			}
			s.Traces = [][]TraceEntry{events}
			tl := Replay(s, 0, NewCategorizer(rules))
			ref := NewCategorizer(rules)
			name := fmt.Sprintf("%d distinct stacks, user rules %v", distinct, rules != nil)
			last := len(events) - 1
			n, bytes, cats := tl.LiveStats(last)
			live := tl.LiveAt(last, 0)
			if n != len(events) || len(live) != n {
				t.Fatalf("%s: %d and %d live, want %d", name, n, len(live), len(events))
			}
			if atOnce := tl.hitIndices != nil; atOnce != (distinct >= decideAllMin) {
				t.Errorf("%s: decided at once %v", name, atOnce)
			}
			if tl.manyUndecided(int32(last)) {
				t.Errorf("%s: the live set, decided, still looks undecided", name)
			}
			var sum int64
			for _, a := range live {
				sum += a.Size
				want := matchReference(ref, a.Frames)
				if got := (Decision{a.Category, int(a.CategoryFrame), a.CategoryKeyword}); got != want {
					t.Fatalf("%s: stack %v: got %+v, want %+v", name, a.Frames, got, want)
				}
			}
			if sum != bytes {
				t.Errorf("%s: LiveStats counts %d bytes, the allocations %d", name, bytes, sum)
			}
			want := CategoryTotals(live, ref)
			slices.SortStableFunc(want, func(a, b CategoryTotal) int { return cmp.Compare(b.Bytes, a.Bytes) })
			got := slices.Clone(cats)
			slices.SortStableFunc(got, func(a, b CategoryTotal) int { return cmp.Compare(b.Bytes, a.Bytes) })
			if len(got) != len(want) {
				t.Fatalf("%s: categories %v, want %v", name, got, want)
			}
			for _, w := range want {
				if !slices.Contains(got, w) {
					t.Fatalf("%s: categories %v, want %v", name, got, want)
				}
			}
		}
	}
}

// TestCategorizeBlocks: the active blocks' categories, decided one by one
// below decideAllMin blocks and on every core from it, are
// matchReference's; blocks without frames are Unknown.
func TestCategorizeBlocks(t *testing.T) {
	files := []string{"/ws/model/attention.py", "/ws/train.py", "??", "/usr/lib/python3/site-packages/torch/optim/adam.py"}
	names := []string{"forward", "c10::cuda::CUDACachingAllocator::malloc", "step", "softmax", "expert_mlp"}
	table := cycledFrames(files, names, 100)
	for _, n := range []int{decideAllMin - 1, decideAllMin} {
		rng := rand.New(rand.NewPCG(uint64(n), 8))
		seg := Segment{Address: 1 << 30, TotalSize: int64(n) << 10, Type: "large"}
		s := &Snapshot{}
		for i := range n {
			ids := make([]uint32, rng.IntN(6)) // some without frames
			for k := range ids {
				ids[k] = uint32(rng.IntN(len(table.Frames)))
			}
			seg.Blocks = append(seg.Blocks, Block{Address: seg.Address + uint64(i)<<10, Size: 1 << 10, RequestedSize: 1 << 10,
				State: StateActiveAllocated, Stack: s.AddStack(NewStack(table, ids))})
		}
		s.Segments = []Segment{seg}
		a := Analyze(s, nil)
		ref := NewCategorizer(nil)
		allocs := a.Devices[0].Allocations
		if len(allocs) != n {
			t.Fatalf("%d blocks: %d allocations", n, len(allocs))
		}
		for _, al := range allocs {
			if got, want := (Decision{al.Category, int(al.CategoryFrame), al.CategoryKeyword}), matchReference(ref, al.Frames); got != want {
				t.Fatalf("%d blocks: block %#x %v: got %+v, want %+v", n, al.Address, al.Frames, got, want)
			}
		}
	}
}

// TestManyUndecided: the sample of a live set says many undecided stacks
// when a live set holds decideAllMin of them or more, not when it holds
// fewer or they are decided.
func TestManyUndecided(t *testing.T) {
	table := &FrameTable{Frames: []Frame{{Filename: "/ws/train.py", Name: "step"}}}
	for _, c := range []struct {
		live, decided int
		want          bool
	}{
		{decideAllMin / 2, 0, false},
		{2 * decideAllMin, 0, true},
		{2 * decideAllMin, 2 * decideAllMin, false},
		{4 * decideAllMin, 2 * decideAllMin, true},
	} {
		s := &Snapshot{}
		var events []TraceEntry
		for i := range c.live {
			k := s.AddStack(NewStack(table, []uint32{0}))
			events = append(events, TraceEntry{Addr: uint64(i+1) << 12, Size: 512, Stack: k}.With(ActionAlloc))
		}
		s.Traces = [][]TraceEntry{events}
		tl := Replay(s, 0, nil)
		tl.buildBounds()
		for j := range c.decided {
			tl.decisionOf(&tl.Intervals[j])
		}
		if got := tl.manyUndecided(int32(len(events) - 1)); got != c.want {
			t.Errorf("%d live, %d decided: many undecided %v, want %v", c.live, c.decided, got, c.want)
		}
	}
}

// TestDecideAllTables: decideAll's stacks over a table at most as large as
// the frames they hold (every frame classified) and over one far larger
// (only theirs), below and from decideAllMin, decide as matchReference,
// under the default rules and rules whose keywords overlap (a frame whose
// file and function hit different rules, the first rule's hit anywhere).
func TestDecideAllTables(t *testing.T) {
	files := []string{"/ws/model/attention.py", "/ws/train.py", "??", "/usr/lib/python3/site-packages/torch/optim/adam.py", "/ws/moe/experts.py",
		"/usr/lib/libc10_cuda.so", "/ws/memory_profiler/hook.py"}
	names := []string{"forward", "c10::cuda::CUDACachingAllocator::malloc", "step", "softmax", "expert_mlp", "backward",
		"all_gather_into_tensor", "MultiheadAttention", "__torch_dispatch__"}
	for _, rules := range [][]Rule{nil, {
		{Name: "A", Keywords: []string{"forward", "attention"}},
		{Name: "B", Keywords: []string{"multihead attention", "adam", "train"}},
		{Name: "C", Keywords: []string{"experts", "all gather"}},
	}} {
		decideAllTables(t, rules, files, names)
	}
}

func decideAllTables(t *testing.T, rules []Rule, files, names []string) {
	for _, frames := range []int{300, 200000} {
		table := cycledFrames(files, names, frames)
		for _, n := range []int{decideAllMin - 1, decideAllMin, 3 * decideAllMin} {
			rng := rand.New(rand.NewPCG(uint64(frames), uint64(n)))
			stacks := make([]Stack, n)
			ids := 0
			for i := range stacks {
				st := make([]uint32, rng.IntN(5)) // some without frames
				for k := range st {
					st[k] = uint32(rng.IntN(frames))
				}
				ids += len(st)
				stacks[i] = NewStack(table, st)
			}
			if (frames > ids) != (frames == 200000) {
				t.Fatalf("%d frames, %d ids: the cases are not the ones meant", frames, ids)
			}
			c, ref := NewCategorizer(rules), NewCategorizer(rules)
			for i, h := range c.decideAll(n, func(i int) Stack { return stacks[i] }) {
				if got, want := c.decision(h), matchReference(ref, stacks[i]); got != want {
					t.Fatalf("rules %v, %d frames, %d stacks: stack %d %v: got %+v, want %+v", rules != nil, frames, n, i, stacks[i], got, want)
				}
			}
		}
	}
}

// TestCategorizeSharedStacks: categorize decides each distinct stack once
// (numbered as the binder interns them: stackNumbers) and gives every
// allocation the decision its own stack gets: allocations that share a
// stack, that hold equal ids elsewhere, that have no frames, and whose
// stack has 1<<16 frames or more, below and from decideAllMin.
func TestCategorizeSharedStacks(t *testing.T) {
	files := []string{"/ws/model/attention.py", "/ws/train.py", "/usr/lib/python3/site-packages/torch/optim/adam.py", "/ws/moe/experts.py"}
	names := []string{"forward", "step", "softmax", "expert_mlp", "backward"}
	table := cycledFrames(files, names, 400)
	rng := rand.New(rand.NewPCG(7, 11))
	shared := make([]Stack, 60)
	for i := range shared {
		ids := make([]uint32, 1+rng.IntN(8))
		for k := range ids {
			ids[k] = uint32(rng.IntN(len(table.Frames)))
		}
		shared[i] = NewStack(table, ids)
	}
	long := make([]uint32, 1<<16+3)
	for k := range long {
		long[k] = uint32(k % len(table.Frames))
	}
	longStacks := []Stack{NewStack(table, long), NewStack(table, long[:1<<16]), NewStack(table, long[:1<<16-1])}
	// Five frames no rule matches, then an optimizer's.
	table.Frames = append(table.Frames, Frame{Filename: "??", Name: "x"}, Frame{Filename: "/ws/optimizer.py", Name: "step"})
	prefixed := []uint32{400, 400, 400, 400, 400, 401}
	longPrefixed := make([]uint32, 1<<16+5)
	copy(longPrefixed, prefixed)
	for k := len(prefixed); k < len(longPrefixed); k++ {
		longPrefixed[k] = 401
	}
	if ref := NewCategorizer(nil); matchReference(ref, NewStack(table, prefixed[:5])) == matchReference(ref, NewStack(table, prefixed)) {
		t.Fatal("the stack and its prefix decide alike: the case is not the one meant")
	}
	for _, n := range []int{100, 3 * decideAllMin} {
		allocs := make([]Allocation, n)
		for i := range allocs {
			switch r := rng.IntN(10); {
			case r == 0:
				// No frames.
			case r == 1:
				// The same ids as a shared stack, in an array of their own.
				s := shared[rng.IntN(len(shared))]
				ids := make([]uint32, s.Len())
				for k := range ids {
					ids[k] = s.ID(k)
				}
				allocs[i].Frames = NewStack(table, ids)
			default:
				allocs[i].Frames = shared[rng.IntN(len(shared))]
			}
		}
		// Stacks of 1<<16 frames and more, and a stack and its prefix
		// (same address, other length) that decide differently.
		for k, st := range longStacks {
			allocs[2+k].Frames, allocs[n-1-k].Frames = st, st
		}
		allocs[0].Frames = NewStack(table, prefixed[:5])
		allocs[1].Frames = NewStack(table, prefixed)
		allocs[n/2].Frames = NewStack(table, prefixed[:5])
		// 1<<16 frames more than its prefix: the same key, were long
		// stacks keyed too.
		allocs[n/2+1].Frames = NewStack(table, longPrefixed[:5])
		allocs[n/2+2].Frames = NewStack(table, longPrefixed)
		categorize(allocs, NewCategorizer(nil), groupStacks(stackNumbers(allocs)))
		ref := NewCategorizer(nil)
		for i, a := range allocs {
			want := matchReference(ref, a.Frames)
			if a.Frames.Len() == 0 {
				want = Decision{Category: Unknown, Frame: -1}
			}
			if got := (Decision{Category: a.Category, Frame: int(a.CategoryFrame), Keyword: a.CategoryKeyword}); got != want {
				t.Fatalf("%d allocations: allocation %d (%d frames): %+v, want %+v", n, i, a.Frames.Len(), got, want)
			}
		}
	}
}

// cycledFrames is a table of n frames whose files and function names cycle
// through files and names (each name for a run of len(files) frames), and
// whose line is the frame's index.
func cycledFrames(files, names []string, n int) *FrameTable {
	table := &FrameTable{}
	for i := range n {
		table.Frames = append(table.Frames, Frame{Filename: files[i%len(files)], Name: names[(i/len(files))%len(names)], Line: int64(i)})
	}
	return table
}

// stackNumbers numbers allocs' stacks as the binder interns them, one
// number for each distinct list of frame ids, for groupStacks.
func stackNumbers(allocs []Allocation) ([]uint32, int) {
	byIDs := map[string]uint32{}
	refs := make([]uint32, len(allocs))
	for i := range allocs {
		st := allocs[i].Frames
		if st.Len() == 0 {
			continue
		}
		ids := make([]uint32, st.Len())
		for k := range ids {
			ids[k] = st.ID(k)
		}
		k := fmt.Sprint(ids)
		if byIDs[k] == 0 {
			byIDs[k] = uint32(len(byIDs) + 1)
		}
		refs[i] = byIDs[k]
	}
	return refs, len(byIDs)
}

// TestGroupStacks: allocations with one stack number share a group, in
// order of their first allocation; 0 and a number past the snapshot's
// stacks are no group.
func TestGroupStacks(t *testing.T) {
	refs := []uint32{3, 0, 1, 3, 4, 1, 5, 2}
	g := groupStacks(refs, 4) // 5 is past the 4 stacks
	wantWhich := []int32{0, -1, 1, 0, 2, 1, -1, 3}
	wantFirst := []int32{0, 2, 4, 7}
	if !slices.Equal(g.which, wantWhich) || !slices.Equal(g.first, wantFirst) {
		t.Fatalf("which %v first %v, want %v %v", g.which, g.first, wantWhich, wantFirst)
	}
}
