package trace

import (
	"fmt"
	"strings"
	"testing"

	"memscope/internal/budget"
)

// megatron writes a Megatron trace of n iterations with one sample each
// (every dup-th key written twice, the later with its sample at 2), plus
// an iteration with the given extra fields.
func megatron(n, dup int, extra string) []byte {
	var b strings.Builder
	b.WriteString(`{"0": {"samples": [{"timestamp_s": 0, "allocated_memory_MB": 1}]` + extra + `}`)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `, "%d": {"samples": [{"timestamp_s": %d, "allocated_memory_MB": %d}]}`, i, i, 10+i)
		if dup > 0 && i%dup == 0 {
			fmt.Fprintf(&b, `, "%d": {"samples": [{"timestamp_s": %d, "allocated_memory_MB": 2}]}`, i, i)
		}
	}
	b.WriteString("}")
	return []byte(b.String())
}

// TestIterationBlocks: iterations kept in blocks come out whole and in
// order for counts on each side of a block, with duplicate keys (the later
// wins) in earlier blocks.
func TestIterationBlocks(t *testing.T) {
	for _, n := range []int{1, iterBlock - 1, iterBlock, iterBlock + 1, 3*iterBlock + 7} {
		r, err := ParseMegatron("memory_trace_rank0.json", megatron(n, 97, ""))
		if err != nil {
			t.Fatalf("%d iterations: %v", n, err)
		}
		if len(r.Iterations) != n {
			t.Fatalf("%d iterations read as %d", n, len(r.Iterations))
		}
		for i, it := range r.Iterations {
			want := float64(10 + i)
			if i > 0 && i%97 == 0 {
				want = 2
			}
			if i == 0 {
				want = 1
			}
			if it.Num != i || len(it.Allocated) != 1 || it.Allocated[0] != want {
				t.Fatalf("%d iterations: iteration %d is %d with %v, want %v", n, i, it.Num, it.Allocated, want)
			}
		}
	}
}

// TestUnknownFieldsNamed: up to maxUnknown unknown fields are each named
// in a warning; past that they are counted in one more.
func TestUnknownFieldsNamed(t *testing.T) {
	for _, k := range []int{maxUnknown, maxUnknown + 1, 10 * maxUnknown} {
		var extra strings.Builder
		for i := range k {
			fmt.Fprintf(&extra, `, "odd%d": %d`, i, i)
		}
		r, err := ParseMegatron("memory_trace_rank0.json", megatron(2, 0, extra.String()))
		if err != nil {
			t.Fatal(err)
		}
		named, more := 0, ""
		for _, w := range r.Warnings {
			switch {
			case strings.HasPrefix(w, "unknown iteration field"):
				named++
			case strings.Contains(w, "more unknown fields"):
				more = w
			}
		}
		wantMore := ""
		if k > maxUnknown {
			wantMore = fmt.Sprintf("and %d more unknown fields ignored", k-maxUnknown)
		}
		if named != min(k, maxUnknown) || more != wantMore {
			t.Errorf("%d unknown fields: %d named, %q", k, named, more)
		}
	}
}

// TestTraceBudget: a reader holds at most its input's budget.Limit: input that needs just that is read, one iteration or sample
// more is refused, early and with the limit named; and the shapes that held
// gigabytes (empty iterations, samples, ranks in a log) are refused.
func TestTraceBudget(t *testing.T) {
	// Empty iterations: the budget runs out at limit/iterationCost of them.
	iters := func(n int) []byte {
		var s strings.Builder
		s.WriteString(`{"0": {"samples": [{"timestamp_s": 0, "allocated_memory_MB": 1}]}`)
		for i := 1; i < n; i++ {
			fmt.Fprintf(&s, `, "%d": {}`, i)
		}
		return []byte(s.String() + "}")
	}
	// The input's own size moves the limit: the most iterations whose
	// cost it meets, by their text's length (iters(n) without writing it).
	size := func(n int) int {
		l := len(iters(1)) + (n-1)*len(`, "": {}`)
		for d, lo := 1, 1; lo < n; d, lo = d+1, lo*10 { // keys of d digits: [lo, 10*lo)
			l += d * (min(n, 10*lo) - lo)
		}
		return l
	}
	fits := func(n int) bool { return int64(n)*iterationCost+sampleCost <= budget.Limit(size(n)) }
	lo, hi := 1, 1<<24 // fits(lo), !fits(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	n := lo
	if len(iters(n)) != size(n) {
		t.Fatalf("size(%d) = %d, the text is %d", n, size(n), len(iters(n)))
	}
	if _, err := ParseMegatron("memory_trace_rank0.json", iters(n)); err != nil {
		t.Errorf("%d iterations, at the budget: %v", n, err)
	}
	if _, err := ParseMegatron("memory_trace_rank0.json", iters(n+1)); err == nil || !strings.Contains(err.Error(), "needs more than") {
		t.Errorf("%d iterations, past the budget: %v", n+1, err)
	}
	// A log of a rank a line.
	var log strings.Builder
	for i := range 400000 {
		fmt.Fprintf(&log, "[Rank %d] (after 10 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0 | reserved: 3.0 | max reserved: 4.0\n", i)
	}
	if _, err := ParseLog("train.log", []byte(log.String())); err == nil || !strings.Contains(err.Error(), "needs more than") {
		t.Errorf("a log of 400k ranks: %v", err)
	}
}
