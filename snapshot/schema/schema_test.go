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
