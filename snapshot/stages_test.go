package snapshot

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

const tMiB = 1 << 20

// program writes a one-device trace event by event, a microsecond apart
// (or with no times), with annotations at the current time.
type program struct {
	now    int64
	noTime bool
	trace  []TraceEntry
	anns   []Annotation
	sizes  map[uint64]int64
	sites  map[uint64]Stack
	s      Snapshot // holds the stacks the trace refers to
}

func newProgram() *program {
	return &program{now: 1_000_000, sizes: map[uint64]int64{}, sites: map[uint64]Stack{}}
}

func site(name string) Stack {
	return StackOf(Frame{Filename: "train.py", Line: int64(len(name)), Name: name})
}

func (p *program) ev(e TraceEntry) {
	p.now++
	if !p.noTime {
		e.TimeUS = p.now
	}
	p.trace = append(p.trace, e)
}

func (p *program) alloc(addr uint64, size int64, where string) {
	p.sizes[addr], p.sites[addr] = size, site(where)
	p.ev(TraceEntry{Addr: addr, Size: size, Stack: p.s.AddStack(p.sites[addr])}.With(ActionAlloc))
}

func (p *program) free(addr uint64) {
	p.ev(TraceEntry{Addr: addr, Size: p.sizes[addr], Stack: p.s.AddStack(p.sites[addr])}.With(ActionFreeRequested))
	p.ev(TraceEntry{Addr: addr, Size: p.sizes[addr], Stack: p.s.AddStack(p.sites[addr])}.With(ActionFreeCompleted))
}

func (p *program) freeRequest(addr uint64) {
	p.ev(TraceEntry{Addr: addr, Size: p.sizes[addr], Stack: p.s.AddStack(p.sites[addr])}.With(ActionFreeRequested))
}

func (p *program) freeComplete(addr uint64) {
	p.ev(TraceEntry{Addr: addr, Size: p.sizes[addr], Stack: p.s.AddStack(p.sites[addr])}.With(ActionFreeCompleted))
}

func (p *program) wait(us int64) { p.now += us }

func (p *program) start(name string) {
	p.now++
	p.anns = append(p.anns, Annotation{Name: name, Stage: "START", TimeUS: p.now})
}

func (p *program) end(name string) {
	p.now++
	p.anns = append(p.anns, Annotation{Name: name, Stage: "END", TimeUS: p.now})
}

func (p *program) analyze() *DeviceStats {
	s := &p.s
	s.Traces, s.Annotations = [][]TraceEntry{p.trace}, p.anns
	return &Analyze(s, nil).Devices[0]
}

func topOf(st []SiteBytes) string {
	var b []string
	for _, s := range st {
		b = append(b, fmt.Sprintf("%s=%dMiB/%d", strings.Fields(s.Site)[1], s.Bytes/tMiB, s.Count))
	}
	return strings.Join(b, " ")
}

// Stages on small programs whose figures are worked out by hand.
func TestStages(t *testing.T) {
	type want struct {
		name                string
		occ, depth          int
		start, peak, end    int64 // MiB
		allocated           int64 // MiB
		top                 string
		openStart, openEnd  bool
		peakEvent, first, n int // n: events inside
	}
	cases := []struct {
		name  string
		build func(p *program)
		want  []want
	}{
		{
			name: "two stages, the second frees what the first made",
			build: func(p *program) {
				p.start("forward")
				p.alloc(1, 4*tMiB, "act")  // e0
				p.alloc(2, 2*tMiB, "tmp")  // e1: peak 6
				p.free(2)                  // e2 e3
				p.end("forward")           //
				p.start("backward")        //
				p.alloc(3, 1*tMiB, "grad") // e4: 5
				p.free(1)                  // e5 e6: 1
				p.end("backward")
			},
			want: []want{
				{name: "forward", start: 0, peak: 6, end: 4, allocated: 6, top: "act=4MiB/1 tmp=2MiB/1", peakEvent: 1, first: 0, n: 4},
				{name: "backward", start: 4, peak: 5, end: 1, allocated: 1, top: "grad=1MiB/1", peakEvent: 4, first: 4, n: 3},
			},
		},
		{
			name: "nested and repeated names, a stage with no events",
			build: func(p *program) {
				for step := 0; step < 2; step++ {
					p.start("ProfilerStep#" + fmt.Sprint(step))
					p.start("forward")
					p.alloc(uint64(10+step), 3*tMiB, "act")
					p.end("forward")
					p.start("idle")
					p.end("idle")
					p.free(uint64(10 + step))
					p.end("ProfilerStep#" + fmt.Sprint(step))
				}
			},
			want: []want{
				{name: "ProfilerStep#0", start: 0, peak: 3, end: 0, allocated: 3, top: "act=3MiB/1", peakEvent: 0, first: 0, n: 3},
				{name: "forward", depth: 1, start: 0, peak: 3, end: 3, allocated: 3, top: "act=3MiB/1", peakEvent: 0, first: 0, n: 1},
				{name: "idle", depth: 1, start: 3, peak: 3, end: 3, peakEvent: -1, first: 1, n: 0},
				{name: "ProfilerStep#1", start: 0, peak: 3, end: 0, allocated: 3, top: "act=3MiB/1", peakEvent: 3, first: 3, n: 3},
				{name: "forward", occ: 1, depth: 1, start: 0, peak: 3, end: 3, allocated: 3, top: "act=3MiB/1", peakEvent: 3, first: 3, n: 1},
				{name: "idle", occ: 1, depth: 1, start: 3, peak: 3, end: 3, peakEvent: -1, first: 4, n: 0},
			},
		},
		{
			// The trace began inside "warmup" (its START is lost) and ends
			// inside "step" (no END yet).
			name: "cut by the window",
			build: func(p *program) {
				p.alloc(1, 2*tMiB, "w")
				p.end("warmup")
				p.start("step")
				p.alloc(2, 1*tMiB, "s")
				p.free(1)
			},
			want: []want{
				{name: "warmup", start: 0, peak: 2, end: 2, allocated: 2, top: "w=2MiB/1", openStart: true, peakEvent: 0, first: 0, n: 1},
				{name: "step", start: 2, peak: 3, end: 1, allocated: 1, top: "s=1MiB/1", openEnd: true, peakEvent: 1, first: 1, n: 3},
			},
		},
		{
			name: "annotations before the trace, of another device, or unknown stage",
			build: func(p *program) {
				p.start("early")
				p.end("early")
				p.anns = append(p.anns, Annotation{Name: "other", Stage: "START", Device: 1, TimeUS: p.now})
				p.anns = append(p.anns, Annotation{Name: "odd", Stage: "MIDDLE", TimeUS: p.now})
				p.alloc(1, tMiB, "x")
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProgram()
			c.build(p)
			st := p.analyze()
			var got []want
			for _, s := range st.Stages {
				got = append(got, want{name: s.Name, occ: s.Occurrence, depth: s.Depth,
					start: s.StartActive / tMiB, peak: s.Peak / tMiB, end: s.EndActive / tMiB, allocated: s.Allocated / tMiB,
					top: topOf(s.Top), openStart: s.OpenStart, openEnd: s.OpenEnd, peakEvent: s.PeakEvent, first: s.First, n: s.Last - s.First})
				if s.Delta() != s.EndActive-s.StartActive {
					t.Errorf("%s: delta %d", s.Name, s.Delta())
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("stages:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// A trace without timestamps cannot place annotations: no stages, and no
// step-based leak check.
func TestStagesNeedTimes(t *testing.T) {
	p := newProgram()
	p.noTime = true
	p.start("forward")
	p.alloc(1, tMiB, "x")
	p.end("forward")
	if st := p.analyze(); len(st.Stages) != 0 || st.HasSteps {
		t.Fatalf("stages without times: %+v", st.Stages)
	}
}

// leakProgram runs steps of a training loop with a site per behaviour:
// "leak" keeps what it allocates every step, "state" allocates once in the
// first step (optimizer state), "tmp" frees within the step, "cache" grows
// and then drops. every says in which steps "slow" keeps an allocation.
func leakProgram(steps int, marker string, slow func(step int) bool) *program {
	p := newProgram()
	addr := uint64(1)
	next := func() uint64 { addr++; return addr }
	var cache []uint64
	for s := 0; s < steps; s++ {
		name := marker
		if marker == "ProfilerStep" {
			name = fmt.Sprintf("ProfilerStep#%d", s)
		}
		p.start(name)
		p.alloc(next(), tMiB, "leak")
		if s == 0 {
			p.alloc(next(), 8*tMiB, "state")
		}
		tmp := next()
		p.alloc(tmp, 16*tMiB, "tmp")
		p.free(tmp)
		if slow != nil && slow(s) {
			p.alloc(next(), 2*tMiB, "slow")
		}
		if s == steps/2 {
			for _, a := range cache {
				p.free(a)
			}
			cache = nil
		} else {
			a := next()
			cache = append(cache, a)
			p.alloc(a, tMiB, "cache")
		}
		p.end(name)
	}
	return p
}

func TestLeakSuspects(t *testing.T) {
	cases := []struct {
		name   string
		steps  int
		marker string
		slow   func(int) bool
		// want: the suspects' sites, their growth in MiB and steps grown.
		want      string
		stepsName string
	}{
		{name: "profiler steps", steps: 6, marker: "ProfilerStep", want: "leak:+5/5of5", stepsName: "ProfilerStep#N"},
		{name: "optimizer steps mark the iterations", steps: 6, marker: "Optimizer.step#AdamW.step", want: "leak:+5/5of5", stepsName: "Optimizer.step#AdamW.step"},
		// Three boundaries are the fewest: two steps of growth.
		{name: "three steps", steps: 3, marker: "ProfilerStep", want: "leak:+2/2of2", stepsName: "ProfilerStep#N"},
		{name: "two steps are too few", steps: 2, marker: "ProfilerStep", want: ""},
		// Growth in more than half the steps: 3 of 5 is a suspect, 2 of 5
		// is not. The slow site keeps 2 MiB in steps 0, 1 and 3: sampled
		// at each step's start, 0 2 4 4 6 6 grows at 3 of 5; in steps 0
		// and 2: 0 2 2 4 4 4 grows at 2.
		{name: "grew in 3 of 5", steps: 6, marker: "ProfilerStep", slow: func(s int) bool { return s == 0 || s == 1 || s == 3 },
			want: "slow:+6/3of5 leak:+5/5of5", stepsName: "ProfilerStep#N"},
		{name: "grew in 2 of 5", steps: 6, marker: "ProfilerStep", slow: func(s int) bool { return s == 0 || s == 2 },
			want: "leak:+5/5of5", stepsName: "ProfilerStep#N"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := leakProgram(c.steps, c.marker, c.slow).analyze()
			var got []string
			for _, l := range st.Leaks {
				got = append(got, fmt.Sprintf("%s:+%d/%dof%d", strings.Fields(l.Site)[1], l.Growth()/tMiB, l.Grew, l.Steps))
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Errorf("suspects %q, want %q", g, c.want)
			}
			if c.stepsName != "" && st.Steps.Name != c.stepsName {
				t.Errorf("steps marked by %q, want %q", st.Steps.Name, c.stepsName)
			}
			leaks := 0
			for _, r := range st.Recommendations {
				if strings.HasPrefix(r.Text, "leak suspect") {
					leaks++
				}
			}
			if leaks != len(st.Leaks) {
				t.Errorf("%d leak recommendations for %d suspects", leaks, len(st.Leaks))
			}
		})
	}
}

// Past leakMaxSamples steps the boundaries are sampled evenly; the leak is
// still found, over leakMaxSamples-1 sampled steps.
func TestLeakSamplesBounded(t *testing.T) {
	for _, steps := range []int{leakMaxSamples, leakMaxSamples + 1, 3 * leakMaxSamples} {
		st := leakProgram(steps, "ProfilerStep", nil).analyze()
		if len(st.Leaks) != 1 || st.Leaks[0].Steps != leakMaxSamples-1 || st.Leaks[0].Growth() != int64(steps-1)*tMiB {
			t.Errorf("%d steps: %+v", steps, st.Leaks)
		}
	}
	st := leakProgram(leakMaxSamples-1, "ProfilerStep", nil).analyze()
	if len(st.Leaks) != 1 || st.Leaks[0].Steps != leakMaxSamples-2 {
		t.Errorf("%d steps: %+v", leakMaxSamples-1, st.Leaks)
	}
}

func TestPendingFrees(t *testing.T) {
	cases := []struct {
		name   string
		noTime bool
		wait   int64 // µs between request and completion (events when noTime)
		long   int
		atPeak int64
	}{
		{name: "just under a millisecond", wait: pendingLongUS - 1, long: 0},
		{name: "a millisecond", wait: pendingLongUS, long: 1},
		{name: "63 events", noTime: true, wait: pendingLongEvents - 1, long: 0},
		{name: "64 events", noTime: true, wait: pendingLongEvents, long: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProgram()
			p.noTime = c.noTime
			p.alloc(1, 4*tMiB, "rs")
			p.freeRequest(1)
			if c.noTime {
				// The peak sits among the waiting events: 4 MiB pending,
				// 1 MiB new.
				for i := int64(0); i < c.wait-1; i++ {
					if i == 0 {
						p.alloc(2, tMiB, "x")
					} else {
						p.ev(TraceEntry{}.With(ActionSnapshot))
					}
				}
			} else {
				p.alloc(2, tMiB, "x") // +1 µs
				p.wait(c.wait - 2)    // the completion lands wait µs after the request
			}
			p.freeComplete(1)
			p.free(2)
			p.alloc(3, 16, "still")
			p.freeRequest(3)
			st := p.analyze()
			pf := st.Pending
			if pf.Deferred != 1 || pf.Long != c.long || pf.StillPending != 1 || pf.ByTime == c.noTime {
				t.Fatalf("%+v", pf)
			}
			if pf.AtPeak != 4*tMiB {
				t.Errorf("pending at the peak %d, want 4 MiB", pf.AtPeak)
			}
			wantWait := c.wait
			if c.long == 1 && (pf.MaxWait != wantWait || pf.MaxSize != 4*tMiB || !strings.Contains(pf.MaxSite, "rs") || pf.LongBytes != 4*tMiB) {
				t.Errorf("longest %+v, want a wait of %d", pf, wantWait)
			}
			var rec string
			for _, r := range st.Recommendations {
				if strings.HasPrefix(r.Text, "long pending frees") {
					rec = r.Text
				}
			}
			if (rec != "") != (c.long == 1) {
				t.Errorf("recommendation %q with %d long frees", rec, c.long)
			}
		})
	}
}

// TestSiteNamesIsLocation: the cached site name is Location's, for stacks
// of every kind of frame, whether the frames are met first in this stack or
// were cached from another one (same file and function, other line or
// source).
func TestSiteNamesIsLocation(t *testing.T) {
	py := func(file string, line int64, name string) Frame { return Frame{Filename: file, Line: line, Name: name} }
	noise := py("??", 0, "PyEval_EvalFrameDefault")
	plumb := py("c10/cuda/CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::malloc")
	prof := py("/x/memory_profiler/hook.py", 3, "hook")
	cpp := py("aten/src/ATen/native/Linear.cpp", 0, "at::native::linear")
	user := py("/w/train.py", 40, "step")
	userOther := py("/w/train.py", 41, "step")
	withSource := py("/w/model.py", 7, "forward")
	table := &FrameTable{Frames: []Frame{noise, plumb, prof, cpp, user, userOther, withSource, withSource},
		Sources: []string{6: "y = x @ w", 7: "other"}}
	on := func(ids ...uint32) Stack { return NewStack(table, ids) }
	stacks := []Stack{
		{},
		on(0),
		on(0, 1, 2),
		on(1, 3),
		on(1, 3, 4),
		on(0, 4, 3),
		on(5, 4),
		on(3, 5),
		on(6),
		on(2, 7),
		StackOf(py("/w/no_line.py", 0, "f")),
	}
	names := newSiteNames()
	for pass := range 2 {
		for i, st := range stacks {
			want := Location(st)
			if want == "" {
				want = noStack
			}
			// A copy: a new backing array, so the stack cache misses and
			// the frame caches are what answers on the second pass.
			if got := names.of(st.Clone()); got != want {
				t.Errorf("pass %d, stack %d: got %q, want %q", pass, i, got, want)
			}
		}
	}
}

// TestTopSites compares the bounded selection with sorting every site,
// with k under, at and over the number of sites and many ties.
func TestTopSites(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, n := range []int{0, 1, 4, 5, 6, 50, 3000} {
		for _, k := range []int{0, 1, 5, n, n + 3} {
			m := map[string]*SiteBytes{}
			for i := range n {
				name := fmt.Sprintf("site%05d", rng.IntN(4*n+1)+i*7)
				m[name] = &SiteBytes{Site: name, Bytes: int64(rng.IntN(8)) << 20, Count: i}
			}
			var all []SiteBytes
			for _, v := range m {
				all = append(all, *v)
			}
			slices.SortFunc(all, func(a, b SiteBytes) int {
				if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
					return c
				}
				return cmp.Compare(a.Site, b.Site)
			})
			want := all[:min(max(k, 0), len(all))]
			if got := topSites(m, k); !slices.Equal(got, want) {
				t.Errorf("%d sites, k=%d: got %v, want %v", len(m), k, got, want)
			}
		}
	}
}

// TestByStart: the one-pass order (intervals as Replay appends them, those
// from before the trace anywhere among them) and the sorted one (any other
// order, Start below -1) both equal a stable sort by Start.
func TestByStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name  string
		start func(i int, last *int32) int32
	}{
		{"as replayed", func(i int, last *int32) int32 {
			if rng.IntN(5) == 0 {
				return -1
			}
			*last += int32(rng.IntN(3)) // ties too
			return *last
		}},
		{"out of order", func(i int, last *int32) int32 { return int32(rng.IntN(50)) - 1 }},
		{"below -1", func(i int, last *int32) int32 {
			if i == 7 {
				return -3
			}
			*last++
			return *last
		}},
	} {
		for _, n := range []int{0, 1, 2, 40, 1000} {
			tl := &Timeline{}
			var last int32
			for i := range n {
				tl.Intervals = append(tl.Intervals, Interval{Start: tc.start(i, &last)})
			}
			want := make([]int32, n)
			for i := range want {
				want[i] = int32(i)
			}
			slices.SortStableFunc(want, func(a, b int32) int { return cmp.Compare(tl.Intervals[a].Start, tl.Intervals[b].Start) })
			if got := tl.byStart(); !slices.Equal(got, want) {
				t.Errorf("%s, %d intervals: %v, want %v", tc.name, n, got, want)
			}
		}
	}
}

// TestLiveBySiteAtAnyBoundaries: on real traces, with step boundaries
// chosen here (in order, repeated, at -1 and at the last event, which read
// a table; and out of order, which take binary searches), each site's live
// bytes at each boundary are those of the intervals live there, counted
// one by one; on one core, and on four with a few intervals each (the
// table filled in parts, each site's spans placed by several workers and
// summed by another).
func TestLiveBySiteAtAnyBoundaries(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	eachRealTimeline(t, func(p string, tl *Timeline) {
		n := len(tl.Events)
		var sorted []int
		for i := -1; i < n; i += max(1, n/9) {
			sorted = append(sorted, i, i, i+1)
		}
		sorted = append(sorted, n-1)
		unsorted := []int{n / 2, -1, n - 1, n / 3, n / 5}
		for _, ev := range [][]int{sorted, unsorted} {
			want := summarize(liveReference(tl, ev))
			if len(want) < 3 {
				t.Fatalf("%s: %d sites live at the boundaries: the test needs more", p, len(want))
			}
			for _, perWorker := range []int{livePerWorker, max(1, len(tl.Intervals)/4)} {
				for _, cells := range denseCells(tl, ev) {
					checkLive(t, fmt.Sprintf("%s cuda:%d, boundaries %v, %d a worker, tables of %d cells", p, tl.Device, ev, perWorker, cells), tl.liveBySiteBy(ev, perWorker, cells), want)
				}
			}
		}
	})
}

// TestLiveBySiteManySites: a trace of thousands of sites, each allocating
// blocks that live over random spans of steps, some past the last; the
// sites' figures at every step's start are those counted interval by
// interval. An array of boundaries per site made this sites times steps
// (tens of thousands of sites: hundreds of MB).
func TestLiveBySiteManySites(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	rng := rand.New(rand.NewPCG(7, 11))
	const sites, steps = 3000, 40
	p := newProgram()
	type block struct {
		addr uint64
		free int // the step it is freed at the start of; steps: never
	}
	var live []block
	addr := uint64(0)
	// Blocks made before the first step: several changes of a site at the
	// first boundary.
	for i := range 2 * sites {
		addr += 4096
		p.alloc(addr, tMiB, fmt.Sprintf("site%d", i%sites))
		live = append(live, block{addr, rng.IntN(steps + 1)})
	}
	for s := range steps {
		p.start(fmt.Sprintf("ProfilerStep#%d", s))
		kept := live[:0]
		for _, b := range live {
			if b.free == s {
				p.free(b.addr)
			} else {
				kept = append(kept, b)
			}
		}
		live = kept
		for range 1000 {
			addr += 4096
			p.alloc(addr, int64(1+rng.IntN(8))*tMiB, fmt.Sprintf("site%d %s", rng.IntN(sites), strings.Repeat("x", rng.IntN(3))))
			live = append(live, block{addr, s + 1 + rng.IntN(steps-s)})
		}
		p.end(fmt.Sprintf("ProfilerStep#%d", s))
	}
	s := &p.s
	s.Traces, s.Annotations = [][]TraceEntry{p.trace}, p.anns
	a := Analyze(s, nil)
	tl := a.Timeline(0)
	st := a.Devices[0]
	ev := st.Steps.Events
	if len(ev) != steps {
		t.Fatalf("%d step boundaries, want %d", len(ev), steps)
	}
	want := summarize(liveReference(tl, ev))
	if len(want) < sites {
		t.Fatalf("%d sites live at the boundaries: the test needs %d", len(want), sites)
	}
	for _, perWorker := range []int{livePerWorker, max(1, len(tl.Intervals)/4)} {
		for _, cells := range denseCells(tl, ev) {
			checkLive(t, fmt.Sprintf("%d a worker, tables of %d cells", perWorker, cells), tl.liveBySiteBy(ev, perWorker, cells), want)
		}
	}
	// Sites no stack of the snapshot numbers (a block's made before the
	// trace) go by name: half the stacks lose their site numbers here.
	ids, index := tl.siteID, tl.siteIndex
	tl.siteID = ids[:len(ids)/2]
	kept := map[string]int32{}
	for _, id := range tl.siteID {
		kept[tl.siteName[id]] = id
	}
	tl.siteIndex = siteLookup{seed: maphash.MakeSeed(), shards: []map[string]int32{{}}}
	for text, id := range kept {
		tl.siteIndex.shards[0][text] = int32(len(tl.siteIndex.site))
		tl.siteIndex.site = append(tl.siteIndex.site, id)
	}
	defer func() { tl.siteID, tl.siteIndex = ids, index }()
	if index.len()-tl.siteIndex.len() < sites/10 {
		t.Fatalf("%d of %d sites keep their numbers: the test needs fewer", tl.siteIndex.len(), index.len())
	}
	if want := summarize(liveReference(tl, ev)); len(want) < sites {
		t.Fatalf("%d sites live at the boundaries with names: the test needs %d", len(want), sites)
	} else {
		for _, perWorker := range []int{livePerWorker, max(1, len(tl.Intervals)/4)} {
			for _, cells := range denseCells(tl, ev) {
				checkLive(t, fmt.Sprintf("names, %d a worker, tables of %d cells", perWorker, cells), tl.liveBySiteBy(ev, perWorker, cells), want)
			}
		}
	}
}

// denseCells are the tables liveBySiteBy may use: none (sites placed by
// site), one just short of the numbered sites', one just holding them
// (the first name a worker meets passes it), liveBySite's, and any.
func denseCells(tl *Timeline, ev []int) []int {
	sites := len(tl.siteName) * len(ev)
	return []int{0, sites - 1, sites, liveDenseCells, math.MaxInt}
}

// summarize is each site's siteLive, from its live bytes at each boundary.
func summarize(live map[string][]int64) map[string]siteLive {
	out := map[string]siteLive{}
	for site, l := range live {
		s := siteLive{First: l[0], Last: l[len(l)-1]}
		for i := 1; i < len(l); i++ {
			if l[i] > l[i-1] {
				s.Grew++
			}
			if l[i] < l[i-1] {
				s.Shrank = true
			}
		}
		out[site] = s
	}
	return out
}

func checkLive(t *testing.T, what string, list []siteLiveOf, want map[string]siteLive) {
	t.Helper()
	got := map[string]siteLive{}
	for _, l := range list {
		if _, dup := got[l.Site]; dup {
			t.Fatalf("%s: site %s twice", what, l.Site)
		}
		got[l.Site] = l.siteLive
	}
	for site, w := range want {
		if g, ok := got[site]; !ok || g != w {
			t.Fatalf("%s: %s %+v (found: %v), want %+v", what, site, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d sites, want %d", what, len(got), len(want))
	}
}

// liveReference is liveBySite counted interval by interval: live at
// boundary e when Start <= e < End (for boundaries out of order, where the
// binary searches define it, at the boundaries from the first not before
// Start to the first not before End).
func liveReference(tl *Timeline, ev []int) map[string][]int64 {
	inOrder := slices.IsSorted(ev)
	live := map[string][]int64{}
	names := newSiteNames()
	for j := range tl.Intervals {
		iv := &tl.Intervals[j]
		site := tl.siteOf(iv, names)
		for i, e := range ev {
			in := int(iv.Start) <= e && e < int(iv.End)
			if !inOrder {
				in = sort.SearchInts(ev, int(iv.Start)) <= i && i < sort.SearchInts(ev, int(iv.End))
			}
			if in {
				if live[site] == nil {
					live[site] = make([]int64, len(ev))
				}
				live[site][i] += iv.Size
			}
		}
	}
	return live
}
