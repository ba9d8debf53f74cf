package pickle

import (
	"context"
	"sync"
	"testing"
)

// TestDropHook: each machine tells its drop hook the input it has read
// past, every dropStep bytes, never past the input; input shorter than dropStep gets no call; and decoding gives
// the same values with the hook as without (the hook's caller gives mapped
// pages back, which later reads map again).
func TestDropHook(t *testing.T) {
	needPython(t)
	for _, c := range []struct {
		entries int
		calls   bool
	}{{200, false}, {60000, true}} {
		if c.calls && testing.Short() {
			continue // a 12 MB pickle, decoded twice
		}
		data := genPickle(t, "distinct", c.entries)
		var mu sync.Mutex
		var ranges [][2]int
		drop := func(from, to int) {
			mu.Lock()
			defer mu.Unlock()
			ranges = append(ranges, [2]int{from, to})
		}
		split := splitAt(1.0/32, 0.5)
		with, root1, err1 := decodeWith(context.Background(), data, nil, split, drop, nil)
		without, root2, err2 := decodeWith(context.Background(), data, nil, split, nil, nil)
		if err1 != nil || err2 != nil {
			t.Fatalf("%d entries: %v, %v", c.entries, err1, err2)
		}
		if canonical(with.g, root1) != canonical(without.g, root2) {
			t.Errorf("%d entries: values differ with the hook", c.entries)
		}
		if (len(data) >= dropStep) != c.calls {
			t.Fatalf("%d entries make %d bytes: the case does not test what it says", c.entries, len(data))
		}
		if got := len(ranges) > 0; got != c.calls {
			t.Errorf("%d bytes: hook called %d times", len(data), len(ranges))
		}
		covered := make([]bool, len(data)/dropStep+1)
		for _, r := range ranges {
			if r[0] < 0 || r[1] > len(data) || r[0] >= r[1] {
				t.Errorf("%d bytes: bad range %v", len(data), r)
				continue
			}
			for k := (r[0] + dropStep - 1) / dropStep; (k+1)*dropStep <= r[1]; k++ {
				covered[k] = true
			}
		}
		n := 0
		for _, c := range covered {
			if c {
				n++
			}
		}
		// Both machines drop as they go: the whole 4 MiB steps but the
		// last of each machine's part.
		if c.calls && n < len(data)/dropStep-2 {
			t.Errorf("%d bytes: only %d of %d steps dropped (%v)", len(data), n, len(covered), ranges)
		}
	}
}
