package snapshot

import (
	"math/rand/v2"
	"testing"
)

// TestFrameCacheAgreesWithMap puts and gets frames in the same order in a
// frameCache and a Go map, across the growth points (a table of 256 holds
// 192 before it doubles), with overwrites and frames never put; and with
// a dense table (useTable) over the middle of the frames, so that frames
// just before and just after it, and frames of another array, go to the
// table by address.
func TestFrameCacheAgreesWithMap(t *testing.T) {
	for _, dense := range []bool{false, true} {
		for _, n := range []int{0, 1, frameCacheMinSize*3/4 - 1, frameCacheMinSize * 3 / 4, frameCacheMinSize*3/4 + 1, 5000} {
			agreeWithMap(t, n, dense)
		}
	}
}

func agreeWithMap(t *testing.T, n int, dense bool) {
	frames := make([]Frame, n+50) // one table, as a snapshot's frames are
	ptrs := make([]*Frame, len(frames))
	for i := range frames {
		ptrs[i] = &frames[i]
	}
	other := make([]Frame, 20)
	for i := range other {
		ptrs = append(ptrs, &other[i])
	}
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	rng.Shuffle(len(ptrs), func(i, j int) { ptrs[i], ptrs[j] = ptrs[j], ptrs[i] })
	c, m := newFrameCache[int](), map[*Frame]int{}
	if dense {
		c.useTable(&FrameTable{Frames: frames[10 : 30+n/2]})
		if inside, before, after := c.at(&frames[10]), c.at(&frames[9]), c.at(&frames[30+n/2]); inside == nil || before != nil || after != nil {
			t.Fatalf("n=%d: dense slots of the first frame, the one before and the one after: %p %p %p", n, inside, before, after)
		}
	}
	for i := range n {
		c.Put(ptrs[i], i)
		m[ptrs[i]] = i
		if j := rng.IntN(i + 1); rng.IntN(4) == 0 { // overwrite one already there
			c.Put(ptrs[j], -i)
			m[ptrs[j]] = -i
		}
	}
	if c.Len() != len(m) {
		t.Fatalf("%d puts: Len %d, map %d", n, c.Len(), len(m))
	}
	for _, p := range ptrs {
		got, ok := c.Get(p)
		want, wok := m[p]
		if ok != wok || got != want {
			t.Fatalf("%d puts (dense %v): Get = %d, %v; map %d, %v", n, dense, got, ok, want, wok)
		}
	}
}
