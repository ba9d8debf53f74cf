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
