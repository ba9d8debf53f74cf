package budget

import (
	"strings"
	"sync"
	"testing"
)

// TestMeter: a meter takes up to its limit, from several goroutines at
// once, and refuses the byte past it, naming the limit.
func TestMeter(t *testing.T) {
	if got := Limit(1000); got != 2000+128<<20 {
		t.Errorf("Limit(1000) = %d", got)
	}
	m := NewMeter(8000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if err := m.Take(1); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := m.Take(1); err == nil || !strings.Contains(err.Error(), "needs more than") {
		t.Errorf("past the limit: %v", err)
	}
}
