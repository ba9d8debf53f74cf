package pickle

import (
	"bytes"
	"context"
	"testing"

	pt "memscope/internal/pickletest"
)

// TestSpanCacheMemoChanged: a frame list whose bytes were seen before is
// taken from the cache, but not after BINPUT replaced a memo entry it
// reads: the same bytes then name other frames. Lists shorter than the
// prefix byPrefix hashes (found by their scanned bytes) and longer (found
// by the prefix, without a scan).
func TestSpanCacheMemoChanged(t *testing.T) {
	for _, tc := range []struct {
		repeat int // the list is frames 2, 3 this many times
		quick  int // lists found by their prefix
	}{{1, 0}, {spanPrefix/10 - 1, 0}, {(spanPrefix + 9) / 10, 1}, {spanPrefix/10 + 4, 1}} {
		// A list of r repeats is 10r+1 bytes: its prefix holds only its
		// own bytes from r = spanPrefix/10 on; shorter lists are keyed by
		// the bytes that follow them too, which differ here.
		w := &pt.Writer{}
		var gets []any
		for range tc.repeat {
			gets = append(gets, pt.Ref(2), pt.Ref(3))
		}
		// memo: 0 the dict, 1 a list, 2 and 3 frames, 4, 5 and 6 lists.
		w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
		w.Put("a")
		writeList(w, pt.Memoize(pt.FrameDict("/w/a.py", 1, "a")), pt.Memoize(pt.FrameDict("/w/b.py", 2, "b")))
		w.Put("b")
		writeList(w, gets...) // read one by one, then cached
		w.Put("c")
		writeList(w, gets...) // the same bytes: from the cache
		w.Put("d")
		w.Put(pt.FrameDict("/w/c.py", 3, "c"))
		w.Op(pt.OpBinPut, 2) // memo 2 is now frame c
		w.Put("e")
		writeList(w, gets...) // the same bytes, other frames
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
		if fast.fastLists != 3 || fast.spans.hits != 1 || fast.spans.quick != tc.quick {
			t.Fatalf("%d frames: %d lists taken at once, %d from the cache, %d by prefix; want 3, 1 and %d",
				2*tc.repeat, fast.fastLists, fast.spans.hits, fast.spans.quick, tc.quick)
		}
		if a, b := canonical(fast.g, r1), canonical(slow.g, r2); a != b {
			t.Fatalf("%d frames: the cache gave\n%s\nopcode by opcode:\n%s", 2*tc.repeat, a, b)
		}
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
			if c.get(0, span(0)) == nil && !c.off {
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
		if ok := c.get(0, span(0)) != nil; ok == tc.off {
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
	if c.get(2, big(spanMaxBytes/2+2, 2)) != nil {
		t.Error("a span past spanMaxBytes was kept")
	}
	c.put(3, big(spanMaxBytes/2, 3), 3, 1)
	if ok := c.get(3, big(spanMaxBytes/2, 3)) != nil; !ok || c.bytes != spanMaxBytes {
		t.Errorf("a span reaching spanMaxBytes exactly: kept %v, %d bytes", ok, c.bytes)
	}
	if s := c.get(1, half); s == nil || s.start != 1 {
		t.Errorf("the first span: %+v", s)
	}
}
