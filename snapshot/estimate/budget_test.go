package estimate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"memscope/internal/budget"
)

// tensors is an estimate of one device with n tensors of the given size
// fields.
func tensors(n int, fields string) []byte {
	return []byte(`{"cuda:0": {"peak_memory_mb": 1, "tensors": [` + strings.TrimSuffix(strings.Repeat("{"+fields+"}, ", n), ", ") + `]}}`)
}

// TestTensorWarningsCapped: up to warnMax tensor warnings of a device are
// kept, the rest counted in one more line.
func TestTensorWarningsCapped(t *testing.T) {
	for _, n := range []int{warnMax, warnMax + 1, 5 * warnMax} {
		e, err := Decode(context.Background(), tensors(n, `"size_mb": 1`)) // each: no size_bytes
		if err != nil {
			t.Fatal(err)
		}
		kept, more := 0, ""
		for _, w := range e.Warnings {
			switch {
			case strings.Contains(w, "no size_bytes"):
				kept++
			case strings.Contains(w, "more warnings like these"):
				more = w
			}
		}
		wantMore := ""
		if n > warnMax {
			wantMore = fmt.Sprintf("… and %d more warnings like these", n-warnMax)
		}
		if kept != min(n, warnMax) || more != wantMore || len(e.Devices[0].Tensors) != n {
			t.Errorf("%d warnings: %d kept, %q, %d tensors", n, kept, more, len(e.Devices[0].Tensors))
		}
	}
}

// TestEstimateBudget: a reader holds at most its budget, counting deviceCost a device and tensorCost a tensor
// beside its text: an input just within it is read, the shapes that held
// gigabytes (millions of one-field tensors, of empty devices) are refused.
func TestEstimateBudget(t *testing.T) {
	// With a base of 1 MiB instead of budget.Base, so that the inputs stay
	// small: the most one-field tensors the budget holds, by the costs
	// above (a tensor's text is from its separator's space on: " {...}").
	const field, base = `"size_bytes": 1`, 1 << 20
	text := int64(len("{" + field + "}"))
	fits := func(n int) bool {
		cost := deviceCost + int64(len("cuda:0")) + int64(n)*(tensorCost+text+1) - 1
		return cost <= budget.PerByte*int64(len(tensors(n, field)))+base
	}
	n := 1
	for fits(n + 1) {
		n++
	}
	if _, err := decodeWithin(context.Background(), tensors(n, field), budget.PerByte*int64(len(tensors(n, field)))+base); err != nil {
		t.Errorf("%d tensors, within the budget: %v", n, err)
	}
	for name, data := range map[string][]byte{
		"one tensor more": tensors(n+1, field),
		"devices": []byte(`{"cuda:0": {"peak_memory_mb": 1, "tensors": [{` + field + `}]}, ` +
			strings.TrimSuffix(strings.Repeat(`"cpu": {}, `, 2*base/deviceCost), ", ") + `}`),
	} {
		if _, err := decodeWithin(context.Background(), data, budget.PerByte*int64(len(data))+base); err == nil || !strings.Contains(err.Error(), "needs more than") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
