package pickle

import (
	"fmt"
	"testing"

	"memscope/internal/pickletest"
	"memscope/snapshot/schema"
)

// TestTypedStacks: every entry gets its own frames, and equal stacks share
// one array of indices, for few and many distinct stacks.
func TestTypedStacks(t *testing.T) {
	for _, n := range []int{1, 100, 7000} {
		// Entry i gets stack i%n: n distinct stacks of varying depth (0 to
		// 6 frames), then a second round of the same ones.
		want := make([]schema.Stack, n)
		var entries []any
		for i := range 2 * n {
			k := i % n
			var frames []any
			var st []schema.Frame
			for j := range k % 7 {
				file, name := fmt.Sprintf("/src/m%d.py", (k+j)%5), fmt.Sprintf("f%d", j)
				frames = append(frames, pickletest.FrameDict(file, k*10+j, name))
				st = append(st, schema.Frame{Filename: file, Name: name, Line: int64(k*10 + j)})
			}
			want[k] = schema.StackOf(st...)
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
				if fr.Len() > 0 && fr.Key() != frk.Key() {
					t.Fatalf("n=%d workers=%d: entries %d and %d have equal stacks in different arrays", n, workers, k, i)
				}
			}
		}
	}
}

// TestTypedStacksAreTheInternedIDs: a typed stack is a view of the
// graph's interned ids, whatever its length (none is copied), and a stack
// typed before the binder meets a new frame still reads its own frames.
func TestTypedStacksAreTheInternedIDs(t *testing.T) {
	g := &graph{strs: []string{"/src/a.py", "f", "g"}}
	var want [][]uint32
	for i, n := range []int{1, 3, 30, 1000, stackSlab/4 + 1, 5} {
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
	b.typeStacks()
	check := func() {
		t.Helper()
		for i, ids := range want {
			st := b.stacks[i]
			if st.Len() != len(ids) || st.Key() != &g.stacks.get(uint32(i))[0] {
				t.Fatalf("stack %d: len %d, want %d, viewing the interned ids", i, st.Len(), len(ids))
			}
			for j, id := range ids {
				if f := g.frames.at(id); st.At(j).Line != f.line || st.At(j).Name != g.strs[f.name] || st.ID(j) != id {
					t.Fatalf("stack %d frame %d: %+v", i, j, st.At(j))
				}
			}
		}
	}
	check()
	// A frame met while binding (a generic frame dict) grows the table.
	late, _ := g.frames.intern(rawFrame{file: 0, name: 2, line: 7})
	st := b.typedStack(g.stacks.intern([]uint32{late, want[0][0]}))
	if st.Len() != 2 || st.At(0).Line != 7 || st.At(1).Line != 0 {
		t.Fatalf("late stack: %+v %+v", st.At(0), st.At(1))
	}
	check()
}
