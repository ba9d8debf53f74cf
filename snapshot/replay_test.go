package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The memory_viz semantics on small traces whose answers are worked out by
// hand from MemoryViz.js's process_alloc_data.
func TestReplaySemantics(t *testing.T) {
	const MiB = 1 << 20
	alloc := func(addr uint64, size int64) TraceEntry {
		return TraceEntry{Addr: addr, Size: size}.With(ActionAlloc)
	}
	freeReq := func(addr uint64, size int64) TraceEntry {
		return TraceEntry{Addr: addr, Size: size}.With(ActionFreeRequested)
	}
	freeDone := func(addr uint64, size int64) TraceEntry {
		return TraceEntry{Addr: addr, Size: size}.With(ActionFreeCompleted)
	}
	seg := func(a Action, addr uint64, size int64) TraceEntry {
		return TraceEntry{Addr: addr, Size: size}.With(a)
	}
	cases := []struct {
		name     string
		trace    []TraceEntry
		segments []Segment
		// want: the level after each event, the level before the first,
		// the peak and its event.
		active   []int64
		base     int64
		peak     int64
		peakAt   int
		reserved []int64
	}{
		{
			// A free_requested far from its free_completed (record_stream):
			// the memory stays active until the completion.
			name: "cross-stream free",
			trace: []TraceEntry{alloc(0x1000, 4*MiB), freeReq(0x1000, 4*MiB), alloc(0x9000, 2*MiB),
				freeReq(0x9000, 2*MiB), freeDone(0x9000, 2*MiB), freeDone(0x1000, 4*MiB)},
			active: []int64{4 * MiB, 4 * MiB, 6 * MiB, 4 * MiB, 4 * MiB, 0},
			peak:   6 * MiB, peakAt: 2,
		},
		{
			// A ring buffer that starts with frees of allocations it never
			// saw: they were live at the start, with the free's size; a lone
			// free_requested closes nothing.
			name: "window starts with frees",
			trace: []TraceEntry{freeReq(0x1000, 3*MiB), freeDone(0x1000, 3*MiB), freeReq(0x2000, 5*MiB),
				alloc(0x3000, 1*MiB), freeDone(0x2000, 5*MiB)},
			segments: []Segment{{Address: 0x3000, TotalSize: 2 * MiB, Blocks: []Block{
				{Address: 0x3000, Size: 1 * MiB, RequestedSize: 1 * MiB, State: StateActiveAllocated},
				{Address: 0x3000 + MiB, Size: MiB, RequestedSize: 7 * MiB / 8, State: StateActiveAllocated},
			}}},
			// Live at the start: 3 + 5 MiB freed without alloc, and the
			// second block (not allocated in the trace, requested size).
			base:   3*MiB + 5*MiB + 7*MiB/8,
			active: []int64{5*MiB + 7*MiB/8, 5*MiB + 7*MiB/8, 5*MiB + 7*MiB/8, 6*MiB + 7*MiB/8, 1*MiB + 7*MiB/8},
			peak:   8*MiB + 7*MiB/8, peakAt: -1,
		},
		{
			// Expandable segments: reserved follows map/unmap, undone from the
			// final segments.
			name: "expandable segments",
			trace: []TraceEntry{seg(ActionSegmentMap, 0x100000, 2*MiB), alloc(0x100000, 2*MiB),
				seg(ActionSegmentMap, 0x300000, 2*MiB), alloc(0x300000, 2*MiB), freeReq(0x100000, 2*MiB),
				freeDone(0x100000, 2*MiB), seg(ActionSegmentUnmap, 0x100000, 2*MiB)},
			segments: []Segment{{Address: 0x300000, TotalSize: 2 * MiB, Expandable: true, Blocks: []Block{
				{Address: 0x300000, Size: 2 * MiB, RequestedSize: 2 * MiB, State: StateActiveAllocated}}}},
			active:   []int64{0, 2 * MiB, 2 * MiB, 4 * MiB, 2 * MiB, 2 * MiB, 2 * MiB},
			reserved: []int64{2 * MiB, 2 * MiB, 4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB, 2 * MiB},
			peak:     4 * MiB, peakAt: 3,
		},
		{
			// No alloc or free at all: memory_viz draws the final blocks flat.
			name:  "no actions",
			trace: []TraceEntry{TraceEntry{}.With(ActionSnapshot)},
			segments: []Segment{{Address: 0x1000, TotalSize: 4 * MiB, Blocks: []Block{
				{Address: 0x1000, Size: 2 * MiB, RequestedSize: 2*MiB - 100, State: StateActiveAllocated},
				{Address: 0x1000 + 2*MiB, Size: 2 * MiB, State: StateInactive}}}},
			base:   2*MiB - 100,
			active: []int64{2*MiB - 100},
			peak:   2*MiB - 100, peakAt: -1,
		},
		{
			// memory_viz keeps an allocation whose address is allocated again
			// without a free live to the end.
			name:   "alloc over an open address",
			trace:  []TraceEntry{alloc(0x1000, MiB), alloc(0x1000, 2*MiB), freeReq(0x1000, 2*MiB), freeDone(0x1000, 2*MiB)},
			active: []int64{MiB, 3 * MiB, MiB, MiB},
			peak:   3 * MiB, peakAt: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Snapshot{Segments: c.segments, Traces: [][]TraceEntry{c.trace}}
			tl := Replay(s, 0, nil)
			if tl.BaseActive != c.base {
				t.Errorf("level at the start %d, want %d", tl.BaseActive, c.base)
			}
			for i, want := range c.active {
				if tl.Active[i] != want {
					t.Errorf("active after event %d (%s): %d, want %d", i, c.trace[i].Action(), tl.Active[i], want)
				}
			}
			for i, want := range c.reserved {
				if got := tl.ReservedAt(i); got != want {
					t.Errorf("reserved after event %d: %d, want %d", i, got, want)
				}
			}
			// Every window's series is the events' levels, whatever
			// steps it starts, ends or lies between.
			for from := -1; from <= len(c.trace); from++ {
				for to := from; to <= len(c.trace)+1; to++ {
					got := tl.ReservedRange(max(from, 0), to)
					for k, v := range got {
						if want := tl.ReservedAt(max(from, 0) + k); v != want {
							t.Fatalf("reserved over [%d, %d), event %d: %d, ReservedAt %d", from, to, max(from, 0)+k, v, want)
						}
					}
					if want := max(0, to-max(from, 0)); len(got) != want {
						t.Fatalf("reserved over [%d, %d): %d levels", from, to, len(got))
					}
				}
			}
			if tl.Peak.Active != c.peak || tl.Peak.EventIndex != c.peakAt {
				t.Errorf("peak %d at %d, want %d at %d", tl.Peak.Active, tl.Peak.EventIndex, c.peak, c.peakAt)
			}
			var live int64
			for _, l := range tl.PeakLive() {
				live += l.Size
			}
			if live != tl.Peak.Active {
				t.Errorf("live set at the peak sums to %d, peak %d", live, tl.Peak.Active)
			}
		})
	}
}

// TestPeakMatchesMemoryVizPort checks every sample against the committed
// output of scripts/memviz_port.py, a port of MemoryViz.js.
func TestPeakMatchesMemoryVizPort(t *testing.T) {
	raw, err := os.ReadFile("../testdata/reference/memviz_port.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string][]struct {
		Device     int   `json:"device"`
		PeakBytes  int64 `json:"peak_bytes"`
		PeakAt     int   `json:"peak_event_index"`
		StartBytes int64 `json:"start_bytes"`
		EndBytes   int64 `json:"end_bytes"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, dir := range []string{"../testdata/snapshots", "../testdata/snapshots/h200", "../testdata/snapshots/synthetic"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			paths[e.Name()] = filepath.Join(dir, e.Name())
		}
	}
	if len(ref) < 20 {
		t.Fatalf("only %d files in the reference", len(ref))
	}
	for name, devs := range ref {
		s, err := Open(context.Background(), paths[name])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		a := Analyze(s, nil)
		for _, want := range devs {
			d := a.Device(want.Device)
			if d == nil {
				t.Errorf("%s cuda:%d missing", name, want.Device)
				continue
			}
			if d.Peak.Active != want.PeakBytes || d.Peak.EventIndex != want.PeakAt {
				t.Errorf("%s cuda:%d: peak %d at %d, memory_viz port %d at %d", name, want.Device,
					d.Peak.Active, d.Peak.EventIndex, want.PeakBytes, want.PeakAt)
			}
			if tl := a.Timeline(want.Device); tl != nil {
				if tl.BaseActive != want.StartBytes || tl.EndActive != want.EndBytes {
					t.Errorf("%s cuda:%d: start %d end %d, port %d %d", name, want.Device,
						tl.BaseActive, tl.EndActive, want.StartBytes, want.EndBytes)
				}
			}
		}
	}
}

// TestPeakMatchesTorchMemoryStats checks real snapshots captured on an H200
// (scripts/capture_real_snapshots.py) against torch.cuda.memory_stats taken
// by PyTorch itself at the dump: where the trace covers the whole run and
// nothing frees across streams at the peak, memory_viz's active peak is
// requested_bytes.all.peak.
func TestPeakMatchesTorchMemoryStats(t *testing.T) {
	for _, name := range []string{"train.pickle", "expandable.pickle", "empty_cache.pickle", "cpp.pickle",
		"record_stream.pickle", "html.html", "big.pickle.gz"} {
		base := strings.SplitN(name, ".", 2)[0]
		raw, err := os.ReadFile(filepath.Join("../testdata/snapshots/h200", base+".stats.json"))
		if err != nil {
			t.Fatal(err)
		}
		var stats struct {
			MemoryStats map[string]int64 `json:"memory_stats"`
		}
		if err := json.Unmarshal(raw, &stats); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), filepath.Join("../testdata/snapshots/h200", name))
		if err != nil {
			t.Fatal(err)
		}
		a := Analyze(s, nil)
		d := a.Device(0)
		if want := stats.MemoryStats["requested_bytes.all.peak"]; d.Peak.Active != want {
			t.Errorf("%s: peak %d, torch requested_bytes.all.peak %d", name, d.Peak.Active, want)
		}
		if want := stats.MemoryStats["reserved_bytes.all.current"]; d.ReservedBytes != want {
			t.Errorf("%s: reserved %d, torch reserved_bytes.all.current %d", name, d.ReservedBytes, want)
		}
		if want := stats.MemoryStats["allocated_bytes.all.current"]; d.AllocatedBytes != want {
			t.Errorf("%s: allocated %d, torch allocated_bytes.all.current %d", name, d.AllocatedBytes, want)
		}
		if tl := a.Timeline(0); !tl.Complete {
			t.Errorf("%s: a trace recorded from an empty allocator is not complete: %s", name, tl.Note)
		}
	}
}

// TestStateAtAgreesWithSeries replays the allocator state to every event of
// real traces and checks it against the active and reserved series.
func TestStateAtAgreesWithSeries(t *testing.T) {
	for _, name := range []string{"train.pickle", "expandable.pickle", "record_stream.pickle"} {
		s, err := Open(context.Background(), filepath.Join("../testdata/snapshots/h200", name))
		if err != nil {
			t.Fatal(err)
		}
		tl := Replay(s, 0, nil)
		step := max(1, len(tl.Events)/300)
		for i := -1; i < len(tl.Events); i += step {
			st := tl.StateAt(s, i)
			if st.Reserved != tl.ReservedAt(i) {
				t.Fatalf("%s event %d: state reserved %d, series %d", name, i, st.Reserved, tl.ReservedAt(i))
			}
			if st.Active != tl.ActiveAt(i) {
				t.Fatalf("%s event %d: state active %d, series %d", name, i, st.Active, tl.ActiveAt(i))
			}
			if st.Free < 0 || st.LargestFree > st.Free {
				t.Fatalf("%s event %d: free %d, largest %d", name, i, st.Free, st.LargestFree)
			}
		}
	}
}

// TestFreeAtIsStateAts: FreeAt, which keeps only the blocks' sizes, gives
// StateAt's free memory, largest gap and external fragmentation at every
// event sampled, on real snapshots with pending frees (record_stream),
// expandable segments and an optimizer's state (gpt_adamw), and on the
// public ones, one of them from a Windows machine.
func TestFreeAtIsStateAts(t *testing.T) {
	for _, name := range []string{"h200/train.pickle", "h200/expandable.pickle", "h200/record_stream.pickle",
		"h100/gpt_adamw.pickle.gz", "h100/cnn_sgd.pickle.gz", "MAGMA27_assignment2-systems__memory_snapshot.pickle",
		"MercuryB1_SQAttn__cuda_memory_snapshot.pickle"} {
		s, err := Open(context.Background(), filepath.Join("../testdata/snapshots", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range s.Devices() {
			tl := Replay(s, d, nil)
			if tl == nil {
				continue
			}
			step := max(1, len(tl.Events)/200)
			for i := -1; i < len(tl.Events); i += step {
				st := tl.StateAt(s, i)
				free, largest, ext := tl.FreeAt(s, i)
				if free != st.Free || largest != st.LargestFree || ext != st.ExternalPct {
					t.Fatalf("%s cuda:%d event %d: FreeAt %d %d %.3f, StateAt %d %d %.3f", name, d, i, free, largest, ext, st.Free, st.LargestFree, st.ExternalPct)
				}
			}
		}
	}
}

func TestCategoriesFromFileAndFunctionNames(t *testing.T) {
	var every []string
	for _, r := range DefaultRules() {
		every = append(every, r.Keywords...)
	}
	folder := "/envs/" + strings.Join(every, "_") + "/SQAttn/lib/"
	cat := NewCategorizer(nil)
	cases := []struct {
		frames  []Frame
		want    string
		keyword string
	}{
		// Folders never count, however many keywords they hold.
		{[]Frame{{Filename: folder + "act_fn.py", Name: "silu", Line: 3}}, "Activation", "silu"},
		{[]Frame{{Filename: folder + "model.py", Name: "helper", Line: 3}}, Unknown, ""},
		// Whole identifier parts: lamb is not <lambda>.
		{[]Frame{{Filename: folder + "module.py", Name: "<lambda>", Line: 1}}, Unknown, ""},
		{[]Frame{{Filename: "/x/lamb.py", Name: "step", Line: 1}}, "Optimizer State", "lamb"},
		// camelCase and snake_case spell the same keyword.
		{[]Frame{{Filename: "/x/norms.py", Name: "LayerNorm", Line: 1}}, "Activation", "layer_norm"},
		{[]Frame{{Filename: "/x/mha.py", Name: "MultiheadAttention", Line: 1}}, "Attention", "attention"},
		{[]Frame{{Filename: `C:\Users\me\attn\train.py`, Name: "main", Line: 1}}, Unknown, ""},
		// The innermost matching rule's frame is named.
		{[]Frame{{Filename: "/x/utils.py", Name: "pad", Line: 1}, {Filename: "/x/moe_layer.py", Name: "route", Line: 9}}, "Expert/MoE", "moe"},
	}
	for _, c := range cases {
		d := cat.Decide(StackOf(c.frames...))
		if d.Category != c.want || d.Keyword != c.keyword {
			t.Errorf("%v: %q by %q, want %q by %q", c.frames, d.Category, d.Keyword, c.want, c.keyword)
		}
		if d.Category != Unknown && (d.Frame < 0 || d.Frame >= len(c.frames)) {
			t.Errorf("%v: decided by frame %d", c.frames, d.Frame)
		}
	}
	parts := identParts("_multi_tensor_AdamW2NCCLComm", nil)
	if got := strings.Join(parts, ","); got != "multi,tensor,adam,w2,nccl,comm" {
		t.Errorf("identParts: %s", got)
	}
}

// TestBandsAddUpToActive: at every event the bands sum to the active
// memory of the replay, by category and by call site, with few and many
// bands.
func TestBandsAddUpToActive(t *testing.T) {
	for _, p := range []string{"../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle",
		"../testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle", "../testdata/snapshots/h200/record_stream.pickle",
		"../testdata/snapshots/h200/ring.pickle", "../testdata/snapshots/h200/expandable.pickle"} {
		s, err := Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		a := Analyze(s, nil)
		for _, d := range a.Devices {
			tl := a.Timeline(d.Device)
			if tl == nil {
				continue
			}
			events := make([]int, 0, len(tl.Events)+1)
			for i := -1; i < len(tl.Events); i++ {
				events = append(events, i)
			}
			for _, c := range []struct {
				site BandBy
				k    int
			}{{BandCategory, 8}, {BandRole, 3}, {BandRole, 8}, {BandSite, 3}, {BandSite, 1000}} {
				b := tl.Bands(c.site, c.k)
				if len(b.Names) > max(c.k, 2) {
					t.Errorf("%s: %d bands, at most %d", p, len(b.Names), c.k)
				}
				for k, tot := range tl.Totals(b, events) {
					var sum int64
					for _, v := range tot {
						sum += v
					}
					if want := tl.ActiveAt(events[k]); sum != want {
						t.Fatalf("%s cuda:%d (site %v, k %d) event %d: bands sum to %d, active %d", p, d.Device, c.site, c.k, events[k], sum, want)
					}
				}
			}
		}
	}
}

// TestLiveAtBothOrders: LiveAt sorts a live set up to liveSortMax itself
// and walks the order of every interval by size above it; both give the
// same allocations in the same order, with and without a limit, at every
// event of a real trace.
func TestLiveAtBothOrders(t *testing.T) {
	s, err := Open(context.Background(), "../testdata/snapshots/h100/gpt_adamw.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	small := Replay(s, 0, nil)
	large := Replay(s, 0, nil)
	large.liveSortMax = 1 // every live set is over it: the index
	// Over it too, and asked for as many as liveSelectMax at most: the
	// largest selected in one pass, never the index.
	sel := Replay(s, 0, nil)
	sel.liveSortMax, sel.liveSelectMax = 1, 5
	n := len(small.Events)
	checked, big := 0, 0
	for i := -1; i < n; i += max(1, n/97) {
		for _, limit := range []int{0, 5} {
			a, b := small.LiveAt(i, limit), large.LiveAt(i, limit)
			others := [][]Allocation{b}
			if limit == 5 {
				others = append(others, sel.LiveAt(i, limit))
			}
			for _, b := range others {
				if len(a) != len(b) {
					t.Fatalf("event %d, limit %d: %d and %d allocations", i, limit, len(a), len(b))
				}
				for k := range a {
					if a[k].Address != b[k].Address || a[k].Size != b[k].Size || a[k].Role != b[k].Role {
						t.Fatalf("event %d, limit %d: allocation %d differs: %+v and %+v", i, limit, k, a[k], b[k])
					}
				}
			}
			if k := len(a); k > 1 && limit == 0 {
				big++
				if a[0].Size < a[k-1].Size {
					t.Fatalf("event %d: not largest first", i)
				}
			}
		}
		checked++
	}
	if big < checked/2 {
		t.Errorf("only %d of %d events had more than one live allocation: the test checks little", big, checked)
	}
	if small.bySize != nil || large.bySize == nil || sel.bySize != nil {
		t.Errorf("the small live sets built the index (%v), or the large ones did not (%v), or the selected ones did (%v)",
			small.bySize != nil, large.bySize == nil, sel.bySize != nil)
	}
}

// TestPeakWithoutLiveSet: the peak's totals by role and by category and
// its largest allocations, found without making its live set, equal those
// of the live set (PeakLive), on real traces.
func TestPeakWithoutLiveSet(t *testing.T) {
	for _, p := range []string{"../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../testdata/snapshots/MercuryB1_SQAttn__cuda_memory_snapshot.pickle",
		"../testdata/snapshots/h200/ring.pickle"} {
		s, err := Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		a := Analyze(s, nil)
		for i := range a.Devices {
			d := &a.Devices[i]
			tl := a.Timeline(d.Device)
			if tl == nil {
				continue
			}
			roles, cats, top := tl.PeakRoles(), a.PeakCategories(d), a.PeakTop(d, 3)
			live := a.PeakLive(d)
			if len(live) < 4 {
				t.Errorf("%s: %d live at the peak: the test checks little", p, len(live))
			}
			if want := RoleTotals(live); !slices.Equal(roles, want) || !slices.Equal(d.Peak.Roles, want) {
				t.Errorf("%s: roles %v (in the stats %v), want %v", p, roles, d.Peak.Roles, want)
			}
			if want := CategoryTotals(live, a.Categorizer()); !slices.Equal(cats, want) {
				t.Errorf("%s: categories %v, want %v", p, cats, want)
			}
			for k := range min(3, len(live)) {
				if top[k].Address != live[k].Address || top[k].Category != live[k].Category || top[k].Role != live[k].Role {
					t.Errorf("%s: top %d is %+v, want %+v", p, k, top[k], live[k])
				}
			}
		}
	}
}

// TestTotalsFrom: the bands' bytes counted from a nearby event, forwards
// or backwards, equal a full sweep's, at events across a real trace and at
// its ends.
func TestTotalsFrom(t *testing.T) {
	s, err := Open(context.Background(), "../testdata/snapshots/h100/gpt_adamw.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	tl := Replay(s, 0, nil)
	n := len(tl.Events)
	events := []int{-1, 0, 1, n / 3, n / 2, n/2 + 1, n - 2, n - 1}
	for i := 0; i < n; i += max(1, n/53) {
		events = append(events, i)
	}
	for _, by := range []BandBy{BandCategory, BandRole, BandSite} {
		b := tl.Bands(by, 8)
		for _, from := range events {
			base := tl.Totals(b, []int{from})[0]
			for _, to := range events {
				if got, want := tl.TotalsFrom(b, base, from, to), tl.Totals(b, []int{to})[0]; !slices.Equal(got, want) {
					t.Fatalf("%v: from %d to %d: %v, want %v", by, from, to, got, want)
				}
			}
		}
	}
}

// TestLiveCategoriesAreTheCategorizers: the live set's categories, which the
// timeline decides once per stack (and per block stack), are the
// categorizer's decisions on each allocation's frames, and LiveStats' totals
// are those of the allocations LiveAt lists, at events across real traces
// (one whose ring buffer overflowed: blocks alive before it) and a
// generated one of distinct stacks; asked twice, the answers do not change.
func TestLiveCategoriesAreTheCategorizers(t *testing.T) {
	paths := []string{"../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../testdata/snapshots/h200/ring.pickle",
		"../testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle"}
	if _, err := exec.LookPath("python3"); err == nil {
		p := filepath.Join(t.TempDir(), "distinct.pickle")
		args := []string{"../scripts/gen_snapshot.py", "--entries", "4000", "--frames", "unshared", "--depth", "6", "--frees", "random", "--max-entries", "1500", p}
		if out, err := exec.Command("python3", args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		paths = append(paths, p)
	}
	for _, p := range paths {
		a := analyzeFile(t, p)
		for _, d := range a.Devices {
			tl := a.Timeline(d.Device)
			if tl == nil {
				continue
			}
			ref := NewCategorizer(nil)
			blocks := 0
			for _, at := range []int{0, len(tl.Events) / 3, len(tl.Events) - 1, len(tl.Events) / 2, 0} {
				live := tl.LiveAt(at, 0)
				for _, l := range live {
					if want := ref.Decide(l.Frames); l.Category != want.Category || int(l.CategoryFrame) != want.Frame || l.CategoryKeyword != want.Keyword {
						t.Fatalf("%s event %d, %#x: %q %d %q, the categorizer's %+v", p, at, l.Address, l.Category, l.CategoryFrame, l.CategoryKeyword, want)
					}
				}
				n, bytes, cats := tl.LiveStats(at)
				want := CategoryTotals(live, ref)
				var wantBytes int64
				for _, c := range want {
					wantBytes += c.Bytes
				}
				byName := func(cs []CategoryTotal) map[string]CategoryTotal {
					m := map[string]CategoryTotal{}
					for _, c := range cs {
						m[c.Name] = c
					}
					return m
				}
				if n != len(live) || bytes != wantBytes || !maps.Equal(byName(cats), byName(want)) {
					t.Fatalf("%s event %d: LiveStats %d, %d, %v; LiveAt's %d, %d, %v", p, at, n, bytes, cats, len(live), wantBytes, want)
				}
			}
			for j := range tl.Intervals {
				if iv := &tl.Intervals[j]; iv.PreWindow() && int(iv.End) == len(tl.Events) {
					blocks++
				}
			}
			t.Logf("%s cuda:%d: %d intervals, %d of blocks", p, d.Device, len(tl.Intervals), blocks)
		}
	}
}

// TestBandsBesideTheCursor: an export draws the bands on its own goroutine
// while the UI goroutine reads the live set at the cursor; both decide
// stacks with the one categorizer. Run under -race, they must not touch
// the same memory unguarded, and the bands drawn so are those drawn alone.
func TestBandsBesideTheCursor(t *testing.T) {
	for _, p := range []string{"../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../testdata/snapshots/h200/ring.pickle"} {
		alone := analyzeFile(t, p)
		beside := analyzeFile(t, p)
		for _, d := range alone.Devices {
			ta, tb := alone.Timeline(d.Device), beside.Timeline(d.Device)
			if ta == nil {
				continue
			}
			want := ta.Bands(BandCategory, 8)
			done := make(chan *Bands)
			go func() { done <- tb.Bands(BandCategory, 8) }()
			n := len(tb.Events)
			for at := -1; at < n; at += max(1, n/200) {
				tb.LiveAt(at, 50)
				tb.LiveStats(at)
			}
			got := <-done
			events := []int{-1, n / 4, n / 2, tb.Peak.EventIndex, n - 1}
			if !slices.Equal(got.Names, want.Names) || !reflect.DeepEqual(tb.Totals(got, events), ta.Totals(want, events)) {
				t.Fatalf("%s cuda:%d: bands beside the cursor %v, alone %v", p, d.Device, got.Names, want.Names)
			}
		}
	}
}

// TestCountActions: the allocs and free_completeds of traces one event
// short of two workers' share and past it, on 1 to 8 goroutines, are those
// counted one by one.
func TestCountActions(t *testing.T) {
	for _, n := range []int{0, 1, 2*countPerWorker - 1, 2 * countPerWorker, 3*countPerWorker + 7} {
		events := make([]TraceEntry, n)
		wantA, wantF := 0, 0
		for i := range events {
			events[i].SetAction(Action(i * 7 % 9))
			switch events[i].Action() {
			case ActionAlloc:
				wantA++
			case ActionFreeCompleted:
				wantF++
			}
		}
		for _, procs := range []int{1, 2, 3, 8} {
			if a, f := countActions(events, procs); a != wantA || f != wantF {
				t.Errorf("%d events, %d goroutines: %d allocs and %d frees, want %d and %d", n, procs, a, f, wantA, wantF)
			}
		}
	}
}

// TestLiveTreeIsTheCategoryTree: the timeline's live tree, whose sites it
// keeps between calls, is the category tree of the same live set at
// events across real traces, asked in any order and again.
func TestLiveTreeIsTheCategoryTree(t *testing.T) {
	eachRealTimeline(t, func(p string, tl *Timeline) {
		n := len(tl.Events)
		for _, at := range []int{n / 2, -1, n - 1, n / 3, n / 2} {
			for _, limit := range []int{0, 7} {
				got, want := treeText(tl.LiveTree(at, limit)), treeText(CategoryTree(tl.LiveAt(at, limit)))
				if got != want {
					t.Fatalf("%s cuda:%d event %d, limit %d: the live tree\n%s\nthe category tree\n%s", p, tl.Device, at, limit, got, want)
				}
			}
		}
	})
}

// eachRealTimeline calls f with each device's timeline of two real traces:
// an H100 run that the trace covers whole, and one whose ring buffer
// overflowed (blocks alive before the trace).
func eachRealTimeline(t *testing.T, f func(path string, tl *Timeline)) {
	t.Helper()
	for _, p := range []string{"../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../testdata/snapshots/h200/ring.pickle"} {
		a := analyzeFile(t, p)
		for _, d := range a.Devices {
			if tl := a.Timeline(d.Device); tl != nil {
				f(p, tl)
			}
		}
	}
}

// treeText is a tree's labels, bytes and blocks, one node a line, with the
// leaves' addresses.
func treeText(n *TreeNode) string {
	var b strings.Builder
	var walk func(n *TreeNode, depth int)
	walk = func(n *TreeNode, depth int) {
		fmt.Fprintf(&b, "%*s%s %d %d", 2*depth, "", n.Label, n.Bytes, n.Blocks)
		if n.Alloc != nil {
			fmt.Fprintf(&b, " %#x", n.Alloc.Address)
		}
		b.WriteByte('\n')
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return b.String()
}

// TestPrefixPeak: the levels, the last level and the peak (the highest
// level above the base, at its first event) of series one event short of
// two parts and past it, summed on 1 to 8 goroutines, are those of one
// pass: with ties at the peak (in one part and across parts), with every
// level at or below the base, and empty.
func TestPrefixPeak(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2*prefixPerWorker - 1, 2 * prefixPerWorker, 5*prefixPerWorker + 3} {
		for _, shape := range []string{"random", "ties", "below"} {
			delta := make([]int64, n)
			for i := range delta {
				switch shape {
				case "random":
					delta[i] = rng.Int64N(2001) - 1000
				case "ties": // up and down by one: the highest level recurs
					delta[i] = int64(1 - 2*(i%2))
				case "below":
					delta[i] = -rng.Int64N(3)
				}
			}
			const base = 77
			wantLevels := make([]int64, n)
			wantEnd, wantBest, wantAt := int64(base), int64(base), -1
			for i, d := range delta {
				wantEnd += d
				wantLevels[i] = wantEnd
				if wantEnd > wantBest {
					wantBest, wantAt = wantEnd, i
				}
			}
			for _, procs := range []int{1, 2, 3, 8} {
				got := slices.Clone(delta)
				end, best, at := prefixPeak(got, base, procs)
				if !slices.Equal(got, wantLevels) || end != wantEnd || best != wantBest || at != wantAt {
					t.Fatalf("%d events (%s), %d goroutines: end %d, peak %d at %d; want %d, %d at %d (levels equal: %v)",
						n, shape, procs, end, best, at, wantEnd, wantBest, wantAt, slices.Equal(got, wantLevels))
				}
			}
		}
	}
}

// TestLiveStatsSteps: LiveStats from the last query's totals (steps of at
// most liveStepMax intervals) equals a sweep of every interval, moving
// forwards and backwards, by one event and by jumps, to the ends, on
// real traces; with a bound of 10 intervals both ways are taken.
func TestLiveStatsSteps(t *testing.T) {
	for _, p := range []string{"../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../testdata/snapshots/h200/ring.pickle"} {
		s, err := Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		sweep, steps, small := Replay(s, 0, nil), Replay(s, 0, nil), Replay(s, 0, nil)
		sweep.liveStepMax, small.liveStepMax = -1, 10
		n := len(sweep.Events)
		rng := rand.New(rand.NewPCG(uint64(n), 3))
		at, within, over := n/2, 0, 0
		for range 400 {
			switch r := rng.IntN(10); {
			case r < 5:
				at += rng.IntN(7) - 3
			case r < 8:
				at += rng.IntN(n/5+1) - n/10
			case r == 8:
				at = -1
			default:
				at = n - 1
			}
			at = min(max(at, -1), n-1)
			if small.stats.ok {
				if small.changesBetween(small.stats.at, int32(at)) <= 10 {
					within++
				} else {
					over++
				}
			}
			wn, wb, wc := sweep.LiveStats(at)
			for _, tl := range []*Timeline{steps, small} {
				gn, gb, gc := tl.LiveStats(at)
				if gn != wn || gb != wb || !slices.Equal(gc, wc) {
					t.Fatalf("%s event %d: %d, %d, %v; a sweep gives %d, %d, %v", p, at, gn, gb, gc, wn, wb, wc)
				}
			}
		}
		if within < 20 || over < 20 {
			t.Errorf("%s: %d steps within the bound, %d over it: the test checks little", p, within, over)
		}
	}
}

// TestBlockStacksShared: blocks alive before the trace that share a stack
// (one Block.Stack) have the frames, category and role they have when no
// two blocks share one: a few stacks shared by many blocks, and many
// stacks shared by a few.
func TestBlockStacksShared(t *testing.T) {
	files := []string{"/ws/model/attention.py", "/ws/train.py", "??", "/usr/lib/python3/site-packages/torch/optim/adam.py"}
	names := []string{"forward", "c10::cuda::CUDACachingAllocator::malloc", "step", "softmax", "__init__"}
	table := cycledFrames(files, names, 300)
	for _, c := range []struct {
		name           string
		blocks, stacks int
	}{
		{"few stacks", 3 * decideAllMin, 20},
		{"many stacks", 3 * decideAllMin, 2 * decideAllMin},
	} {
		rng := rand.New(rand.NewPCG(uint64(c.stacks), 9))
		stacks := make([][]uint32, c.stacks)
		for k := range stacks {
			stacks[k] = make([]uint32, 1+rng.IntN(8))
			for i := range stacks[k] {
				stacks[k][i] = uint32(rng.IntN(len(table.Frames)))
			}
		}
		build := func(clone bool) *Snapshot {
			// Shared: a stack of Stacks per distinct stack; apart: one
			// per block, each its own copy of the ids.
			s := &Snapshot{}
			refs := make([]uint32, c.stacks)
			seg := Segment{Address: 1 << 30, TotalSize: int64(c.blocks) << 10, Type: "large"}
			for i := range c.blocks {
				k := rng.IntN(c.stacks)
				ref := refs[k]
				if clone || ref == 0 {
					ref = s.AddStack(NewStack(table, slices.Clone(stacks[k])))
				}
				if !clone {
					refs[k] = ref
				}
				seg.Blocks = append(seg.Blocks, Block{Address: seg.Address + uint64(i)<<10, Size: 1 << 10,
					RequestedSize: 1 << 10, State: StateActiveAllocated, Stack: ref})
			}
			// One allocation in the trace, so that the blocks are replayed.
			s.Segments = []Segment{seg}
			s.Traces = [][]TraceEntry{{TraceEntry{Addr: 1 << 40, Size: 512}.With(ActionAlloc)}}
			return s
		}
		seed := rng.Uint64()
		rng = rand.New(rand.NewPCG(seed, 1))
		shared := build(false)
		rng = rand.New(rand.NewPCG(seed, 1))
		apart := build(true)
		a, b := Analyze(shared, nil), Analyze(apart, nil)
		tl := a.Timeline(0)
		for j := range tl.Intervals {
			iv := &tl.Intervals[j]
			if iv.Addr == 1<<40 {
				continue
			}
			want := shared.BlockFrames(&shared.Segments[0].Blocks[(iv.Addr-(1<<30))>>10])
			if got := tl.FramesOf(iv); got.Len() != want.Len() || got.Key() != want.Key() {
				t.Fatalf("%s: block %#x has frames %v, want %v", c.name, iv.Addr, got, want)
			}
		}
		for i, x := range a.Devices[0].Allocations {
			y := b.Devices[0].Allocations[i]
			if x.Address != y.Address || x.Category != y.Category || x.CategoryFrame != y.CategoryFrame || x.Role != y.Role {
				t.Fatalf("%s: block %#x: %s/%d/%s shared, %s/%d/%s apart", c.name, x.Address,
					x.Category, x.CategoryFrame, x.Role, y.Category, y.CategoryFrame, y.Role)
			}
		}
		px, py := tl.PeakTop(0), b.Timeline(0).PeakTop(0)
		if len(px) != len(py) {
			t.Fatalf("%s: %d live at the peak shared, %d apart", c.name, len(px), len(py))
		}
		for i := range px {
			if px[i].Address != py[i].Address || px[i].Category != py[i].Category || px[i].Role != py[i].Role {
				t.Fatalf("%s: live %#x: %s/%s shared, %s/%s apart", c.name, px[i].Address, px[i].Category, px[i].Role, py[i].Category, py[i].Role)
			}
		}
	}
}

// TestStateSegmentStreams: a segment the state rebuilds from the trace
// (undoing its unmap or free) has the stream of that entry, which the
// trace keeps with its rare fields (Snapshot.StreamOf); neighbouring
// segments of an expandable pool merge on one stream only.
func TestStateSegmentStreams(t *testing.T) {
	const a = uint64(1) << 32
	for _, c := range []struct {
		name    string
		streams [2]uint64
		want    []StateSegment
	}{
		{"one stream", [2]uint64{7, 7}, []StateSegment{{Addr: a, Size: 4 * tMiB, Stream: 7}}},
		{"two streams", [2]uint64{7, 9}, []StateSegment{{Addr: a, Size: 2 * tMiB, Stream: 7}, {Addr: a + 2*tMiB, Size: 2 * tMiB, Stream: 9}}},
		{"the default stream", [2]uint64{0, 0}, []StateSegment{{Addr: a, Size: 4 * tMiB}}},
	} {
		s := &Snapshot{}
		extra := func(stream uint64) uint32 {
			if stream == 0 {
				return 0
			}
			s.TraceExtras = append(s.TraceExtras, TraceExtra{Stream: stream})
			return uint32(len(s.TraceExtras))
		}
		s.Traces = [][]TraceEntry{{
			TraceEntry{Addr: a, Size: 2 * tMiB}.With(ActionSegmentMap).WithExtra(extra(c.streams[0])),
			TraceEntry{Addr: a + 2*tMiB, Size: 2 * tMiB}.With(ActionSegmentMap).WithExtra(extra(c.streams[1])),
			TraceEntry{Addr: a, Size: 2 * tMiB}.With(ActionSegmentUnmap).WithExtra(extra(c.streams[0])),
			TraceEntry{Addr: a + 2*tMiB, Size: 2 * tMiB}.With(ActionSegmentUnmap).WithExtra(extra(c.streams[1])),
		}}
		tl := Replay(s, 0, nil)
		if got := tl.StateAt(s, 1).Segments; !slices.Equal(got, c.want) {
			t.Errorf("%s: segments after both maps %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestIntervalRoom: replay makes room once for the intervals, and maps
// ahead no more than it writes, in a consistent snapshot whose trace frees
// its own allocations, blocks allocated before it or nothing it saw; where
// the blocks leave out what the trace left open, the room still holds
// them; a snapshot that breaks both rules grows past the room and still
// replays every interval.
func TestIntervalRoom(t *testing.T) {
	const base, n = 0x7f0000000000, 3000
	addr := func(i int) uint64 { return base + uint64(i)*512 }
	ev := func(a Action, i int) TraceEntry { return TraceEntry{Addr: addr(i), Size: 512}.With(a) }
	free := func(i int) []TraceEntry { return []TraceEntry{ev(ActionFreeRequested, i), ev(ActionFreeCompleted, i)} }
	type shape struct {
		name      string
		trace     []TraceEntry
		live      []int // active blocks at the end
		intervals int
		mapped    bool // the pages mapped ahead are those written
		grows     bool
	}
	var own, before, outside, window, broken shape
	own = shape{name: "frees own allocations", intervals: 2 * n, mapped: true}
	for i := range n {
		own.live = append(own.live, 10*n+i) // alive before the trace
		own.trace = append(own.trace, ev(ActionAlloc, i))
		if i%2 == 0 {
			own.live = append(own.live, i)
		} else {
			own.trace = append(own.trace, free(i)...)
		}
	}
	before = shape{name: "frees blocks from before", intervals: 3 * n, mapped: true}
	outside = shape{name: "blocks leave out the trace's", intervals: 3 * n}
	for i := range n {
		before.live = append(before.live, i, 2*n+i)
		outside.live = append(outside.live, i)
		before.trace = append(before.trace, ev(ActionAlloc, 2*n+i))
		before.trace = append(before.trace, free(4*n+i)...)
	}
	outside.trace = before.trace
	window = shape{name: "window of frees", intervals: n, mapped: true}
	for i := range n {
		window.trace = append(window.trace, free(i)...)
	}
	broken = shape{name: "address allocated twice", intervals: 3 * n, grows: true}
	for i := range n {
		broken.trace = append(broken.trace, ev(ActionAlloc, i), ev(ActionAlloc, i))
		broken.trace = append(broken.trace, free(n+i)...)
	}
	for _, c := range []shape{own, before, outside, window, broken} {
		t.Run(c.name, func(t *testing.T) {
			s := &Snapshot{Traces: [][]TraceEntry{c.trace}}
			if c.live != nil {
				bs := make([]Block, len(c.live))
				for k, i := range c.live {
					bs[k] = Block{Address: addr(i), Size: 512, RequestedSize: 512, State: StateActiveAllocated}
				}
				s.Segments = []Segment{{Address: base, TotalSize: 1 << 30, Blocks: bs}}
			}
			allocs, frees := countActions(c.trace, 1)
			room, likely := intervalRoom(allocs, frees, activeBlocks(s, 0))
			tl := Replay(s, 0, nil)
			got := len(tl.Intervals)
			if got != c.intervals {
				t.Fatalf("%d intervals, want %d", got, c.intervals)
			}
			if likely > room {
				t.Errorf("maps %d ahead in a room of %d", likely, room)
			}
			if grew := cap(tl.Intervals) != room; grew != c.grows {
				t.Errorf("room %d, capacity %d for %d intervals: grown %v, want %v", room, cap(tl.Intervals), got, grew, c.grows)
			}
			if c.mapped && (likely < got || likely > got+64) {
				t.Errorf("maps %d ahead for %d intervals", likely, got)
			}
			if !c.mapped && likely >= got {
				t.Errorf("maps %d ahead for %d intervals: the case writes no more", likely, got)
			}
		})
	}
}
