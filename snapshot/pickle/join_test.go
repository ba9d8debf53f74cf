package pickle

import (
	"math/rand/v2"
	"testing"
)

// TestJoinRecordsOnAllCores: the helper's trace records copied on several
// cores (each a run of whole chunks of the helper's, freed as copied) are
// the records one core copies, renumbered alike, after a main machine
// whose own records end mid-chunk; and every helper chunk is given back.
func TestJoinRecordsOnAllCores(t *testing.T) {
	const mainRecords = 1000
	for _, n := range []int{10, chunkLen - 1, chunkLen, 2*chunkLen + 17, 3*chunkLen + 5} {
		build := func() *joiner {
			pool := &offHeapPool{}
			rng := rand.New(rand.NewPCG(uint64(n), 5))
			h := &decoder{g: &graph{}}
			h.g.traces.pool = pool
			for i := range n {
				r := rawTrace{addr: uint64(i) << 9, size: int64(rng.IntN(1 << 20)), action: uint32(i % 3),
					cc: noRef, um: noRef, fram: noRef, cid: uint32(i)}
				if i%7 == 0 {
					r.cc, r.um = 3, 4
				}
				if i%5 != 0 {
					r.fram = uint32(n + i)
				}
				h.g.traces.push(r)
			}
			d := &decoder{g: &graph{}}
			d.g.traces.pool = pool
			for i := range mainRecords {
				d.g.traces.push(rawTrace{addr: uint64(i), cc: noRef, um: noRef, fram: noRef})
			}
			return &joiner{d: d, h: h, strs: []uint32{10, 11, 12, 13, 14}, conts: 500,
				traces: mainRecords}
		}
		one := build()
		one.records(1)
		for _, workers := range []int{2, 3, 8} {
			j := build()
			j.records(workers)
			if got, want := j.d.g.traces.len(), one.d.g.traces.len(); got != want || got != mainRecords+n {
				t.Fatalf("%d records, %d workers: %d records after the join, want %d", n, workers, got, mainRecords+n)
			}
			for i := range uint32(j.d.g.traces.len()) {
				if got, want := *j.d.g.traces.at(i), *one.d.g.traces.at(i); got != want {
					t.Fatalf("%d records, %d workers: record %d is %+v, want %+v", n, workers, i, got, want)
				}
			}
			if r := *j.d.g.traces.at(mainRecords + 7); r.action != 11 || r.cc != 13 || r.fram != uint32(n+7)+500 || r.cid != 7+500 {
				t.Fatalf("%d records: record 7 renumbered as %+v", n, r)
			}
			if live := j.h.g.traces.pool.live.Load(); live != int64(len(j.d.g.traces.chunks)) {
				t.Errorf("%d records, %d workers: %d chunks mapped, the main machine holds %d", n, workers, live, len(j.d.g.traces.chunks))
			}
			j.d.g.traces.free()
		}
		one.d.g.traces.free()
	}
}
