package pickle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"memscope/snapshot/schema"
)

// TestTraceExtras: device_free, compile_context and user_metadata come back
// from TraceEntry.Extra whether the entry was recognised while decoding or
// bound from the generic form (a key the recogniser does not know), and
// entries with equal fields share one TraceExtra.
func TestTraceExtras(t *testing.T) {
	script := `
import pickle, sys
na = 'N/A'
def e(action, **kw):
    d = {'action': action, 'addr': 4096, 'size': 512, 'stream': 0, 'time_us': 7}
    d.update(kw)
    d['frames'] = []
    return d
trace = [
    e('alloc', compile_context=''.join(['N', '/', 'A']), user_metadata=''),  # recognised
    e('alloc', compile_context='ctx2', user_metadata='meta'),
    e('oom', device_free=1 << 20),
    e('free_completed', compile_context='N/A', user_metadata='', pool_id=(0, 1)),  # generic
    e('free_completed'),
]
pickle.dump({'segments': [], 'device_traces': [trace]}, open(sys.argv[1], 'wb'), protocol=4)
`
	data := pythonPickle(t, script)
	s, err := DecodeSnapshot(context.Background(), &data, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Traces[0]
	want := []schema.TraceExtra{
		{CompileContext: "N/A"},
		{CompileContext: "ctx2", UserMetadata: "meta"},
		{DeviceFree: 1 << 20},
		{CompileContext: "N/A"},
		{},
	}
	if len(tr) != len(want) {
		t.Fatalf("%d entries, want %d", len(tr), len(want))
	}
	for i, w := range want {
		if got := s.ExtraOf(&tr[i]); got != w {
			t.Errorf("entry %d: extra %+v, want %+v", i, got, w)
		}
	}
	if tr[0].Extra() != tr[3].Extra() {
		t.Errorf("equal extras not shared: %d and %d", tr[0].Extra(), tr[3].Extra())
	}
	if tr[4].Extra() != 0 || len(s.TraceExtras) != 3 {
		t.Errorf("extras %v, last entry's %d", s.TraceExtras, tr[4].Extra())
	}
}

// TestTraceExtrasTableFull: a graph holds at most maxExtras distinct
// extras; an entry that would add one more stays a generic dict, bound to
// the same TraceExtra, while entries whose extras are already in the table
// are still recognised.
func TestTraceExtrasTableFull(t *testing.T) {
	script := `
import pickle, sys
def e(cc):
    return {'action': 'alloc', 'addr': 4096, 'size': 512, 'stream': 0, 'compile_context': cc, 'frames': []}
trace = [e('A'), e('B'), e('A'), e('C'), e('B'), e('C'), {'action': 'oom', 'device_free': 5, 'frames': []}]
pickle.dump({'segments': [], 'device_traces': [trace]}, open(sys.argv[1], 'wb'), protocol=4)
`
	data := pythonPickle(t, script)
	want := []schema.TraceExtra{{CompileContext: "A"}, {CompileContext: "B"}, {CompileContext: "A"},
		{CompileContext: "C"}, {CompileContext: "B"}, {CompileContext: "C"}, {DeviceFree: 5}}
	for _, tc := range []struct{ limit, recognised, extras int }{
		{1, 2, 1}, // A only: the B, C and oom entries stay generic
		{2, 4, 2}, // A and B
		{3, 6, 3}, // A, B and C; the oom's would be the fourth
		{4, 7, 4}, // every entry
		{0, 7, 4}, // no limit but the format's
	} {
		d, root, err := decodeWith(context.Background(), data, nil, splitEven(data, nil), nil, nil, func(d *decoder) { d.g.maxExtras = tc.limit })
		if err != nil {
			t.Fatal(err)
		}
		g := d.g
		recognised := 0
		for i := range g.traces.len() {
			if g.traces.at(uint32(i)).has()&hasGeneric == 0 {
				recognised++
			}
		}
		if recognised != tc.recognised || len(g.extras) != tc.extras {
			t.Errorf("limit %d: %d entries recognised, %d extras; want %d and %d", tc.limit, recognised, len(g.extras), tc.recognised, tc.extras)
		}
		s, err := bindGraph(g, root, len(data))
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if got := s.ExtraOf(&s.Traces[0][i]); got != w {
				t.Errorf("limit %d, entry %d: extra %+v, want %+v", tc.limit, i, got, w)
			}
		}
	}
}

// TestTypedExtrasFull: a snapshot holds at most MaxTraceExtras distinct
// TraceExtras (an entry's index has 24 bits): with the binder's bound set
// to the four the trace has, every entry keeps its own; set to three, the
// fourth is dropped (the entry has none) and a warning says so. Entries
// recognised while decoding and generic ones both go through the bound.
func TestTypedExtrasFull(t *testing.T) {
	script := `
import pickle, sys
def e(cc):
    return {'action': 'alloc', 'addr': 4096, 'size': 512, 'stream': 0, 'compile_context': cc, 'frames': []}
trace = [e('A'), e('B'), e('A'), e('C'), e('B'), {'action': 'oom', 'device_free': 5, 'frames': [], 'x': 1}]
pickle.dump({'segments': [], 'device_traces': [trace]}, open(sys.argv[1], 'wb'), protocol=4)
`
	data := pythonPickle(t, script)
	all := []schema.TraceExtra{{CompileContext: "A"}, {CompileContext: "B"}, {CompileContext: "A"},
		{CompileContext: "C"}, {CompileContext: "B"}, {DeviceFree: 5}}
	for _, tc := range []struct {
		bound int
		kept  int // entries whose extra is kept, from the first
		warn  bool
	}{{4, 6, false}, {3, 5, true}} {
		g, root, err := decodePickleCtx(context.Background(), data, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := newBinder(g, len(data))
		b.extrasMax = tc.bound
		s, err := b.bindRoot(root)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range all {
			if i >= tc.kept {
				w = schema.TraceExtra{}
			}
			if got := s.ExtraOf(&s.Traces[0][i]); got != w {
				t.Errorf("bound %d, entry %d: extra %+v, want %+v", tc.bound, i, got, w)
			}
		}
		warned := false
		for _, w := range s.Warnings {
			warned = warned || strings.Contains(w, "distinct stream, device_free")
		}
		if warned != tc.warn || len(s.TraceExtras) > tc.bound {
			t.Errorf("bound %d: warnings %q, %d extras", tc.bound, s.Warnings, len(s.TraceExtras))
		}
	}
}

// TestRecordSizes: a trace record is 40 bytes and a typed entry 32, the
// figure the memory of a million-entry trace is planned on (docs/
// development.md): a field added to either must move a rare one out.
func TestRecordSizes(t *testing.T) {
	if n := unsafe.Sizeof(rawTrace{}); n != 40 {
		t.Errorf("rawTrace is %d bytes, want 40", n)
	}
	if n := unsafe.Sizeof(schema.TraceEntry{}); n != 32 {
		t.Errorf("TraceEntry is %d bytes, want 32", n)
	}
}

// pythonPickle runs script with python3 (skipping without it), which
// writes its pickle to sys.argv[1], and returns the file's bytes.
func pythonPickle(t *testing.T, script string) []byte {
	t.Helper()
	needPython(t)
	out := filepath.Join(t.TempDir(), "script.pickle")
	return runPython(t, out, "-c", script, out)
}

// runPython runs python3 with args, which writes a file at out, and
// returns the file's bytes; a failure of either fails t.
func runPython(t testing.TB, out string, args ...string) []byte {
	t.Helper()
	if b, err := exec.Command("python3", args...).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestMemoEncoding: every kind of value comes back from the memo as it went
// in, on both sides of each range of the encoding: containers below and at
// memoIDMask-1 (past it they go to memoVals), frames up to maxFrameID,
// trace and block records below and at 1<<28 (past it memoVals), and the
// rest.
func TestMemoEncoding(t *testing.T) {
	d := newDecoder(nil)
	for _, v := range []val{
		{k: kList, ref: 0}, {k: kDict, ref: memoIDMask - 2}, {k: kSet, ref: memoIDMask - 1}, {k: kTuple, ref: memoIDMask},
		{k: kFrame, ref: 0}, {k: kFrame, ref: maxFrameID},
		{k: kTrace, ref: 0}, {k: kTrace, ref: 1<<28 - 1}, {k: kTrace, ref: 1 << 28}, {k: kTrace, ref: 1<<32 - 1},
		{k: kBlock, ref: 0}, {k: kBlock, ref: 1<<28 - 1}, {k: kBlock, ref: 1 << 28}, {k: kBlock, ref: 1<<32 - 1},
		{k: kStack, ref: 0}, {k: kStack, ref: 1<<29 - 1}, {k: kStack, ref: 1 << 29},
		{k: kStr, ref: 7}, {k: kInt, i: -3}, {k: kNone},
	} {
		r, ok := d.memoRef(v)
		if !ok {
			t.Fatalf("%+v: memo full", v)
		}
		if got, ok := d.memoVal(r); !ok || got != v {
			t.Errorf("%+v: memo entry %#x reads back as %+v (%v)", v, r, got, ok)
		}
		inVals := r >= memoOther && r < memoTrace
		if want := (v.k == kTrace || v.k == kBlock) && v.ref >= 1<<28 || v.k == kStack && v.ref >= 1<<29 || (v.k >= kList && v.k <= kSet && v.ref >= memoIDMask-1) || v.k == kStr || v.k == kInt || v.k == kNone; inVals != want {
			t.Errorf("%+v: in memoVals %v, want %v", v, inVals, want)
		}
	}
}
