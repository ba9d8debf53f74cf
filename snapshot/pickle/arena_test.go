package pickle

import "testing"

// TestPadShared: padding shares one zero chunk only for whole chunks that
// start on a chunk boundary (on both sides of each edge), reads as zeros
// everywhere, and a write through own changes that element alone.
func TestPadShared(t *testing.T) {
	for _, c := range []struct {
		name       string
		before, n  int
		wantShared int
	}{
		{"less than a chunk", 0, chunkLen - 1, 0},
		{"one chunk", 0, chunkLen, 1},
		{"one chunk and one", 0, chunkLen + 1, 1},
		{"from mid-chunk, the rest of it", 5, chunkLen - 5, 0},
		{"from mid-chunk, one past a chunk", 5, 2*chunkLen - 5 - 1, 0},
		{"from mid-chunk, a whole one after", 5, 2*chunkLen - 5, 1},
		{"three chunks", chunkLen, 3 * chunkLen, 3},
	} {
		var a chunked[uint32]
		for i := range c.before {
			a.push(uint32(i + 1))
		}
		a.padShared(c.n)
		if a.len() != c.before+c.n {
			t.Fatalf("%s: len %d, want %d", c.name, a.len(), c.before+c.n)
		}
		shared := 0
		for _, ch := range a.chunks {
			if a.isZero(ch) {
				shared++
			}
		}
		if shared != c.wantShared {
			t.Errorf("%s: %d shared chunks, want %d", c.name, shared, c.wantShared)
		}
		for i := range uint32(a.len()) {
			want := uint32(0)
			if int(i) < c.before {
				want = i + 1
			}
			if got := *a.at(i); got != want {
				t.Fatalf("%s: element %d is %d, want %d", c.name, i, got, want)
			}
		}
		// Writes through own touch one element; pushes after the
		// padding go to a chunk of their own.
		last := uint32(a.len() - 1)
		a.own(last)
		*a.at(last) = 7
		if c.n > 1 {
			a.own(last - 1)
			if *a.at(last - 1) != 0 {
				t.Errorf("%s: a write reached its neighbour", c.name)
			}
		}
		if a.zero != nil && (a.zero[len(a.zero)-1] != 0 || a.zero[0] != 0) {
			t.Errorf("%s: the shared zero chunk was written", c.name)
		}
		a.push(9)
		if *a.at(last + 1) != 9 || *a.at(last) != 7 {
			t.Errorf("%s: push after padding: %d %d", c.name, *a.at(last), *a.at(last + 1))
		}
	}
}

// TestRecycle: an array's chunks, taken by recycle, become another's new
// chunks, cleared; the shared zero chunk and chunks off the heap are not
// taken.
func TestRecycle(t *testing.T) {
	var from, to chunked[uint32]
	for i := range 2*chunkLen + 3 {
		from.push(uint32(i) | 1)
	}
	from.padShared(chunkLen - 3) // completes the third chunk
	from.padShared(chunkLen)     // a shared one
	heap := map[*uint32]bool{}
	for _, ch := range from.chunks {
		if !from.isZero(ch) {
			heap[&ch[0]] = true
		}
	}
	to.recycle(&from)
	if from.len() != 0 || len(from.chunks) != 0 {
		t.Fatalf("from keeps %d elements in %d chunks", from.len(), len(from.chunks))
	}
	if len(to.spare) != 3 {
		t.Fatalf("%d spare chunks, want 3", len(to.spare))
	}
	// A spare chunk is cleared before it is used: pad reads zeros.
	to.pad(chunkLen)
	for i := range uint32(chunkLen) {
		if *to.at(i) != 0 {
			t.Fatalf("padded element %d is %d", i, *to.at(i))
		}
	}
	for i := range 3 * chunkLen {
		to.push(uint32(i))
	}
	reused := 0
	for _, ch := range to.chunks {
		if heap[&ch[0]] {
			reused++
		}
	}
	if reused != 3 || len(to.spare) != 0 {
		t.Errorf("%d chunks reused, %d spare left; want 3 and 0", reused, len(to.spare))
	}
	for i := range uint32(3 * chunkLen) {
		if got := *to.at(chunkLen + i); got != i {
			t.Fatalf("element %d is %d", chunkLen+i, got)
		}
	}

	// Off the heap: freed, not kept.
	pool := &offHeapPool{}
	off := chunked[uint32]{pool: pool}
	off.push(1)
	var keep chunked[uint32]
	keep.recycle(&off)
	if len(keep.spare) != 0 {
		t.Errorf("a chunk off the heap was kept")
	}
	if n := pool.live.Load(); n != 0 {
		t.Errorf("%d chunks off the heap still live", n)
	}
}

// TestPutIntoJoinedHoles: an explicit PUT to an index a joined helper made
// (a hole in a shared zero chunk of the main machine's memo) is read back,
// and the other holes stay holes.
func TestPutIntoJoinedHoles(t *testing.T) {
	d := newDecoder(nil)
	d.memo.push(0)
	d.memo.padShared(3 * chunkLen)
	idx := uint32(chunkLen + 5)
	if err := d.setMemo(idx, val{k: kInt, i: 42}, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := d.getMemo(idx, 0); err != nil || v.k != kInt || v.i != 42 {
		t.Errorf("entry %d: %v %v, want the int 42", idx, v, err)
	}
	for _, other := range []uint32{idx - 1, idx + 1, idx + chunkLen} {
		if _, err := d.getMemo(other, 0); err == nil {
			t.Errorf("entry %d is no longer a hole", other)
		}
	}
	for i, x := range d.memo.zero {
		if x != 0 {
			t.Fatalf("the shared zero chunk holds %d at %d", x, i)
		}
	}
}

// TestNextWithoutCommit: an element filled in place (next) and abandoned
// is overwritten by what comes next, on both sides of a chunk's edge,
// whether a push, a commit, pad (which reads zeros) or padShared (whose
// shared zero chunk must never take the place of the chunk next made),
// every element reads back as written, and no chunk is made twice.
func TestNextWithoutCommit(t *testing.T) {
	for _, before := range []int{0, 1, chunkLen - 1, chunkLen, chunkLen + 1} {
		for _, after := range []string{"push", "commit", "pad", "padShared"} {
			var a chunked[uint32]
			want := []uint32{}
			for i := range before {
				a.push(uint32(i + 1))
				want = append(want, uint32(i+1))
			}
			*a.next() = 0xdead
			a.abandon()
			switch after {
			case "push":
				a.push(5)
				want = append(want, 5)
			case "commit":
				*a.next() = 6
				if i := a.commit(); int(i) != before {
					t.Fatalf("after %d, commit gave index %d", before, i)
				}
				want = append(want, 6)
			case "pad":
				a.pad(chunkLen + 3)
				want = append(want, make([]uint32, chunkLen+3)...)
			case "padShared":
				a.padShared(2 * chunkLen)
				want = append(want, make([]uint32, 2*chunkLen)...)
			}
			a.push(8)
			want = append(want, 8)
			if a.len() != len(want) {
				t.Fatalf("%d then %s: len %d, want %d", before, after, a.len(), len(want))
			}
			for i, w := range want {
				if got := *a.at(uint32(i)); got != w {
					t.Fatalf("%d then %s: element %d is %#x, want %#x", before, after, i, got, w)
				}
			}
			if a.zero != nil && (a.zero[0] != 0 || a.zero[len(a.zero)-1] != 0) {
				t.Fatalf("%d then %s: the shared zero chunk was written", before, after)
			}
			// The chunk next made is used, not left behind beside another.
			if n := (a.len() + chunkLen - 1) / chunkLen; len(a.chunks) != n {
				t.Errorf("%d then %s: %d chunks for %d elements, want %d", before, after, len(a.chunks), a.len(), n)
			}
		}
	}
}
