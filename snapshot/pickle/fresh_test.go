package pickle

import (
	"testing"

	"memscope/snapshot/schema"
)

// TestFreshSliceIsZero: writing to each page leaves every element the zero
// value, from below one page to many.
func TestFreshSliceIsZero(t *testing.T) {
	for _, n := range []int{0, 1, pageSize/56 - 1, pageSize / 56, pageSize/56 + 1, 100_000} {
		s := freshSlice[schema.Frame](n)
		if len(s) != n {
			t.Fatalf("len %d, want %d", len(s), n)
		}
		for i, f := range s {
			if f != (schema.Frame{}) {
				t.Fatalf("n=%d: element %d is %+v", n, i, f)
			}
		}
	}
}
