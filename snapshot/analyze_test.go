package snapshot

import "testing"

// TestRating: each rating on both sides of its threshold, and none for an
// efficiency no consistent file gives.
func TestRating(t *testing.T) {
	for _, c := range []struct {
		eff      float64
		reserved int64
		want     string
	}{
		{100, 0, "n/a"}, {0, 0, "n/a"},
		{100.01, 1, "inconsistent"}, {476.8, 1, "inconsistent"}, {100, 1, "excellent"},
		{98.01, 1, "excellent"}, {98, 1, "good"}, {95, 1, "good"}, {94.99, 1, "poor"}, {0, 1, "poor"},
	} {
		if got := Rating(c.eff, c.reserved); got != c.want {
			t.Errorf("Rating(%v, %d) = %q, want %q", c.eff, c.reserved, got, c.want)
		}
	}
}
