package snapshot

import (
	"math/rand/v2"
	"testing"
)

// TestFrameCacheAgreesWithMap puts and gets frames in the same order in a
// frameCache and a Go map, across the growth points (a table of 256 holds
// 192 before it doubles), with overwrites and frames never put.
func TestFrameCacheAgreesWithMap(t *testing.T) {
	for _, n := range []int{0, 1, frameCacheMinSize*3/4 - 1, frameCacheMinSize * 3 / 4, frameCacheMinSize*3/4 + 1, 5000} {
		frames := make([]Frame, n+50) // one table, as a snapshot's frames are
		ptrs := make([]*Frame, len(frames))
		for i := range frames {
			ptrs[i] = &frames[i]
		}
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		c, m := newFrameCache[int](), map[*Frame]int{}
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
				t.Fatalf("%d puts: Get = %d, %v; map %d, %v", n, got, ok, want, wok)
			}
		}
	}
}
