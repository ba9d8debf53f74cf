package pickle

import (
	"bytes"
	"context"
	"testing"

	pt "memscope/internal/pickletest"
)

// TestSpanCacheMemoChanged: a frame list whose bytes were seen before is
// taken from the cache, and one whose bytes are the list's just before
// from that (spanCache.last), but neither after BINPUT replaced a memo
// entry it reads: the same bytes then name other frames. Lists shorter than
// the prefix byPrefix hashes (found by their scanned bytes) and longer
// (found by the prefix, without a scan).
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
		// memo: 0 the dict, 1 a list, 2 and 3 frames, then lists.
		w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
		w.Put("a")
		writeList(w, pt.Memoize(pt.FrameDict("/w/a.py", 1, "a")), pt.Memoize(pt.FrameDict("/w/b.py", 2, "b")))
		w.Put("b")
		writeList(w, gets...) // read one by one, then cached
		w.Put("x")
		writeList(w, pt.Ref(3)) // another list between
		w.Put("c")
		writeList(w, gets...) // the same bytes as b: from the cache
		w.Put("c2")
		writeList(w, gets...) // the same bytes as the list before
		w.Put("d")
		w.Put(pt.FrameDict("/w/c.py", 3, "c"))
		w.Op(pt.OpBinPut, 2) // memo 2 is now frame c
		w.Put("e")
		writeList(w, gets...) // the same bytes, other frames
		w.Put("e2")
		writeList(w, gets...) // the list before again, with frame c
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
		if sp := fast.spans; fast.fastLists != 6 || sp.hits != 1 || sp.quick != tc.quick || sp.repeats != 2 {
			t.Fatalf("%d frames: %d lists taken at once, %d from the cache, %d by prefix, %d the list before; want 6, 1, %d and 2",
				2*tc.repeat, fast.fastLists, sp.hits, sp.quick, sp.repeats, tc.quick)
		}
		if a, b := canonical(fast.g, r1), canonical(slow.g, r2); a != b {
			t.Fatalf("%d frames: the cache gave\n%s\nopcode by opcode:\n%s", 2*tc.repeat, a, b)
		}
	}
}

// TestSpanCacheLast: the list before is found again only where its bytes
// follow in full before end (one byte short, or one byte other, is not
// it), also when the cache is off, and not after a reset.
func TestSpanCacheLast(t *testing.T) {
	list := []byte{opLongBinGet, 7, 0, 0, 0, opBinGet, 9, opAppends}
	data := append(append(append([]byte{0xff}, list...), 0xfe), list...)
	second := 1 + len(list) + 1
	for _, off := range []bool{false, true} {
		c := &spanCache{off: off}
		if _, ok := c.again(data, second, len(data)); ok {
			t.Fatalf("off %v: a list found before any was read", off)
		}
		c.read(1, 1+len(list), 42, 2)
		l, ok := c.again(data, second, len(data))
		if !ok || l.start != 42 || l.n != 2 || l.to-l.from != len(list) {
			t.Errorf("off %v: the same bytes: %+v, %v", off, l, ok)
		}
		if _, ok := c.again(data, second, len(data)-1); ok {
			t.Errorf("off %v: found with its last byte past end", off)
		}
		other := bytes.Clone(data)
		other[len(other)-2] = 8
		if _, ok := c.again(other, second, len(other)); ok {
			t.Errorf("off %v: found with one byte other", off)
		}
		c.reset()
		if _, ok := c.again(data, second, len(data)); ok {
			t.Errorf("off %v: found after a reset", off)
		}
	}
	// Giving up keeps it.
	c := &spanCache{}
	c.read(1, 1+len(list), 42, 2)
	for i := range spanTrial {
		c.put(uint64(i), []byte{byte(i), byte(i >> 8), opAppends}, uint32(i), 1)
	}
	if !c.off {
		t.Fatal("the cache did not give up")
	}
	if _, ok := c.again(data, second, len(data)); !ok {
		t.Error("giving up forgot the list before")
	}
}

// TestSpanCacheLimits: the cache turns itself off after spanGiveUp misses
// with fewer than spanHitsPerMiss hits for each when it is full, after
// spanTrial misses when it is not, stays on with as many hits, and keeps
// no more than spanMaxBytes of lists.
func TestSpanCacheLimits(t *testing.T) {
	span := func(i int) []byte { return []byte{opLongBinGet, byte(i), byte(i >> 8), byte(i >> 16), 0, opAppends} }
	for _, tc := range []struct {
		misses, hits int
		full, off    bool
	}{
		{spanGiveUp - 1, 0, true, false},
		{spanGiveUp, 0, true, true},
		{spanGiveUp, spanHitsPerMiss * spanGiveUp, true, false},
		{spanGiveUp, spanHitsPerMiss*spanGiveUp - 1, true, true},
		{spanGiveUp, 0, false, false},
		{spanTrial - 1, 0, false, false},
		{spanTrial, 0, false, true},
		{spanTrial, spanHitsPerMiss * spanTrial, false, false},
		{spanTrial, spanHitsPerMiss*spanTrial - 1, false, true},
	} {
		c := &spanCache{}
		c.put(0, span(0), 0, 1) // the first miss, then the hits: a training loop's first steps
		for range tc.hits {
			if c.get(0, span(0)) == nil {
				t.Fatal("a span put is not found")
			}
		}
		misses := 1
		if tc.full {
			// A list too long for the room left: not kept, a miss.
			c.put(1, bytes.Repeat([]byte{opBinGet}, spanMaxBytes), 1, 1)
			misses++
		}
		for i := misses; i < tc.misses; i++ {
			c.put(uint64(i+1), span(i+1), uint32(i+1), 1)
		}
		if c.off != tc.off || (!c.off && c.full != tc.full) {
			t.Errorf("%d misses, %d hits, full %v: off %v (full %v), want %v", tc.misses, tc.hits, tc.full, c.off, c.full, tc.off)
		}
		if ok := c.get(0, span(0)) != nil; ok == tc.off {
			t.Errorf("%d misses, %d hits, full %v: get after = %v", tc.misses, tc.hits, tc.full, ok)
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

// TestSpanCacheAgain: the list before is a repeat only when its bytes
// begin what follows, whatever its length: shorter than the word again
// compares first, as long, longer; equal in that word and differing
// after it, differing in it, and longer than what is left.
func TestSpanCacheAgain(t *testing.T) {
	for _, tc := range []struct {
		name       string
		last, next string
		want       bool
	}{
		{"short, equal", "abc", "abcXYZ", true},
		{"short, differs", "abc", "abXXYZ", false},
		{"a word, equal", "abcdefgh", "abcdefgh!", true},
		{"a word, differs in it", "abcdefgh", "abcdefgX!", false},
		{"long, equal", "abcdefghijklmnop", "abcdefghijklmnop", true},
		{"long, first word equal, differs after", "abcdefghijklmnop", "abcdefghijklmnoX", false},
		{"long, differs in the first word", "abcdefghijklmnop", "Xbcdefghijklmnop", false},
		{"longer than what is left", "abcdefghijklmnop", "abcdefghijklmno", false},
	} {
		data := []byte(tc.last + tc.next)
		var c spanCache
		c.read(0, len(tc.last), 7, 3)
		l, ok := c.again(data, len(tc.last), len(data))
		if ok != tc.want || ok && (l.start != 7 || l.n != 3) {
			t.Errorf("%s: again = %v, %v; want %v", tc.name, l, ok, tc.want)
		}
	}
}
