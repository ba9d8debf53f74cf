package par

import (
	"sync/atomic"
	"testing"
)

// TestWaitRaisesThePanic: every goroutine runs to its end or its panic,
// and Wait panics on the caller's goroutine with one of the values, where
// a recover there catches it; without panics Wait returns.
func TestWaitRaisesThePanic(t *testing.T) {
	for _, panics := range []int{0, 1, 3} {
		var g Group
		var ran atomic.Int32
		for i := range 8 {
			g.Go(func() {
				ran.Add(1)
				if i < panics {
					panic(i)
				}
			})
		}
		got := func() (v any) {
			defer func() { v = recover() }()
			g.Wait()
			return nil
		}()
		if ran.Load() != 8 {
			t.Fatalf("%d panics: %d of 8 goroutines ran", panics, ran.Load())
		}
		if panics == 0 && got != nil || panics > 0 && (got == nil || got.(int) >= panics) {
			t.Fatalf("%d panics: Wait raised %v", panics, got)
		}
	}
}

// TestEach: every index runs once, on the caller's goroutine for one, and
// a panic reaches the caller.
func TestEach(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7} {
		seen := make([]atomic.Int32, n)
		Each(n, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("%d parts: part %d ran %d times", n, i, seen[i].Load())
			}
		}
	}
	for _, n := range []int{1, 3} {
		got := func() (v any) {
			defer func() { v = recover() }()
			Each(n, func(i int) {
				if i == n-1 {
					panic("last")
				}
			})
			return nil
		}()
		if got != "last" {
			t.Fatalf("%d parts: the panic reached the caller as %v", n, got)
		}
	}
}
