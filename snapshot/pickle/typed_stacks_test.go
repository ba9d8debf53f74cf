package pickle

import (
	"fmt"
	"testing"

	"memscope/internal/pickletest"
	"memscope/snapshot/schema"
)

// TestTypedStacksAroundTheParallelLimit: below parallelStacks interned
// stacks the binder converts them on one goroutine, from there on several;
// either way every entry gets its own frames, and equal stacks share one
// backing array.
func TestTypedStacksAroundTheParallelLimit(t *testing.T) {
	for _, n := range []int{parallelStacks - 1, parallelStacks, 3*parallelStacks + 7} {
		// Entry i gets stack i%n: n distinct stacks of varying depth (0 to
		// 6 frames), then a second round of the same ones.
		want := make([]schema.Stack, n)
		var entries []any
		for i := range 2 * n {
			k := i % n
			var frames []any
			var st schema.Stack
			for j := range k % 7 {
				file, name := fmt.Sprintf("/src/m%d.py", (k+j)%5), fmt.Sprintf("f%d", j)
				frames = append(frames, pickletest.FrameDict(file, k*10+j, name))
				st = append(st, &schema.Frame{Filename: file, Name: name, Line: int64(k*10 + j)})
			}
			want[k] = st
			entries = append(entries, pickletest.Dict{
				{"action", "alloc"}, {"addr", 4096 * (i + 1)}, {"size", 512}, {"stream", 0}, {"frames", frames},
			})
		}
		data := pickletest.Of(pickletest.Dict{{"segments", []any{}}, {"device_traces", []any{entries}}})
		for _, workers := range []int{1, 3} {
			g, root, err := decodePickle(data)
			if err != nil {
				t.Fatal(err)
			}
			b := newBinder(g, len(data))
			b.workers = workers
			s, err := b.bindRoot(root)
			if err != nil {
				t.Fatal(err)
			}
			tr := s.Traces[0]
			if len(tr) != 2*n {
				t.Fatalf("n=%d workers=%d: %d entries, want %d", n, workers, len(tr), 2*n)
			}
			for i := range tr {
				k := i % n
				fr, frk := s.FramesOf(&tr[i]), s.FramesOf(&tr[k])
				if !fr.Equal(want[k]) {
					t.Fatalf("n=%d workers=%d: entry %d has frames %v, want %v", n, workers, i, fr, want[k])
				}
				if len(fr) > 0 && &fr[0] != &frk[0] {
					t.Fatalf("n=%d workers=%d: entries %d and %d have equal stacks in different arrays", n, workers, k, i)
				}
			}
		}
	}
}

// TestTypedStacksAroundTheSlabSize: typed stacks are cut from arrays of
// typedSlab frames; stacks shorter than, as long as and longer than one
// array, and runs of short stacks that fill one, each get their own frames
// with no room to grow into a neighbour.
func TestTypedStacksAroundTheSlabSize(t *testing.T) {
	g := &graph{strs: []string{"/src/a.py", "f", "g"}}
	var lens []int
	for _, n := range []int{typedSlab - 1, typedSlab, typedSlab + 1, 5} {
		lens = append(lens, n, 3, n)
	}
	for range typedSlab/7 + 3 {
		lens = append(lens, 7)
	}
	var want [][]uint32
	for i, n := range lens {
		ids := make([]uint32, n)
		for j := range ids {
			id, ok := g.frames.intern(rawFrame{file: 0, name: uint32(1 + (i+j)%2), line: int64(i*100000 + j)})
			if !ok {
				t.Fatal("frame table full")
			}
			ids[j] = id
		}
		g.stacks.intern(ids)
		want = append(want, ids)
	}
	b := newBinder(g, 1<<30)
	b.typeStacks(1)
	for i, ids := range want {
		st := b.stacks[i]
		if len(st) != len(ids) || cap(st) != len(ids) {
			t.Fatalf("stack %d: len %d cap %d, want %d", i, len(st), cap(st), len(ids))
		}
		for j, id := range ids {
			if f := g.frames.at(id); st[j].Line != f.line || st[j].Name != g.strs[f.name] {
				t.Fatalf("stack %d frame %d: %+v", i, j, st[j])
			}
		}
	}
}
