package pickle

import (
	"bytes"
	"context"
	"testing"

	pt "memscope/internal/pickletest"
)

// TestSpanCacheMemoChanged: a frame list whose bytes were seen before is
// taken from the cache, but not after BINPUT replaced a memo entry it
// reads: the same bytes then name other frames.
func TestSpanCacheMemoChanged(t *testing.T) {
	w := &pt.Writer{}
	list := func(gets ...any) { writeList(w, gets...) }
	// memo: 0 the dict, 1 a list, 2 and 3 frames, 4, 5 and 6 lists.
	w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
	w.Put("a")
	list(pt.Memoize(pt.FrameDict("/w/a.py", 1, "a")), pt.Memoize(pt.FrameDict("/w/b.py", 2, "b")))
	w.Put("b")
	list(pt.Ref(2), pt.Ref(3)) // read one by one, then cached
	w.Put("c")
	list(pt.Ref(2), pt.Ref(3)) // the same bytes: from the cache
	w.Put("d")
	w.Put(pt.FrameDict("/w/c.py", 3, "c"))
	w.Op(pt.OpBinPut, 2) // memo 2 is now frame c
	w.Put("e")
	list(pt.Ref(2), pt.Ref(3)) // the same bytes, other frames
	w.Op(pt.OpSetItems, pt.OpStop)
	data := w.Bytes()

	fast, r1, err := decodeWith(context.Background(), data, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow, r2, err := decodeWith(context.Background(), data, nil, nil, nil, nil, noFast)
	if err != nil {
		t.Fatal(err)
	}
	if fast.fastLists != 3 || fast.spans.hits != 1 {
		t.Fatalf("%d lists taken at once, %d from the cache; want 3 and 1", fast.fastLists, fast.spans.hits)
	}
	if a, b := canonical(fast.g, r1), canonical(slow.g, r2); a != b {
		t.Fatalf("the cache gave\n%s\nopcode by opcode:\n%s", a, b)
	}
}

// TestSpanCacheLimits: the cache turns itself off after spanGiveUp misses
// with fewer than a quarter hits, stays on with more, and keeps no more
// than spanMaxBytes of lists.
func TestSpanCacheLimits(t *testing.T) {
	span := func(i int) []byte { return []byte{opLongBinGet, byte(i), byte(i >> 8), byte(i >> 16), 0, opAppends} }
	fill := func(c *spanCache, misses, hits int) {
		for i := range misses {
			c.put(uint64(i), span(i), uint32(i), 1)
		}
		for range hits {
			if _, _, ok := c.get(0, span(0)); !ok && !c.off {
				t.Fatal("a span put is not found")
			}
		}
	}
	for _, tc := range []struct {
		misses, hits int
		off          bool
	}{
		{spanGiveUp - 1, 0, false},
		{spanGiveUp, 0, true},
		{spanGiveUp, spanGiveUp / 4, false},
		{spanGiveUp, spanGiveUp/4 - 1, true},
	} {
		c := &spanCache{}
		fill(c, 0, 0)
		fill(c, 1, tc.hits) // the hits come first: a training loop's first steps
		fill(c, tc.misses-1, 0)
		if c.off != tc.off {
			t.Errorf("%d misses, %d hits: off %v, want %v", tc.misses, tc.hits, c.off, tc.off)
		}
		if _, _, ok := c.get(0, span(0)); ok == tc.off {
			t.Errorf("%d misses, %d hits: get after = %v", tc.misses, tc.hits, ok)
		}
	}

	// Bytes: a span that would pass spanMaxBytes is not kept; one that
	// reaches it exactly is.
	big := func(n int, b byte) []byte { return append(bytes.Repeat([]byte{opBinGet, b}, n/2-1), opAppends, 0)[:n] }
	c := &spanCache{hits: 1 << 30} // never gives up here
	half := big(spanMaxBytes/2, 1)
	c.put(1, half, 1, 1)
	c.put(2, big(spanMaxBytes/2+2, 2), 2, 1)
	if _, _, ok := c.get(2, big(spanMaxBytes/2+2, 2)); ok {
		t.Error("a span past spanMaxBytes was kept")
	}
	c.put(3, big(spanMaxBytes/2, 3), 3, 1)
	if _, _, ok := c.get(3, big(spanMaxBytes/2, 3)); !ok || c.bytes != spanMaxBytes {
		t.Errorf("a span reaching spanMaxBytes exactly: kept %v, %d bytes", ok, c.bytes)
	}
	if start, _, ok := c.get(1, half); !ok || start != 1 {
		t.Errorf("the first span: %d, %v", start, ok)
	}
}
