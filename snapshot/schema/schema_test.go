package schema

import (
	"fmt"
	"math"
	"testing"
)

// TestFrameString holds Frame.String to the format it always had
// ("file:line function", no line when it is not positive), which sites and
// stacks are named by.
func TestFrameString(t *testing.T) {
	for _, f := range []Frame{
		{Filename: "train.py", Name: "forward", Line: 42},
		{Filename: "train.py", Name: "forward", Line: 1},
		{Filename: "??", Name: "at::native::empty_cuda(c10::ArrayRef<long>)", Line: 0},
		{Filename: "/x/ü.py", Name: "f\x1b[31m", Line: math.MaxInt64},
		{Filename: "a.py", Name: "g", Line: -1}, // a line that did not fit an int64
		{},
	} {
		want := fmt.Sprintf("%s %s", f.Filename, f.Name)
		if f.Line > 0 {
			want = fmt.Sprintf("%s:%d %s", f.Filename, f.Line, f.Name)
		}
		if got := f.String(); got != want {
			t.Errorf("%#v: %q, want %q", f, got, want)
		}
	}
}

func BenchmarkFrameString(b *testing.B) {
	f := Frame{Filename: "/usr/lib/python3/site-packages/torch/nn/modules/linear.py", Name: "forward", Line: 125}
	for b.Loop() {
		_ = f.String()
	}
}

// TestStackSources: a frame's line of code is the table's by index, ""
// where the table has none for it (a snapshot's: no sources at all; an
// estimate's stack whose frame came without a line), and stacks that share
// a table see the same.
func TestStackSources(t *testing.T) {
	f := func(n int64) Frame { return Frame{Filename: "/w/m.py", Line: n, Name: "f"} }
	st := StackWithSources([]Frame{f(1), f(2), f(3)}, []string{"a = 1", ""})
	for i, want := range []string{"a = 1", "", ""} {
		if got := st.Source(i); got != want {
			t.Errorf("frame %d: source %q, want %q", i, got, want)
		}
	}
	if got := StackOf(f(1)).Source(0); got != "" {
		t.Errorf("a stack without sources: %q", got)
	}
	table := &FrameTable{Frames: []Frame{f(1), f(2)}, Sources: []string{"x", "y"}}
	if a, b := NewStack(table, []uint32{1, 0}), NewStack(table, []uint32{0}); a.Source(0) != "y" || a.Source(1) != "x" || b.Source(0) != "x" {
		t.Errorf("by index: %q %q %q", a.Source(0), a.Source(1), b.Source(0))
	}
	if st := StackWithSources(nil, []string{"x"}); st.Len() != 0 {
		t.Errorf("no frames: %d", st.Len())
	}
}

// TestStackOf: a TraceEntry.Stack or Block.Stack names Stacks[n-1] for n
// from 1 to len(Stacks); 0 and any number past them name no stack.
func TestStackOf(t *testing.T) {
	s := &Snapshot{}
	a := s.AddStack(StackOf(Frame{Filename: "/a.py", Line: 1, Name: "f"}))
	b := s.AddStack(StackOf(Frame{Filename: "/b.py", Line: 2, Name: "g"}, Frame{Filename: "/c.py", Line: 3, Name: "h"}))
	if s.AddStack(Stack{}) != 0 {
		t.Fatal("an empty stack got a number")
	}
	for _, c := range []struct {
		ref  uint32
		want int // frames
	}{{0, 0}, {a, 1}, {b, 2}, {b + 1, 0}, {1 << 31, 0}} {
		if got := s.StackOf(c.ref).Len(); got != c.want {
			t.Errorf("StackOf(%d): %d frames, want %d", c.ref, got, c.want)
		}
		blk := Block{Stack: c.ref}
		e := TraceEntry{Stack: c.ref}
		if s.BlockFrames(&blk).Len() != c.want || s.FramesOf(&e).Len() != c.want {
			t.Errorf("%d: a block and an entry do not read the number as StackOf does", c.ref)
		}
	}
}
