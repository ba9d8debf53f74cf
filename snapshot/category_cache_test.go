package snapshot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
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
			for _, b := range seg.Blocks {
				stacks = append(stacks, b.Frames)
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
