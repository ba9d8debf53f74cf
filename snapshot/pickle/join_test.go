package pickle

import (
	"fmt"
	"math/rand/v2"
	"strings"
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

// TestJoinContainersOnAllCores: the helper's containers copied on several
// cores (frames, stacks, trace lists and entries renumbered; generic ones
// rebuilt after, in order) are what one core makes of them.
func TestJoinContainersOnAllCores(t *testing.T) {
	for _, n := range []int{5, 2*chunkLen + 33, 3*chunkLen + 1} {
		build := func() *joiner {
			h := newDecoder(nil)
			for i := range n {
				switch i % 5 {
				case 0:
					h.g.conts.push(container{kind: cFrame, start: uint32(i % 3)})
				case 1:
					h.g.conts.push(container{kind: cStack, start: uint32(i % 2), n: 3})
				case 2:
					h.g.conts.push(container{kind: cTraceList, start: uint32(i), n: 4})
				case 3:
					h.g.conts.push(container{kind: cTrace, start: uint32(i)})
				default:
					h.newCont(kList, []val{{k: kInt, i: int64(i)}, {k: kStr, ref: uint32(i % 2)}, {k: kList, ref: uint32(i - 1)}})
				}
			}
			d := newDecoder(nil)
			for range 100 {
				d.g.conts.push(container{kind: cGeneric})
			}
			return &joiner{d: d, h: h, strs: []uint32{7, 8}, frames: []uint32{20, 21, 22}, stacks: []uint32{30, 31},
				conts: 100, traces: 1000}
		}
		canon := func(j *joiner) string {
			var b strings.Builder
			for i := range uint32(j.d.g.conts.len()) {
				c := *j.d.g.conts.at(i)
				fmt.Fprintf(&b, "%d %d %d %d|", c.kind, c.vk, c.start, c.n)
				if c.kind == cGeneric && c.n > 0 {
					fmt.Fprint(&b, j.d.g.seq(val{ref: i}), "|")
				}
			}
			return b.String()
		}
		one := build()
		one.containers(1)
		want := canon(one)
		if got := one.d.g.conts.len(); got != 100+n {
			t.Fatalf("%d containers: %d after the join, want %d", n, got, 100+n)
		}
		for i, want := range []container{{kind: cFrame, start: 20}, {kind: cStack, start: 31, n: 3},
			{kind: cTraceList, start: 1002, n: 4}, {kind: cTrace, start: 1003}} {
			if got := *one.d.g.conts.at(100 + uint32(i)); got != want {
				t.Fatalf("%d containers: helper container %d became %+v, want %+v", n, i, got, want)
			}
		}
		if got, want := fmt.Sprint(one.d.g.seq(val{ref: 104})), fmt.Sprint([]val{{k: kInt, i: 4}, {k: kStr, ref: 7}, {k: kList, ref: 103}}); got != want {
			t.Fatalf("%d containers: helper list 4 holds %s, want %s", n, got, want)
		}
		for _, cores := range []int{2, 3} {
			j := build()
			j.containers(cores)
			if got := canon(j); got != want {
				t.Fatalf("%d containers on %d cores: differ from one core's", n, cores)
			}
		}
	}
}
