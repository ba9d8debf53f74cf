package pickle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestJoinRecordsOnAllCores: the helper's trace records, copied after the
// main machine's on several cores, are each the helper's record renumbered
// (its frames resolved through the main machine's memo, to a list or, for
// another value, set aside), for main machines whose records end anywhere in a chunk
// (empty, mid-chunk, one short of a chunk, at a chunk boundary, one past)
// and helpers with fewer, as many and more records than complete it; the
// main machine's own records are unchanged and every chunk the main
// machine does not hold is given back.
func TestJoinRecordsOnAllCores(t *testing.T) {
	for _, mainRecords := range []int{0, 1000, chunkLen - 1, chunkLen, chunkLen + 1} {
		fill := (chunkLen - mainRecords%chunkLen) % chunkLen
		for _, n := range []int{0, 1, 10, fill - 1, fill, fill + 1, chunkLen - 1, chunkLen, chunkLen + 1, 2*chunkLen + 17, 3*chunkLen + 5} {
			if n < 0 {
				continue
			}
			rng := rand.New(rand.NewPCG(uint64(n), 5))
			helperRecs := make([]rawTrace, n)
			for i := range helperRecs {
				r := rawTrace{addr: uint64(i) << 9, size: int64(rng.IntN(1 << 20)), action: uint32(i % 3),
					fram: noRef, cid: uint32(i)}
				if i%7 == 0 {
					r.setExtra(1 + uint32(i%2)) // the helper's extras 1 and 2
				}
				if i%5 != 0 {
					r.fram = uint32(n + i)
				}
				if i%11 == 0 {
					// Frames the helper could not read: memo entry 0 of
					// the main machine is a list, 1 a dict.
					r.fram = uint32(i % 2)
					r.mark(hasFramesRef)
				}
				helperRecs[i] = r
			}
			strs := []uint32{10, 11, 12, 13, 14}
			extras := []uint32{7, 3}
			want := func(i int) rawTrace {
				r := helperRecs[i]
				r.action = strs[r.action]
				if x := r.extra(); x != 0 {
					r.setExtra(extras[x-1])
				}
				r.cid += 500
				switch {
				case r.has()&hasFramesRef != 0 && r.fram == 0:
					r.fram = 42
					r.unmark(hasFramesRef)
				case r.has()&hasFramesRef != 0: // odd: stays as it was
				case r.fram != noRef:
					r.fram += 500
				}
				return r
			}
			for _, workers := range []int{1, 2, 3, 8} {
				pool := &offHeapPool{}
				h := &decoder{g: &graph{}}
				h.g.traces.pool = pool
				for _, r := range helperRecs {
					h.g.traces.push(r)
				}
				d := &decoder{g: &graph{}}
				d.g.traces.pool = pool
				for i := range mainRecords {
					d.g.traces.push(rawTrace{addr: uint64(i), fram: noRef})
				}
				for _, v := range []val{{k: kList, ref: 42}, {k: kDict, ref: 43}} {
					r, _ := d.memoRef(v)
					d.memo.push(r)
				}
				j := &joiner{d: d, h: h, strs: strs, extras: extras, conts: 500, traces: uint32(mainRecords), memoAt: 2}
				odd := j.records(workers)
				for i := range n {
					if r := helperRecs[i]; r.has()&hasFramesRef != 0 && r.fram == 1 {
						if v, ok := odd[uint32(i)]; !ok || v != (val{k: kDict, ref: 43}) {
							t.Fatalf("main %d, helper %d, %d workers: record %d's frames resolve to %v (%v)", mainRecords, n, workers, i, v, ok)
						}
						delete(odd, uint32(i))
					}
				}
				if len(odd) > 0 {
					t.Fatalf("main %d, helper %d, %d workers: %d records taken for odd wrongly", mainRecords, n, workers, len(odd))
				}
				if got := d.g.traces.len(); got != mainRecords+n {
					t.Fatalf("main %d, helper %d, %d workers: %d records after the join", mainRecords, n, workers, got)
				}
				for i := range mainRecords {
					if r := *d.g.traces.at(uint32(i)); r.addr != uint64(i) || r.extra() != 0 {
						t.Fatalf("main %d, helper %d, %d workers: the main machine's record %d became %+v", mainRecords, n, workers, i, r)
					}
				}
				for i := range n {
					if got := *d.g.traces.at(uint32(mainRecords + i)); got != want(i) {
						t.Fatalf("main %d, helper %d, %d workers: helper record %d is %+v, want %+v", mainRecords, n, workers, i, got, want(i))
					}
				}
				if live := pool.live.Load(); live != int64(len(d.g.traces.chunks)) || len(d.g.traces.chunks) != (mainRecords+n+chunkMask)/chunkLen {
					t.Errorf("main %d, helper %d, %d workers: %d chunks mapped, the main machine holds %d", mainRecords, n, workers, live, len(d.g.traces.chunks))
				}
				// The main machine goes on after the join.
				d.g.traces.push(rawTrace{addr: 1 << 40})
				if r := *d.g.traces.at(uint32(mainRecords + n)); r.addr != 1<<40 {
					t.Fatalf("main %d, helper %d: the record pushed after the join reads %+v", mainRecords, n, r)
				}
				d.g.traces.free()
				if live := pool.live.Load(); live != 0 {
					t.Errorf("main %d, helper %d: %d chunks left mapped", mainRecords, n, live)
				}
			}
		}
	}
}

// TestJoinContainersOnAllCores: the helper's containers copied on several
// cores (frames, stacks, trace lists and entries renumbered; generic ones
// keep their items where the helper put them, renumbered, spilled ones
// too) are what one core makes of them, and the main machine's own
// containers keep theirs.
func TestJoinContainersOnAllCores(t *testing.T) {
	big := make([]val, chunkLen+5) // spilled: more than a chunk
	for i := range big {
		big[i] = val{k: kStr, ref: uint32(i % 2)}
	}
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
			h.newCont(kTuple, big)
			d := newDecoder(nil)
			for i := range 99 {
				d.newCont(kList, []val{{k: kInt, i: int64(i)}, {k: kStr, ref: 1}})
			}
			d.newCont(kList, make([]val, chunkLen+1)) // the main machine's spilled list: 100 kNones
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
		if got := one.d.g.conts.len(); got != 100+n+1 {
			t.Fatalf("%d containers: %d after the join, want %d", n, got, 100+n+1)
		}
		if got := one.d.g.seq(val{k: kList, ref: 99}); len(got) != chunkLen+1 || got[0].k != kNone {
			t.Fatalf("%d containers: the main machine's spilled list holds %d items, first %v", n, len(got), got[0])
		}
		for i := range uint32(99) {
			if got, want := fmt.Sprint(one.d.g.seq(val{k: kList, ref: i})), fmt.Sprint([]val{{k: kInt, i: int64(i)}, {k: kStr, ref: 1}}); got != want {
				t.Fatalf("%d containers: the main machine's list %d holds %s, want %s", n, i, got, want)
			}
		}
		spilled := one.d.g.seq(val{k: kTuple, ref: 100 + uint32(n)})
		if len(spilled) != len(big) || spilled[0] != (val{k: kStr, ref: 7}) || spilled[len(big)-1] != (val{k: kStr, ref: 7 + uint32(len(big)-1)%2}) {
			t.Fatalf("%d containers: the helper's spilled tuple became %d items (%v ... %v)", n, len(spilled), spilled[0], spilled[len(spilled)-1])
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

// TestJoinStacksOnAllCores: a helper's stacks, looked up on several cores
// and the missing ones interned after, each become the main machine's
// stack of the same frames: the main machine's own stacks keep their
// numbers, new ones are numbered in the order the helper made them (two
// that become the same stack once renumbered, one), a frame the helper
// named by memo index resolves through the main machine's memo, and a
// memo entry that is no frame makes no stack. Helpers with one stack short
// of two goroutines' share and one past it, on 1 to 8 cores.
func TestJoinStacksOnAllCores(t *testing.T) {
	if got := joinParts(8, 2*joinStacksMin-1); got != 1 {
		t.Fatalf("%d stacks went to %d goroutines, want 1", 2*joinStacksMin-1, got)
	}
	if got := joinParts(8, 2*joinStacksMin); got != 2 {
		t.Fatalf("%d stacks went to %d goroutines, want 2", 2*joinStacksMin, got)
	}
	for _, c := range []struct {
		n     int
		procs []int
		refs  bool // some frames named by memo index
	}{
		{0, []int{1, 2}, true}, {1, []int{1, 2}, true}, {2*joinStacksMin - 1, []int{1, 2, 3, 8}, true},
		{2*joinStacksMin + 1, []int{1, 2, 3, 8}, true}, {5 * joinStacksMin, []int{1, 2, 3, 8}, true},
		// None: the new stacks are packed in the helper's slabs (several
		// slabs, and stacks alone in theirs).
		{2*joinStacksMin + 1, []int{2}, false}, {12 * joinStacksMin, []int{1, 2, 8}, false},
	} {
		for _, procs := range c.procs {
			n := c.n
			rng := rand.New(rand.NewPCG(uint64(n), 9))
			// Helper frame f is main frame 2f+1; main memo entry 0 is
			// frame 7, entry 1 a list.
			d, h := newDecoder(nil), newDecoder(nil)
			for _, v := range []val{{k: kFrame, ref: 7}, {k: kList, ref: 3}} {
				r, _ := d.memoRef(v)
				d.memo.push(r)
			}
			var mainStacks [][]uint32
			for range 300 {
				ids := make([]uint32, 1+rng.IntN(6))
				for k := range ids {
					ids[k] = 2*uint32(rng.IntN(40)) + 1
				}
				d.g.stacks.intern(ids)
			}
			for id := range d.g.stacks.len() {
				mainStacks = append(mainStacks, append([]uint32(nil), d.g.stacks.get(uint32(id))...))
			}
			want := make([][]uint32, n) // the main machine's frames of each helper stack; nil: none
			for i := range n {
				// Helper stack i: the first of these not made before.
				for int(h.g.stacks.len()) == i {
					var hs, w []uint32
					list := false
					depth := 1 + rng.IntN(6)
					if !c.refs && i%5000 == 7 {
						depth = stackSlab/4 + 1 + rng.IntN(3) // alone in its slab
					}
					for range depth {
						switch x := rng.IntN(100); {
						case x == 0 && c.refs: // by memo index: a frame
							hs, w = append(hs, frameMemoRef), append(w, 7) // memo index 0
						case x == 1 && i%4 == 0 && c.refs: // by memo index: a list
							hs, list = append(hs, frameMemoRef|1), true
						default:
							f := uint32(rng.IntN(60))
							hs, w = append(hs, f), append(w, 2*f+1)
						}
					}
					if h.g.stacks.intern(hs) == uint32(i) && !list {
						want[i] = w
					}
				}
			}
			j := &joiner{d: d, h: h, memoAt: 2, frames: make([]uint32, 60)}
			for f := range j.frames {
				j.frames[f] = 2*uint32(f) + 1
			}
			j.stacks = make([]uint32, n)
			j.internStacks(procs)
			name := fmt.Sprintf("%d helper stacks, %d cores, memo refs %v", n, procs, c.refs)
			for id, ids := range mainStacks {
				if !slices.Equal(d.g.stacks.get(uint32(id)), ids) {
					t.Fatalf("%s: the main machine's stack %d changed", name, id)
				}
			}
			next := uint32(len(mainStacks))
			seen := map[string]uint32{}
			for id := range d.g.stacks.len() {
				seen[fmt.Sprint(d.g.stacks.get(uint32(id)))] = uint32(id)
			}
			if len(seen) != d.g.stacks.len() {
				t.Fatalf("%s: the table holds a stack twice", name)
			}
			for i, w := range want {
				got := j.stacks[i]
				if w == nil {
					if got != noRef {
						t.Fatalf("%s: stack %d has a list for a frame, got stack %d", name, i, got)
					}
					continue
				}
				if !slices.Equal(d.g.stacks.get(got), w) {
					t.Fatalf("%s: stack %d became %v, want %v", name, i, d.g.stacks.get(got), w)
				}
				if got > next {
					t.Fatalf("%s: stack %d numbered %d, the next new number is %d", name, i, got, next)
				}
				if got == next {
					next++
				}
			}
			if int(next) != d.g.stacks.len() {
				t.Fatalf("%s: %d stacks in the table, %d numbered", name, d.g.stacks.len(), next)
			}
			// A stack is marked named exactly when it holds a frame read
			// by memo index: adopted ones are never scanned for one.
			for id := range d.g.stacks.len() {
				if ids := d.g.stacks.get(uint32(id)); d.g.stacks.isNamed(uint32(id)) != hasPlaceholders(ids) {
					t.Fatalf("%s: stack %d %v marked named %v", name, id, ids, d.g.stacks.isNamed(uint32(id)))
				}
			}
			// The new stacks keep their ids in the helper's slabs, the
			// last of which the main machine's next stacks fill: they
			// must not overwrite one another.
			var later [][]uint32
			for k := range 3000 {
				ids := []uint32{1000 + uint32(k), 3, uint32(k)}
				if got := d.g.stacks.intern(ids); got != uint32(d.g.stacks.len()-1) {
					t.Fatalf("%s: a later stack found as %d", name, got)
				}
				later = append(later, ids)
			}
			for i, w := range want {
				if w != nil && !slices.Equal(d.g.stacks.get(j.stacks[i]), w) {
					t.Fatalf("%s: stack %d became %v after later stacks, want %v", name, i, d.g.stacks.get(j.stacks[i]), w)
				}
			}
			for k, ids := range later {
				if got := d.g.stacks.get(uint32(int(next) + k)); !slices.Equal(got, ids) {
					t.Fatalf("%s: later stack %d is %v, want %v", name, k, got, ids)
				}
			}
		}
	}
}

// TestJoinCollects: a join collects garbage first for input over
// GCThreshold only: at the first join, and at a later one once the joined
// helpers' stack tables add up to joinGCMin (each side of both bounds).
func TestJoinCollects(t *testing.T) {
	big := make([]byte, GCThreshold+1) // never written: no pages
	for _, c := range []struct {
		name    string
		n       int
		joined  int
		garbage int64
		want    bool
	}{
		{"small input", GCThreshold, 0, 0, false},
		{"first join", GCThreshold + 1, 0, 0, true},
		{"later, little garbage", GCThreshold + 1, 3, joinGCMin - 1, false},
		{"later, enough garbage", GCThreshold + 1, 3, joinGCMin, true},
		{"small input, much garbage", GCThreshold, 3, 10 * joinGCMin, false},
	} {
		d := &decoder{data: big[:c.n], joined: make([]*joiner, c.joined), joinGarbage: c.garbage}
		if got := d.collectBeforeJoin(); got != c.want {
			t.Errorf("%s: collects %v, want %v", c.name, got, c.want)
		}
	}
	// A table's memory: at least its ids, slots and references.
	var st stackTable
	for i := range 5000 {
		st.intern([]uint32{uint32(i), uint32(i + 1), 7})
	}
	if got, least := st.heapBytes(), int64(5000*3*4+5000*8+5000*12); got < least {
		t.Errorf("a table of 5000 stacks of 3 holds %d bytes, at least %d", got, least)
	}
}

// TestFrameNamedAgreesWithResolve: the join's read-only resolution of a
// stack's placeholder (frameNamed, run on every core) names the frame
// resolve names, for every kind of memo entry a placeholder may reach:
// the main machine's frames and other values below the boundary, an
// earlier helper's entries, the helper's own frames, chains of memo reads
// memoized again, holes, and indices past the helper's memo.
func TestFrameNamedAgreesWithResolve(t *testing.T) {
	d, early, h := newDecoder(nil), newDecoder(nil), newDecoder(nil)
	push := func(dec *decoder, v val) {
		r, ok := dec.memoRef(v)
		if !ok {
			t.Fatalf("no memo reference for %v", v)
		}
		dec.memo.push(r)
	}
	// The main machine's entries 0-4: frames 7 and 9, a list, a string,
	// a hole.
	for _, v := range []val{{k: kFrame, ref: 7}, {k: kFrame, ref: 9}, {k: kList, ref: 3}, {k: kStr, ref: 2}} {
		push(d, v)
	}
	d.memo.push(0)
	// An earlier helper joined at 5: its entries 5-8 are its frame 1 (main
	// frame 11), a read of main entry 1, a read of its own entry 5, a list.
	ej := &joiner{d: d, h: early, memoAt: 5, hbase: 0, frames: []uint32{10, 11}, stacks: []uint32{}}
	for _, v := range []val{{k: kFrame, ref: 1}, {k: kRef, ref: 1}, {k: kRef, ref: 5}, {k: kList, ref: 0}} {
		push(early, v)
	}
	ej.memoEnd = 9
	for range 4 {
		d.memo.push(0) // the main memo holds the joined helper's entries as holes here
	}
	d.joined = append(d.joined, ej)
	// The helper being joined, at 9, after a prefix of 2 entries: its own
	// entries 9-14 are its frame 0 (main frame 20), a read of main entry 0,
	// of the earlier helper's entry 7, of its own entry 9, a dict, and a
	// read of the dict.
	j := &joiner{d: d, h: h, memoAt: 9, hbase: 2, frames: []uint32{20, 21}}
	h.memo.push(0)
	h.memo.push(0)
	for _, v := range []val{{k: kFrame, ref: 0}, {k: kRef, ref: 0}, {k: kRef, ref: 7}, {k: kRef, ref: 9}, {k: kDict, ref: 4}, {k: kRef, ref: 13}} {
		push(h, v)
	}
	j.memoEnd = 15
	frames := 0
	for idx := uint32(0); idx < 20; idx++ {
		got, ok := j.frameNamed(idx)
		want := j.resolve(val{k: kRef, ref: idx})
		if ok != (want.k == kFrame) || ok && got != want.ref {
			t.Errorf("memo entry %d: frameNamed gives %d, %v; resolve gives %+v", idx, got, ok, want)
		}
		if ok {
			frames++
		}
	}
	if frames != 9 { // 0, 1, 5, 6, 7, 9, 10, 11, 12
		t.Errorf("%d entries named frames, want 9", frames)
	}
}

// TestCollectAfter: binding collects after it for input over GCThreshold,
// or when decoding and binding allocated over heapGCMin, on both sides of
// each; heapAllocs counts what was allocated, collected or not.
func TestCollectAfter(t *testing.T) {
	for _, c := range []struct {
		size      int
		allocated uint64
		want      bool
	}{
		{GCThreshold, 0, false},
		{GCThreshold + 1, 0, true},
		{1 << 20, heapGCMin, false},
		{1 << 20, heapGCMin + 1, true},
	} {
		if got := collectAfter(c.size, c.allocated); got != c.want {
			t.Errorf("%d bytes of input, %d allocated: %v, want %v", c.size, c.allocated, got, c.want)
		}
	}
	before := heapAllocs()
	garbage := make([]byte, 32<<20)
	runtime.KeepAlive(garbage)
	runtime.GC() // a collection in between does not hide it
	if got := heapAllocs() - before; got < 32<<20 {
		t.Errorf("%d bytes allocated after allocating 32 MiB", got)
	}
	// A decode counts from its own start.
	if d := newDecoder(nil); heapAllocs()-d.g.allocs0 > 1<<20 {
		t.Errorf("a new decoder counts %d bytes allocated", heapAllocs()-d.g.allocs0)
	}
}

// TestLastJoinAddsUnplaced: the last join adds a helper's new stacks
// without placing them in the table's slots; the table stays whole: the
// main machine's lookups after the join (a third device's trace, whose
// stacks repeat the second's) find them, two of them that are one stack
// once their placeholders are resolved (a PyTorch sample whose frames
// the helper read by memo index) are added once, so it holds no stack
// twice and as many as one machine's, and placed later each is found at
// its own id. Joins before the last place theirs.
func TestLastJoinAddsUnplaced(t *testing.T) {
	needPython(t)
	sample, err := os.ReadFile("../../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_bf16_128.pickle")
	if err != nil {
		t.Fatal(err)
	}
	const either = -1
	type shape struct {
		shape   string // genTraces', or "" for the sample
		targets []float64
		pending int // stacks left unplaced at the end: 1, 0 or either
	}
	cases, n := []shape{
		{"shared", []float64{0.5}, 1},
		{"distinct", []float64{0.5}, 1},
		{"shared", []float64{0.3, 0.6}, 1}, // the first join places its stacks
		{"multishared", []float64{0.5}, 0}, // its region ends with the second device's trace
		{"", []float64{0.4}, either},
	}, 30000
	if testing.Short() { // -race: 44 s of the CI's step otherwise
		cases, n = cases[2:], 10000
	}
	for _, c := range cases {
		name, data := "sample", sample
		if c.shape != "" {
			name, data = c.shape, genPickle(t, c.shape, n)
		}
		name += fmt.Sprint(c.targets)
		one, _, err := decodeWith(context.Background(), data, nil, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		two := decodeCompare(t, name, data, splitAt(1.0/32, c.targets...))
		if len(two.joined) != len(c.targets) {
			t.Fatalf("%s: %d of %d helpers joined", name, len(two.joined), len(c.targets))
		}
		st := &two.g.stacks
		if got := st.pending > 0; c.pending != either && got != (c.pending == 1) {
			t.Errorf("%s: %d stacks unplaced at the end", name, st.pending)
		}
		if st.len() != one.g.stacks.len() {
			t.Errorf("%s: %d stacks, one machine %d", name, st.len(), one.g.stacks.len())
		}
		if a, b, ok := stackTwice(st); ok {
			t.Fatalf("%s: stacks %d and %d are the same", name, a, b)
		}
		for id := range uint32(st.len()) {
			if got := st.intern(slices.Clone(st.get(id))); got != id {
				t.Fatalf("%s: stack %d found as %d", name, id, got)
			}
		}
		if st.pending != 0 || st.len() != one.g.stacks.len() {
			t.Errorf("%s: %d unplaced and %d stacks after the lookups", name, st.pending, st.len())
		}
	}
}

// stackTwice finds two ids of one stack in a table, which must hold each
// once.
func stackTwice(st *stackTable) (a, b uint32, ok bool) {
	seen := map[string]uint32{}
	for id := range uint32(st.len()) {
		k := string(idBytes(st.get(id)))
		if prev, ok := seen[k]; ok {
			return prev, id, true
		}
		seen[k] = id
	}
	return 0, 0, false
}

// TestDistinctIDs: both sides, ids past a word of the bitmap included.
func TestDistinctIDs(t *testing.T) {
	for _, c := range []struct {
		ids  []uint32
		want bool
	}{
		{nil, true},
		{[]uint32{0, 1, 63, 64, 1000}, true},
		{[]uint32{5, 1000, 5}, false},
		{[]uint32{1000, 7, 1000}, false},
	} {
		if got := distinctIDs(c.ids); got != c.want {
			t.Errorf("%v: %v, want %v", c.ids, got, c.want)
		}
	}
}
