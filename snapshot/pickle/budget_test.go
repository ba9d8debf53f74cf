package pickle

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"memscope/internal/budget"
)

// pickle of: MARK, n NONEs, TUPLE (a tuple of n Nones).
func noneTuple(n int) []byte {
	b := []byte{opProto, 4, opMark}
	b = append(b, bytes.Repeat([]byte{opNone}, n)...)
	return append(b, opTuple, opStop)
}

// paddedNoneTuple is noneTuple(n) after pad bytes of NONE POP: an input
// of pad+n+5 bytes.
func paddedNoneTuple(pad, n int) []byte {
	b := append([]byte{opProto, 4}, bytes.Repeat([]byte{opNone, opPop}, pad/2)...)
	b = append(b, opMark)
	b = append(b, bytes.Repeat([]byte{opNone}, n)...)
	return append(b, opTuple, opStop)
}

// pickle of: n MARKs then n TUPLEs (empty tuples nested n deep).
func nestedMarks(n int) []byte {
	b := []byte{opProto, 4}
	b = append(b, bytes.Repeat([]byte{opMark}, n)...)
	b = append(b, bytes.Repeat([]byte{opTuple}, n)...)
	return append(b, opStop)
}

// pickle of: a list grown by n batches of MARK, 1000 NONEs, APPENDS.
func noneList(n int) []byte {
	batch := append(append([]byte{opMark}, bytes.Repeat([]byte{opNone}, 1000)...), opAppends)
	b := []byte{opProto, 4, opEmptyList}
	b = append(b, bytes.Repeat(batch, n)...)
	return append(b, opStop)
}

// pickle of: n times NONE, MEMOIZE, POP (a memo of n Nones).
func memoNones(n int) []byte {
	b := []byte{opProto, 4}
	b = append(b, bytes.Repeat([]byte{opNone, opMemoize, opPop}, n)...)
	return append(b, opNone, opStop)
}

// TestDecoderBudget: each limit of the decoder's memory budget, on both
// sides (checks run every cancelEvery opcodes, so "below" leaves that
// much room), and the hostile 100 MB shapes that cost gigabytes before.
func TestDecoderBudget(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want string // "" decodes
	}{
		{"a stack just under the limit", noneTuple(maxStack - 2*cancelEvery), ""},
		{"a stack over the limit", noneTuple(maxStack + 2*cancelEvery), "values on the pickle stack"},
		{"MARKs nested just under the limit", nestedMarks(maxMarks - 2*cancelEvery), ""},
		{"MARKs nested over the limit", nestedMarks(maxMarks + 2*cancelEvery), "MARKs nest more than"},
		{"100 MB of NONE", append([]byte{opProto, 4}, bytes.Repeat([]byte{opNone}, 100<<20)...), "values on the pickle stack"},
		{"100 MB of MARK", append([]byte{opProto, 4}, bytes.Repeat([]byte{opMark}, 100<<20)...), "MARKs nest more than"},
		{"a list of a million Nones", noneList(1000), ""},
		{"a memo of a million entries", memoNones(1 << 20), ""},
	}
	if !testing.Short() {
		// 25 MB of one-byte items in one list cost 800 MB (a spilled list
		// grows by doubling) against a budget of 2 × 25 MB + 128 MiB.
		cases = append(cases, struct {
			name string
			data []byte
			want string
		}{"25 million one-byte list items", noneList(25000), "decoding needs more than"}, struct {
			name string
			data []byte
			want string
		}{"12 million memo entries of 3 bytes each", memoNones(12 << 20), "decoding needs more than"})
	}
	for _, c := range cases {
		_, _, err := decodePickle(c.data)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestStackLimitScales: past maxStack, a large input's stack may hold a
// value per stackInputBytes of it (a list written in one batch holds all
// its items on the stack: PyTorch's C++ pickler writes a trace so). n
// values after pad bytes may be on it up to n = (pad+n+5)/16, about
// (pad+5)/15: a tuple of that many Nones, less the checks' spacing,
// decodes; one of more is refused.
func TestStackLimitScales(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test decodes two 70 MB inputs")
	}
	const pad = 66 << 20
	const limit = (pad + 5) / (stackInputBytes - 1)
	for _, c := range []struct {
		name string
		n    int
		want string
	}{
		{"a stack past maxStack, under a large input's limit", limit - 2*cancelEvery, ""},
		{"a stack over a large input's limit", limit + 3*cancelEvery, "values on the pickle stack"},
	} {
		if c.n <= maxStack {
			t.Fatalf("%s: %d values, within maxStack", c.name, c.n)
		}
		_, _, err := decodePickle(paddedNoneTuple(pad, c.n))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestStringsInBudget: every distinct string counts strCost and its bytes
// against the budget, a string seen again nothing: at the limit a decoder
// holds, one string more is refused. 100 MB of distinct strings in a list
// took 34 s and 1.75 GB before they counted.
func TestStringsInBudget(t *testing.T) {
	const n = 1 << 20
	limit := budget.Limit(n)
	d := newDecoder(make([]byte, n))
	const s = "0123456789abcdef"
	i := 0
	for d.cost(0)+strCost+int64(len(s)+8) <= limit {
		d.str([]byte(s + strings.Repeat("x", 8-len(strconv.Itoa(i))) + strconv.Itoa(i)))
		i++
	}
	before := d.cost(0)
	d.str([]byte(s + "xxxxxxx0")) // seen: costs nothing
	if d.cost(0) != before {
		t.Errorf("a string seen again cost %d bytes", d.cost(0)-before)
	}
	if err := d.checkBudget(0, 0); err != nil {
		t.Errorf("%d strings, %d of %d bytes: %v", i, d.cost(0), limit, err)
	}
	d.str([]byte(s + "one more"))
	if d.cost(0) != before+strCost+int64(len(s)+8) {
		t.Errorf("a new string of %d bytes cost %d", len(s)+8, d.cost(0)-before)
	}
	if err := d.checkBudget(0, 0); err == nil {
		t.Errorf("%d strings, %d of %d bytes: not refused", i+1, d.cost(0), limit)
	}
}

// TestSparsePutsInBudget: memo entries put far past the memo's end (kept
// in a map) count sparseCost each: 100 MB of them were all held (0.8 GB)
// before. At the limit a decoder holds, one more is refused.
func TestSparsePutsInBudget(t *testing.T) {
	const n = 1 << 20
	limit := budget.Limit(n)
	d := newDecoder(make([]byte, n))
	idx := uint32(1 << 28)
	for d.cost(0)+sparseCost <= limit {
		if err := d.setMemo(idx, val{k: kNone}, 0); err != nil {
			t.Fatal(err)
		}
		idx += 7
	}
	if len(d.memoSparse) == 0 {
		t.Fatal("no entry went to the sparse memo")
	}
	if err := d.checkBudget(0, 0); err != nil {
		t.Errorf("%d sparse entries, %d of %d bytes: %v", len(d.memoSparse), d.cost(0), limit, err)
	}
	if err := d.setMemo(idx, val{k: kNone}, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.checkBudget(0, 0); err == nil {
		t.Errorf("%d sparse entries, %d of %d bytes: not refused", len(d.memoSparse), d.cost(0), limit)
	}
}

// TestStackMovesOffHeap: a stack that grows past stackOffHeapMin values
// (one batch of a list's items, as PyTorch's C++ pickler writes a trace)
// moves off the heap, where it grows without copying, and is given back
// when the decode ends; one that stays under it stays on the heap. Either
// way the list holds its items in order. Near maxStack, where the moved
// stack's room ends, TestDecoderBudget's cases decode or are refused as
// before.
func TestStackMovesOffHeap(t *testing.T) {
	for _, c := range []struct {
		items int
		moved bool
	}{
		{stackOffHeapMin - 2*cancelEvery, false},
		{stackOffHeapMin + 2*cancelEvery, true},
		{4 * stackOffHeapMin, true},
	} {
		// EMPTY_LIST MARK, then BININT2 i for each item, APPENDS.
		b := []byte{opProto, 2, opEmptyList, opMark}
		for i := range c.items {
			b = append(b, opBinInt2, byte(i), byte(i>>8))
		}
		b = append(b, opAppends, opStop)
		d, root, err := decodeOnce(context.Background(), b, nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("%d items: %v", c.items, err)
		}
		if d.stackMoved != c.moved || d.stackMem != nil || d.stack != nil && c.moved {
			t.Errorf("%d items: moved %v (want %v), memory kept %v", c.items, d.stackMoved, c.moved, d.stackMem != nil)
		}
		items := d.g.seq(root)
		if len(items) != c.items {
			t.Fatalf("%d items: the list holds %d", c.items, len(items))
		}
		for i, v := range items {
			if v.k != kInt || v.i != int64(uint16(i)) {
				t.Fatalf("%d items: item %d is %v", c.items, i, v)
			}
		}
	}
}
