package pickle

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"memscope/snapshot/schema"
)

// genTraces is a snapshot writer in Python, so the tests read what
// pickle.dump writes (protocol 4 frames, or the protocol given after the
// output's path; batches of 1000 items), in shapes that reach each path of
// the helper and the join:
//
//	distinct     fresh frame dicts, strings shared through the memo
//	shared       a pool of frame dicts reused (memo reads of dicts)
//	late         new strings every few entries, reused after (memo reads
//	             the helper cannot resolve itself)
//	sharedlists  entries far apart share one frames list object
//	sharedtuples the same with tuples: a frames value that is no list
//	sharedentries entries of the prefix appended again in the second half
//	             (memo reads of trace records and frame lists that the
//	             helper made in its prefix, then cleared)
//	multi        three devices' lists, a segment list after them
//	multishared  the same over shared's pool of frames
//	selfref      entries hold a list that contains itself
//	segs         n/10 blocks in the segments, before the trace (its keys
//	             past the prefix); the trace's frames made all along it
//	             (memo reads of frames a helper cannot do itself)
//	hugesegs     the same with n/3 blocks: the keys past an eighth
//	segsonly     n blocks in the segments and no trace
const genTraces = `
import pickle, random, sys
shape, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rnd = random.Random(7)
files = ['/src/pkg/mod%d.py' % i for i in range(40)]
names = ['fn_%d' % i for i in range(60)]
segshapes = ('segs', 'hugesegs', 'segsonly', 'lateactions', 'oddactions')
npool = 5000 if shape in segshapes else 300
pool = [{'filename': files[i % 40], 'line': i, 'name': names[i % 60]} for i in range(npool)]
late = {}
def frames(i, seg=False):
    depth = 3 + rnd.randrange(12)
    if shape in segshapes:
        # The segments' frames are half the pool; the trace's the other
        # half, new ones all along (first read in any machine's region).
        h = npool // 2
        hi = h if seg else h + 1 + (h - 1) * i // n
        return [pool[rnd.randrange(0 if seg else h, hi)] for _ in range(depth)]
    if shape in ('shared', 'sharedentries', 'multishared'):
        return [pool[rnd.randrange(npool)] for _ in range(depth)]
    if shape == 'late':
        g = i // 7
        if g not in late:
            late[g] = ('/late/f%d.py' % g, 'late_%d' % g)
        f, nm = late[g]
        return [{'filename': f, 'line': j, 'name': nm} for j in range(depth)]
    return [{'filename': files[rnd.randrange(40)], 'line': rnd.randrange(5000), 'name': names[rnd.randrange(60)]} for _ in range(depth)]
lists = {}
odd = ('odd',)
def entry(i):
    a = ['alloc', 'free_requested', 'free_completed'][i % 3]
    if shape in ('lateactions', 'oddactions') and i >= n // 5 and i % 7 == 0:
        # Actions first written past the segments, in the main machine's
        # share of the trace, and read again in the helpers' regions (one
        # first written in the last region too); or one that is no
        # string, shared through the memo.
        if shape == 'oddactions':
            a = odd
        else:
            a = ['segment_alloc', 'segment_free'][i % 2] if i < 3 * n // 4 else 'segment_unmap'
    e = {'action': a, 'addr': 139637976727552 + 512 * i,
         'size': 512 * (1 + i % 97), 'stream': 0, 'time_us': 1700000000000000 + i}
    if i % 11 == 0:
        e['compile_context'] = 'cc%d' % (i // 500)
        e['user_metadata'] = 'um'
    if shape in ('sharedlists', 'sharedtuples'):
        k = i % (n // 2)
        if k not in lists:
            lists[k] = frames(i) if shape == 'sharedlists' else tuple(frames(i))
        e['frames'] = lists[k]
    else:
        e['frames'] = frames(i)
    if shape == 'selfref' and i % 5 == 0:
        l = []
        l.append(l)
        e['user_metadata'] = 'x'
        e['extra'] = l
    return e
segs = [{'device': 0, 'address': 139637976727552, 'total_size': 1 << 30, 'stream': 0,
         'segment_type': 'large', 'blocks': [{'address': 139637976727552 + i, 'size': 512, 'requested_size': 512,
         'state': 'active_allocated', 'frames': frames(i, True)} for i in range({'segs': n // 10, 'hugesegs': n // 3, 'lateactions': n // 3, 'oddactions': n // 3, 'segsonly': n}.get(shape, 40))]}]
if shape == 'segsonly':
    s = {'segments': segs, 'device_traces': [[]]}
elif shape == 'sharedentries':
    es = []
    for i in range(n):
        es.append(es[i % (n // 40)] if i >= n // 2 and i % 3 == 0 else entry(i))
    s = {'segments': segs, 'device_traces': [es]}
elif shape in ('multi', 'multishared'):
    traces = [[entry(i) for i in range(d, n, 3)] for d in range(3)]
    s = {'device_traces': traces, 'segments': segs}
else:
    s = {'segments': segs, 'device_traces': [[entry(i) for i in range(n)]], 'allocator_settings': {'x': 1}}
with open(out, 'wb') as f:
    pickle.dump(s, f, protocol=int(sys.argv[4]) if len(sys.argv) > 4 else 4)
`

func genPickle(t *testing.T, shape string, n int) []byte {
	t.Helper()
	return genPickleProto(t, shape, n, 4)
}

// genPickleProto is genPickle in protocol proto.
func genPickleProto(t testing.TB, shape string, n, proto int) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), shape+".pickle")
	return runPython(t, out, "-c", genTraces, shape, strconv.Itoa(n), out, strconv.Itoa(proto))
}

// splitAt places helpers at fractions of the input, whatever its size: the
// prefix's end, then each region's target.
func splitAt(prefix float64, targets ...float64) splitFunc {
	return func(n int) (int, []int) {
		var at []int
		for _, t := range targets {
			at = append(at, int(float64(n)*t))
		}
		return int(float64(n) * prefix), at
	}
}

// decodeTwice decodes data on one machine, then with a helper placed by
// split.
func decodeTwice(data []byte, split splitFunc) (one, two *decoder, root1, root2 val, err1, err2 error) {
	one, root1, err1 = decodeWith(context.Background(), data, nil, nil, nil, nil)
	two, root2, err2 = decodeWith(context.Background(), data, nil, split, nil, nil)
	return
}

// decodeBoth decodes data on one machine and with a helper placed by split,
// checks that both give the same value (or the same error), and reports
// whether the helper's work was joined.
func decodeBoth(t *testing.T, name string, data []byte, split splitFunc) (joined bool) {
	t.Helper()
	return len(decodeCompare(t, name, data, split).joined) > 0
}

// decodeCompare is decodeBoth, returning the decoder that had helpers.
func decodeCompare(t *testing.T, name string, data []byte, split splitFunc) *decoder {
	t.Helper()
	one, two, root1, root2, err1, err2 := decodeTwice(data, split)
	if sameErrors(t, name, "one machine", err1, "with a helper", err2) {
		if c1, c2 := canonical(one.g, root1), canonical(two.g, root2); c1 != c2 {
			t.Fatalf("%s: values differ (%d and %d bytes of canonical form)", name, len(c1), len(c2))
		}
	}
	return two
}

// sameErrors fails t unless two decodes of one input, named a and b, both
// failed with the same message or both succeeded; it reports whether both
// succeeded (their values are then the caller's to compare).
func sameErrors(t testing.TB, name, a string, errA error, b string, errB error) (ok bool) {
	t.Helper()
	switch {
	case (errA == nil) != (errB == nil):
		t.Fatalf("%s: %s: %v; %s: %v", name, a, errA, b, errB)
	case errA != nil && errA.Error() != errB.Error():
		t.Fatalf("%s: errors differ: %q (%s) and %q (%s)", name, errA, a, errB, b)
	}
	return errA == nil
}

// bindBoth is decodeBoth for snapshots, comparing the typed snapshots the
// binder makes (the canonical form of a real one is too slow to build).
func bindBoth(t *testing.T, name string, data []byte, split splitFunc) (joined bool) {
	t.Helper()
	one, two, root1, root2, err1, err2 := decodeTwice(data, split)
	if err1 == nil {
		s1, e1 := newBinder(one.g, len(data)).bindRoot(root1)
		s2, e2 := newBinder(two.g, len(data)).bindRoot(root2)
		if e1 == nil && e2 == nil {
			canonStacks(s1)
			canonStacks(s2)
		}
		if (e1 == nil) != (e2 == nil) || e1 == nil && !reflect.DeepEqual(s1, s2) || e1 != nil && e1.Error() != e2.Error() {
			t.Fatalf("%s: typed snapshots differ (errors %v, %v)", name, e1, e2)
		}
	} else if err2 == nil || err1.Error() != err2.Error() {
		t.Fatalf("%s: one machine: %v; with a helper: %v", name, err1, err2)
	}
	return len(two.joined) > 0
}

// canonStacks renumbers a snapshot's trace stacks in order of first use,
// and makes every stack (blocks' too) a stack of its own frames: stack and
// frame ids are the interning order, which differs between one machine
// and two; the frames each entry and block refers to must not.
func canonStacks(s *schema.Snapshot) {
	ids := map[uint32]uint32{}
	var stacks []schema.Stack
	renumber := func(k uint32) uint32 {
		if k == 0 {
			return 0
		}
		id, ok := ids[k]
		if !ok {
			stacks = append(stacks, ownFrames(s.Stacks[k-1]))
			id = uint32(len(stacks))
			ids[k] = id
		}
		return id
	}
	for i := range s.Segments {
		seg := &s.Segments[i]
		seg.Frames = ownFrames(seg.Frames)
		for j := range seg.Blocks {
			seg.Blocks[j].Stack = renumber(seg.Blocks[j].Stack)
		}
	}
	for _, tr := range s.Traces {
		for i := range tr {
			tr[i].Stack = renumber(tr[i].Stack)
		}
	}
	s.Stacks = stacks
}

// ownFrames is st with a table of its own frames, in order.
func ownFrames(st schema.Stack) schema.Stack {
	frames := make([]schema.Frame, st.Len())
	for i := range frames {
		frames[i] = *st.At(i)
	}
	return schema.StackOf(frames...)
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the shapes are written by pickle.dump")
	}
}

// TestHelperAgreesWithOneMachine: for every shape and several places of the
// region's start, two machines build exactly what one builds, and they do
// join (the shapes are what a helper is for).
func TestHelperAgreesWithOneMachine(t *testing.T) {
	needPython(t)
	for _, shape := range []string{"distinct", "shared", "late", "sharedlists", "sharedtuples", "sharedentries", "multi", "selfref"} {
		data := genPickle(t, shape, 5000)
		for _, target := range []float64{0.3, 0.6} {
			name := shape + "@" + strconv.FormatFloat(target, 'f', -1, 64)
			if !decodeBoth(t, name, data, splitAt(1.0/32, target)) {
				t.Errorf("%s: the helper's work was not joined", name)
			}
		}
	}
}

// TestHelpersAgreeWithOneMachine: with several helpers, each stopping where
// the next one starts, the machines build exactly what one builds, and
// every helper whose region starts at a batch of the list joins. Targets
// that land in one batch give one helper; a helper whose region holds the
// end of a device's list (multi) stops there and the main machine runs on
// to the next helper's start.
func TestHelpersAgreeWithOneMachine(t *testing.T) {
	needPython(t)
	splits := []struct {
		name    string
		targets []float64
		helpers int
	}{
		{"four", []float64{0.2, 0.4, 0.6, 0.8}, 4},
		{"seven", []float64{0.1, 0.2, 0.35, 0.5, 0.6, 0.75, 0.9}, 7},
		{"one batch", []float64{0.5, 0.5001}, 1},
		{"none past the last", []float64{0.5, 0.9999}, 1},
	}
	shapes := []string{"distinct", "shared", "late", "sharedlists", "sharedtuples", "sharedentries", "multi", "selfref"}
	if testing.Short() { // -race: a fifth of the time
		shapes, splits = []string{"late", "multi"}, splits[:3]
	}
	for _, shape := range shapes {
		data := genPickle(t, shape, 20000)
		for _, sp := range splits {
			name := shape + "/" + sp.name
			d := decodeCompare(t, name, data, splitAt(1.0/32, sp.targets...))
			if len(d.helpers) != sp.helpers || len(d.joined) != sp.helpers {
				t.Errorf("%s: %d helpers, %d joined; want %d", name, len(d.helpers), len(d.joined), sp.helpers)
			}
		}
	}
}

// TestHelpersAfterLongSegments: when the segments reach past the prefix,
// helpers read on until they have the trace keys (up to an eighth of the
// input) and still store their entries as records, with frames they read
// by memo index resolved at the join; with the keys past an eighth they
// give up at their first entry and the main machine runs alone; with no
// trace at all (segments alone) they run their regions of blocks. Either
// way the value is one machine's.
func TestHelpersAfterLongSegments(t *testing.T) {
	needPython(t)
	for _, c := range []struct {
		shape   string
		entries int // trace entries
		keyAt   [2]float64
		joined  bool
	}{
		{"segs", 60000, [2]float64{1.0 / 32, 1.0 / 8}, true},
		{"hugesegs", 60000, [2]float64{1.0 / 8, 1}, false},
		{"segsonly", 0, [2]float64{-1, -1}, true},
	} {
		// Framed, and not: protocol 2's helpers walk the opcodes to their
		// prefix's end, and on by a 32nd of the input at a time.
		for _, proto := range []int{4, 2} {
			data := genPickleProto(t, c.shape, 60000, proto)
			at := float64(bytes.Index(data, actionKeyIn(data))) / float64(len(data))
			if at < 0 && c.keyAt[0] >= 0 || at >= 0 && (at <= c.keyAt[0] || at >= c.keyAt[1]) {
				t.Fatalf("%s: the first key is at %.3f of the input: not the shape this test needs", c.shape, at)
			}
			splits := [][]float64{{0.5}, {0.3, 0.5, 0.7}}
			if testing.Short() || proto != 4 { // -race; protocol 2 once
				splits = splits[1:]
			}
			for _, targets := range splits {
				name := c.shape + "/protocol " + strconv.Itoa(proto) + "/" + strconv.Itoa(len(targets))
				one, _, err := decodeWith(context.Background(), data, nil, nil, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				d := decodeCompare(t, name, data, splitAt(1.0/32, targets...))
				if got := len(d.joined) == len(targets); got != c.joined {
					t.Errorf("%s: %d of %d helpers joined", name, len(d.joined), len(targets))
				}
				// Frame lists interned as stacks, not generic lists of frames.
				if got, want := d.g.items.len(), one.g.items.len(); got > want+want/10+1024 {
					t.Errorf("%s: %d generic items, one machine %d", name, got, want)
				}
				if d.g.traces.len() != one.g.traces.len() || one.g.traces.len() != c.entries {
					t.Errorf("%s: %d trace records, one machine %d; want %d", name, d.g.traces.len(), one.g.traces.len(), c.entries)
				}
			}
		}
	}
}

// TestHelpersAfterSegmentsPastAnEighth: where the trace's keys come after
// an eighth of the input (hugesegs: 20k live blocks with their frames
// before the trace), the helpers placed by splitCores run the input up to
// them as their prefix, share the trace after them, and join, with one
// machine's value; placed as for keys within the usual prefix, they give
// up (TestHelpersAfterLongSegments).
func TestHelpersAfterSegmentsPastAnEighth(t *testing.T) {
	needPython(t)
	for _, proto := range []int{4, 2} {
		data := genPickleProto(t, "hugesegs", 60000, proto)
		keys := traceKeyAt(data, actionKeyIn(data), len(data)/2, keySearchStep, nil)
		if keys <= len(data)/8 {
			t.Fatalf("the keys are at %d of %d bytes: not the shape this test needs", keys, len(data))
		}
		for _, cores := range []int{2, 3} {
			split := scaledSplit(cores, keys)
			_, targets := split(len(data))
			if len(targets) != cores-1 {
				t.Fatalf("%d cores: targets %v", cores, targets)
			}
			name := "hugesegs/protocol " + strconv.Itoa(proto) + "/" + strconv.Itoa(cores)
			d := decodeCompare(t, name, data, split)
			if len(d.joined) != len(targets) {
				t.Errorf("%s: %d of %d helpers joined", name, len(d.joined), len(targets))
			}
		}
	}
}

// scaledSplit is splitCores' plan on cores cores for input whose trace's
// keys are at keys, made at 64 times the input's size and scaled back:
// the tests' inputs are smaller than parallelMin.
func scaledSplit(cores, keys int) splitFunc {
	return func(n int) (int, []int) {
		prefix, targets := splitCores(n*64, cores, keys*64)
		for i := range targets {
			targets[i] /= 64
		}
		return prefix / 64, targets
	}
}

// TestSplitEvenWithoutTrace: input without a trace's key runs on one
// machine (its blocks' records and stacks, copied and interned again at
// each join, took two machines as long as one), searched to its end with
// the pages given back; a key anywhere, before or past the middle, keeps
// the helpers.
func TestSplitEvenWithoutTrace(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	n := parallelMin + 1<<20
	for _, c := range []struct {
		name    string
		keyAt   int // -1: none
		helpers bool
	}{
		{"no trace", -1, false},
		{"key within the prefix", n / 40, true},
		{"key past the middle", 3 * n / 4, true},
		{"key at the end", n - len(actionKey), true},
	} {
		data := make([]byte, n)
		copy(data, []byte{opProto, 4})
		if c.keyAt >= 0 {
			copy(data[c.keyAt:], actionKey)
		}
		var dropped int
		_, targets := splitEven(data, func(from, to int) { dropped += to - from })(n)
		if got := len(targets) > 0; got != c.helpers {
			t.Errorf("%s: helpers at %v", c.name, targets)
		}
		if !c.helpers && dropped != n {
			t.Errorf("%s: gave back %d of %d bytes searched", c.name, dropped, n)
		}
	}
}

// TestTraceKeyAt finds the trace's first key in steps of every size, the
// key across two steps included, only before the limit, and gives back
// the pages of each step it searched in vain, never those of the step
// where it found the key.
func TestTraceKeyAt(t *testing.T) {
	data := bytes.Repeat([]byte{0}, 1000)
	at := 500
	copy(data[at:], actionKey)
	copy(data[900:], actionKey) // a later one: not the first
	for step := 1; step <= len(data); step++ {
		var dropped [][2]int
		drop := func(from, to int) { dropped = append(dropped, [2]int{from, to}) }
		if got := traceKeyAt(data, actionKey, len(data), step, drop); got != at {
			t.Fatalf("step %d: found at %d, want %d", step, got, at)
		}
		end := 0
		for _, r := range dropped {
			if r[0] != end || r[1] > at {
				t.Fatalf("step %d: gave back %v, not the steps before the key's in order", step, dropped)
			}
			end = r[1]
		}
		if end > at || at-end >= step {
			t.Fatalf("step %d: gave back up to %d; the key is at %d", step, end, at)
		}
	}
	for _, c := range []struct{ limit, want int }{
		{at + len(actionKey) - 1, -1}, // the key ends past the limit
		{at + len(actionKey), at},
		{len(data) + 100, at},
	} {
		if got := traceKeyAt(data, actionKey, c.limit, 64, nil); got != c.want {
			t.Errorf("limit %d: found at %d, want %d", c.limit, got, c.want)
		}
	}
	var dropped int
	if got := traceKeyAt(data[:at], actionKey, at, 64, func(from, to int) { dropped += to - from }); got != -1 || dropped != at {
		t.Errorf("without a key: found at %d, gave back %d of %d bytes", got, dropped, at)
	}
}

// TestHelpersGiveUpAlone: a helper that cannot run its region leaves it to
// the main machine, which still joins the helpers before and after it;
// what ends the main machine's joins (an explicit memo index it ran) ends
// them; a truncated input is one machine's error.
func TestHelpersGiveUpAlone(t *testing.T) {
	needPython(t)
	data := genPickle(t, "distinct", 20000)
	n := len(data)
	second := batchAfter(t, data, n/2) // in the second helper's region
	targets := []float64{0.3, 0.45, 0.7}
	cases := []struct {
		name   string
		data   []byte
		joined int
	}{
		{"clean", data, 3},
		// A list of memo reads of a string, as frameList reads frame
		// lists: the helper keeps it as a stack of placeholders, a value
		// (kStack), which the join finds are no frames: the main machine
		// runs that region, and makes a generic list.
		{"a list of strings read from the memo", insertFramed(t, data, second+1, append(append([]byte{opEmptyList, opMemoize, opMark}, longGet(lateStrAt(t, data, second))[1:]...), append(longGet(lateStrAt(t, data, second))[1:], opAppends)...)...), 2},
		// The same list of one string, by APPEND: a container of a stack
		// of placeholders, which the join makes a generic list of.
		{"a list of a string read from the memo", insertFramed(t, data, second+1, append(append([]byte{opEmptyList, opMemoize}, longGet(lateStrAt(t, data, second))[1:]...), opAppend)...), 3},
		{"read ahead in the second region", insertFramed(t, data, second, append(longGet(1<<31-5), opPopMark)...), 1},
		{"POP below the second region", insertFramed(t, data, second+1, opPop, opPop), 1},
		// The second helper stops (it pops the list below its region):
		// the first and third join.
		{"the list popped and read back", insertFramed(t, data, second+1, append([]byte{opPop, opPop}, append(longGet(listMemoAt(t, data, second))[1:], opMark)...)...), 2},
		{"read back in the second region", insertFramed(t, data, second+1, append(longGet(uint32(memoSizeAt(t, data, second)-1)), opPopMark)...), 3},
		{"STOP in the second region", insertFramed(t, data, second+1, opNone, opStop), 1},
		{"BINPUT in the second region", insertFramed(t, data, second+1, opNone, opBinPut, 3, opPop), 1},
		{"truncated in the last region", data[:n*7/8], 2},
	}
	for _, c := range cases {
		if d := decodeCompare(t, c.name, c.data, splitAt(1.0/32, targets...)); len(d.joined) != c.joined {
			t.Errorf("%s: %d helpers joined, want %d", c.name, len(d.joined), c.joined)
		}
	}
}

// TestHelperRecognisesSharedLists: entries of the helper's region whose
// frames list was made before it (a placeholder until the join) are still
// trace records, not generic dicts: on a real trace that is a third of the
// helper's entries.
func TestHelperRecognisesSharedLists(t *testing.T) {
	needPython(t)
	data := genPickle(t, "sharedlists", 5000)
	for _, split := range []splitFunc{nil, splitAt(1.0/32, 0.6)} {
		d, _, err := decodeWith(context.Background(), data, nil, split, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if split != nil && len(d.joined) == 0 {
			t.Fatal("not joined")
		}
		generic := 0
		for i := range uint32(d.g.conts.len()) {
			if c := d.g.conts.at(i); c.kind == cGeneric && c.vk == kDict && c.n > 0 {
				if k := d.g.seq(val{k: kDict, ref: i})[0]; k.k == kStr && d.g.strs[k.ref] == "action" {
					generic++
				}
			}
		}
		if d.g.traces.len() != 5000 || generic != 0 {
			t.Errorf("helper %v: %d trace records, %d generic entry dicts; want 5000 and 0", split != nil, d.g.traces.len(), generic)
		}
	}
}

// TestHelperLastBatchOfOne: pickle.dump writes a last batch of one item as
// APPEND, not MARK ... APPENDS; the helper takes it too.
func TestHelperLastBatchOfOne(t *testing.T) {
	needPython(t)
	for _, n := range []int{3000, 3001, 3002, 2999} {
		data := genPickle(t, "distinct", n)
		if !decodeBoth(t, "distinct/"+strconv.Itoa(n), data, splitAt(1.0/32, 0.5)) {
			t.Errorf("%d entries: not joined", n)
		}
	}
}

// TestHelperGivesUp: inputs the helper cannot run as the main machine
// would are run by the main machine alone, with the same result or error.
func TestHelperGivesUp(t *testing.T) {
	needPython(t)
	data := genPickle(t, "distinct", 5000)
	n := len(data)
	// Batch starts in the helper's region and in the main machine's part
	// after the prefix.
	late, early := batchAfter(t, data, n*3/4), batchAfter(t, data, n/4)
	insert := func(at int, ops ...byte) []byte { return insertOps(data, at, ops...) }
	cases := []struct {
		name   string
		data   []byte
		joined bool
	}{
		// A read of an entry not written yet, dropped at once: an
		// error for one machine, a placeholder the join must refuse.
		{"read ahead in the region", insert(late, append(longGet(1<<31-5), opPopMark)...), false},
		{"read ahead just past the memo", insert(late, append(longGet(uint32(memoSizeAt(t, data, late))), opPopMark)...), false},
		// A read of an entry written before: fine for both.
		{"read back in the region", insert(late, append(longGet(uint32(memoSizeAt(t, data, late)-1)), opPopMark)...), true},
		// An explicit index replaces an entry the helper read in its
		// prefix: the join is refused.
		{"BINPUT after the prefix", insert(early, opNone, opBinPut, 3, opPop), false},
		// Explicit indices in the region: the helper stops.
		// (late+1 is inside a batch; at late, between two batches, the
		// helper ends its region and the main machine runs what follows.)
		{"BINPUT in the region", insert(late+1, opNone, opBinPut, 3, opPop), false},
		{"BINPUT between batches", insert(late, opNone, opBinPut, 3, opPop), true},
		{"truncated in the region", data[:n*7/8], false},
		{"STOP in the region", insert(late+1, opNone, opStop), false},
		{"POP below the region", insert(late+1, opPop, opPop), false},
	}
	for _, c := range cases {
		if got := decodeBoth(t, c.name, c.data, splitAt(1.0/32, 0.5)); got != c.joined {
			t.Errorf("%s: joined %v, want %v", c.name, got, c.joined)
		}
	}
}

// insertOps returns a copy of data with ops inserted at offset at.
func insertOps(data []byte, at int, ops ...byte) []byte {
	return append(append(append([]byte{}, data[:at]...), ops...), data[at:]...)
}

// lateStrAt is the memo index of the last string one machine memoized
// before pos.
func lateStrAt(t *testing.T, data []byte, pos int) uint32 {
	t.Helper()
	d := runTo(t, data, pos)
	for i := uint32(d.memo.len()); i > 0; i-- {
		if v, ok := d.memoVal(*d.memo.at(i - 1)); ok && v.k == kStr {
			return i - 1
		}
	}
	t.Fatalf("no string memoized before %d", pos)
	return 0
}

// listMemoAt is the memo index of the list on top of one machine's stack at
// pos.
func listMemoAt(t *testing.T, data []byte, pos int) uint32 {
	t.Helper()
	d := runTo(t, data, pos)
	top := d.stack[len(d.stack)-1]
	for i := range uint32(d.memo.len()) {
		if v, ok := d.memoVal(*d.memo.at(i)); ok && v == top && v.k == kList {
			return i
		}
	}
	t.Fatalf("no memo entry holds the list on top at %d", pos)
	return 0
}

// insertFramed is insertOps that also lengthens the protocol 4 frame that
// holds at, so that later frame boundaries (and helpers' plans past at)
// stay where opcodes start.
func insertFramed(t *testing.T, data []byte, at int, ops ...byte) []byte {
	t.Helper()
	out := insertOps(data, at, ops...)
	for pos := 2; pos < at; {
		if data[pos] != opFrame {
			t.Fatalf("no frame at %d", pos)
		}
		l := int(binary.LittleEndian.Uint64(data[pos+1:]))
		if at < pos+9+l {
			binary.LittleEndian.PutUint64(out[pos+1:], uint64(l+len(ops)))
			return out
		}
		pos += 9 + l
	}
	t.Fatalf("%d is in no frame", at)
	return nil
}

// longGet is MARK LONG_BINGET idx: a memo read on a mark of its own, which
// POP_MARK drops again.
func longGet(idx uint32) []byte {
	return binary.LittleEndian.AppendUint32([]byte{opMark, opLongBinGet}, idx)
}

// batchAfter returns the first batch start past the first frame boundary
// at or past pos.
func batchAfter(t *testing.T, data []byte, pos int) int {
	t.Helper()
	p, ok := planSplit(data, 0, pos)
	if !ok {
		t.Fatalf("no batch after byte %d", pos)
	}
	return p.at
}

// memoSizeAt runs data up to pos on one machine and returns its memo size.
func memoSizeAt(t *testing.T, data []byte, pos int) int {
	t.Helper()
	return runTo(t, data, pos).memo.len()
}

// runTo runs one machine over data up to pos, an opcode boundary.
func runTo(t *testing.T, data []byte, pos int) *decoder {
	t.Helper()
	d := newDecoder(data)
	d.end = pos
	if _, err := d.run(); err != errPrefix {
		t.Fatalf("running to %d: %v", pos, err)
	}
	return d
}

// TestHelperThresholds: splitCores leaves input under parallelMin to one
// machine, adds a machine per regionMin bytes up to one per core (which
// its caller bounds by machinesFor), and gives each machine as much to run
// (a byte of prefix counted prefixCost); planSplit needs frames
// (protocol 4 or 5) and a batch past the target; a prefix with fewer than
// 256 memo entries is not enough.
func TestHelperThresholds(t *testing.T) {
	for _, c := range []struct {
		n, cores, machines int
	}{
		{parallelMin - 1, 16, 1},
		{parallelMin, 16, 2},
		{parallelMin, 1, 1},
		{3*regionMin - 1, 16, 2},
		{3 * regionMin, 16, 3},
		{3 * regionMin, 2, 2},
		{repeatedMachines * regionMin, 64, repeatedMachines},
		{(repeatedMachines+1)*regionMin - 1, 64, repeatedMachines},
		{(maxMachines + 1) * regionMin, maxMachines, maxMachines},
		{1 << 30, 4, 4},
	} {
		prefix, targets := splitCores(c.n, c.cores, -1)
		if got := len(targets) + 1; got != c.machines {
			t.Errorf("%d bytes on %d cores: %d machines, want %d", c.n, c.cores, got, c.machines)
			continue
		}
		if len(targets) == 0 {
			continue
		}
		if prefix != c.n/32 {
			t.Errorf("%d bytes: prefix %d, want %d", c.n, prefix, c.n/32)
		}
		// Each machine's bytes: the main machine's up to the first
		// target, each helper's prefix and region.
		work := []int{targets[0]}
		for i, at := range targets {
			end := c.n
			if i+1 < len(targets) {
				end = targets[i+1]
			}
			work = append(work, prefixCost*prefix+end-at)
		}
		if lo, hi := slices.Min(work), slices.Max(work); hi-lo > len(work) {
			t.Errorf("%d bytes on %d machines: shares %v", c.n, c.machines, work)
		}
	}
	if prefix, targets := splitCores(parallelMin, 2, parallelMin/32); len(targets) != 1 || targets[0] != parallelMin/2+parallelMin/32 || prefix != parallelMin/32 {
		t.Errorf("two machines: prefix %d, targets %v; want %d, [%d]", prefix, targets, parallelMin/32, parallelMin/2+parallelMin/32)
	}
	// The trace's keys past the usual prefix: every machine runs the
	// input up to them, and the rest is shared so that each runs as long,
	// each share at least regionMin: evenly where the helpers decode the
	// whole prefix; by walkedTargets' costs where they walk it (keys at
	// walkPrefixMin 32nds or more), or evenly where a walked share would
	// be under regionMin.
	for _, c := range []struct {
		n, cores, keys, machines int
		walked                   bool
	}{
		{1 << 30, 4, 1<<30/32 - 1, 4, false},                  // the usual prefix
		{1 << 30, 4, 1<<30/32 + 1, 4, false},                  // just past it
		{1 << 30, 4, walkPrefixMin*(1<<30/32) - 1, 4, false},  // a byte short of walking
		{1 << 30, 4, walkPrefixMin * (1 << 30 / 32), 4, true}, // walked
		{1 << 30, 2, 1 << 28, 2, true},                        // a quarter in
		{1 << 30, 4, 1 << 28, 4, true},
		{parallelMin, 2, parallelMin / 8, 1, false},    // the rest is under two regions
		{2*regionMin + 1<<20, 2, 1 << 20, 2, false},    // the rest is exactly two: walked, the main machine's share would be short
		{2*regionMin + 1<<20, 2, 1<<20 + 1, 1, false},  // and a byte short of them
		{5*regionMin + 1<<22, 8, 1 << 22, 5, false},    // a machine per region
		{5*regionMin + 1<<22, 8, 1<<22 + 64, 4, false}, // one fewer a byte short
	} {
		prefix, targets := splitCores(c.n, c.cores, c.keys)
		if got := len(targets) + 1; got != c.machines {
			t.Errorf("%d bytes on %d cores, keys at %d: %d machines, want %d", c.n, c.cores, c.keys, got, c.machines)
			continue
		}
		if len(targets) == 0 || c.keys <= c.n/32 {
			continue
		}
		if prefix != c.keys {
			t.Errorf("%d bytes, keys at %d: prefix %d", c.n, c.keys, prefix)
		}
		if got := walkedTargets(c.n, len(targets)+1, c.keys) != nil; got != c.walked {
			t.Errorf("%d bytes, keys at %d: walked %v, want %v", c.n, c.keys, got, c.walked)
		}
		// Past the keys: the main machine's share, then each helper's,
		// and what each machine runs, in eighths of a trace byte.
		shares := []int{targets[0] - c.keys}
		cost := []int{8 * c.n} // the same for all without a walk
		if c.walked {
			head := c.n / 32
			cost[0] = segmentCost8*c.keys + 8*(targets[0]-c.keys)
			for i, at := range targets {
				end := c.n
				if i+1 < len(targets) {
					end = targets[i+1]
				}
				cost = append(cost, headCost8*head+walkCost8*(c.keys-head)+8*(end-at))
			}
		}
		for i, at := range targets {
			end := c.n
			if i+1 < len(targets) {
				end = targets[i+1]
			}
			shares = append(shares, end-at)
			if !c.walked {
				cost = append(cost, 8*c.n)
			}
		}
		if slices.Min(shares) < regionMin {
			t.Errorf("%d bytes, keys at %d: shares %v, one under regionMin", c.n, c.keys, shares)
		}
		if !c.walked {
			if lo, hi := slices.Min(shares), slices.Max(shares); hi-lo > len(shares) {
				t.Errorf("%d bytes, keys at %d: shares %v", c.n, c.keys, shares)
			}
		} else if lo, hi := slices.Min(cost), slices.Max(cost); hi-lo > 16*len(cost) {
			t.Errorf("%d bytes, keys at %d: walked shares %v cost %v", c.n, c.keys, shares, cost)
		}
	}
	needPython(t)
	data := genPickle(t, "distinct", 6000)
	if _, ok := planSplit(data, 0, len(data)-100); ok {
		t.Error("planSplit found a batch in the last 100 bytes")
	}
	proto2 := bytes.Clone(data)
	proto2[1] = 2
	if _, ok := planSplit(proto2, 0, len(data)/2); ok {
		t.Error("planSplit split a pickle that says protocol 2")
	}
	// The prefix's memo entries, around 256: the region's entries are
	// numbered from 256 at least, past every BINGET's index.
	for _, c := range []struct {
		memo, from int
	}{{255, 256}, {256, 256}, {257, 257}} {
		prefix := 2
		for memoSizeAt(t, data, prefix) < c.memo {
			n, _ := opSize(data, prefix)
			prefix += n
		}
		// prefix is now the first opcode boundary with c.memo entries
		// made (frame boundaries are too coarse to hit it).
		p, ok := planSplit(data, 0, len(data)/2)
		if !ok {
			t.Fatal("no plan")
		}
		// The helper's prefix ends there (runPrefix would read on to the
		// trace's keys, past both).
		h := runTo(t, data, prefix)
		if !h.enterRegion(p.at, p.stop, p.inBatch) || h.refFrom != int64(c.from) || h.memo.len() != c.from {
			t.Errorf("prefix with %d memo entries: region numbered from %d (memo %d), want %d", c.memo, h.refFrom, h.memo.len(), c.from)
		}
	}
	// The trace's first key, "action", just inside the prefix, and past
	// it: the helper reads on (up to an eighth of the input).
	at := bytes.Index(data, []byte("\x8c\x06action"))
	p, _ := planSplit(data, 0, len(data)/2)
	for _, c := range []struct {
		prefix int
		reads  bool
	}{{at + 8, false}, {at, true}} {
		end := 2
		for end < c.prefix {
			n, _ := opSize(data, end)
			end += n
		}
		h := newDecoder(data)
		h.end = end
		if !h.runPrefix(splitPlan{prefix: end, at: p.at, stop: len(data)}) {
			t.Errorf("prefix to %d (the key at %d): gave up", end, at)
		}
		if c.reads != (h.pos > end) {
			t.Errorf("prefix to %d (the key at %d): ran to %d", end, at, h.pos)
		}
	}
}

// TestHelperOnTheSamples: the snapshots under testdata (and the shared
// samples, where present), split at two places, decode as on one machine;
// those PyTorch wrote with trace batches past the split are joined.
func TestHelperOnTheSamples(t *testing.T) {
	samples := samplePickles(t)
	targets := []float64{0.4, 0.7}
	if testing.Short() {
		targets = targets[:1]
	}
	joins := 0
	for name, data := range samples {
		for _, target := range targets {
			if bindBoth(t, name, data, splitAt(1.0/32, target)) {
				joins++
			}
		}
	}
	if joins < 4*len(targets) {
		t.Errorf("only %d of %d decodes joined a helper: the comparison proves little", joins, len(samples)*len(targets))
	}
	t.Logf("%d of %d decodes joined a helper", joins, len(samples)*len(targets))
}

// TestHelperCancelled: a cancelled decode returns at once, and its helper
// has stopped by then (it reads the input, which the caller may unmap).
func TestHelperCancelled(t *testing.T) {
	needPython(t)
	data := genPickle(t, "distinct", 5000)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, _, err := decodeWith(ctx, data, nil, splitAt(1.0/32, 0.3, 0.5, 0.7), nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if len(d.helpers) != 3 {
		t.Fatalf("%d helpers, want 3", len(d.helpers))
	}
	for i, h := range d.helpers {
		if !h.joined {
			t.Errorf("the decode returned without waiting for helper %d", i)
		}
	}
	// The helper has sent its result by now (joined), but its goroutine
	// may still be on its way out: a leak is one that never leaves.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines 5 s after, %d before", after, before)
	}
}

// samplePickles reads the real snapshots in testdata (gzip undone), by
// file name: what PyTorch wrote, frame lists repeated byte for byte.
func samplePickles(t testing.TB) map[string][]byte {
	t.Helper()
	var paths []string
	for _, g := range []string{"../../testdata/snapshots/*.pickle", "../../testdata/snapshots/*/*.pickle",
		"../../testdata/snapshots/*/*.pickle.gz"} {
		m, _ := filepath.Glob(g)
		paths = append(paths, m...)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Ext(p) == ".gz" {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if data, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		out[filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p)] = data
	}
	return out
}

// TestMachinesFor: a decode runs on up to repeatedMachines when the frame
// lists in the sample at the input's middle mostly repeat: at most one in
// sampleMaxDistinct distinct, and sampleMinLists of them at least (each
// side of both); lists outside the sample do not count. On files that
// pickle.dump wrote: stacks that repeat, and distinct ones.
func TestMachinesFor(t *testing.T) {
	// A list of three memo gets, the third k, after the list's put
	// (protocols 4 and 5 write MEMOIZE, 2 and 3 BINPUT or LONG_BINPUT,
	// PyTorch's C++ pickler none), in 20 bytes.
	list := func(k int, put []byte) []byte {
		l := append([]byte{opEmptyList}, put...)
		l = append(l, opMark, opBinGet, 1, opLongBinGet, 7, 0, 0, 0, opBinGet, byte(k), opAppends, opBinPut, 9)
		return append(l, bytes.Repeat([]byte{opNone}, 20-len(l))...)
	}
	build := func(lists, distinct, at int, put []byte) []byte {
		data := bytes.Repeat([]byte{opNone}, 3*sampleLen)
		for i := range lists {
			copy(data[at+i*20:], list(i%distinct, put))
		}
		return data
	}
	mid := 3*sampleLen/2 - 1000
	for _, put := range [][]byte{{opMemoize}, {opBinPut, 3}, {opLongBinPut, 3, 1, 0, 0}, {}} {
		for _, c := range []struct {
			name                string
			lists, distinct, at int
			want                int
		}{
			{"a quarter distinct", sampleMinLists, sampleMinLists / sampleMaxDistinct, mid, repeatedMachines},
			{"one more distinct", sampleMinLists, sampleMinLists/sampleMaxDistinct + 1, mid, maxMachines},
			{"one list too few", sampleMinLists - 1, 1, mid, maxMachines},
			{"all the same", 10 * sampleMinLists, 1, mid, repeatedMachines},
			{"before the sample", 10 * sampleMinLists, 1, sampleLen - 10*sampleMinLists*20 - 1, maxMachines},
			{"at the sample's start", 10 * sampleMinLists, 1, sampleLen, repeatedMachines},
			{"past the sample", 10 * sampleMinLists, 1, 2 * sampleLen, maxMachines},
		} {
			if got := machinesFor(build(c.lists, c.distinct, c.at, put)); got != c.want {
				t.Errorf("%s, put %x: %d machines, want %d", c.name, put, got, c.want)
			}
		}
	}
	// A list cut short at the sample's end is no list: one list too few,
	// then such a tail, is still too few.
	for _, tail := range [][]byte{{opEmptyList}, {opEmptyList, opLongBinPut, 1}, {opEmptyList, opBinPut, 1}, {opEmptyList, opMemoize},
		{opEmptyList, opMark}, {opEmptyList, opMark, opBinGet, 1}} {
		data := build(sampleMinLists-1, 1, mid, []byte{opMemoize})
		lo := len(data)/2 - sampleLen/2
		copy(data[lo+sampleLen-len(tail):], tail)
		if got := machinesFor(data); got != maxMachines {
			t.Errorf("%d lists, then %x at the sample's end: %d machines", sampleMinLists-1, tail, got)
		}
	}
	needPython(t)
	for _, c := range []struct {
		stacks, protocol string
		want             int
	}{{"40", "4", repeatedMachines}, {"200000", "4", maxMachines}, {"40", "2", repeatedMachines}, {"200000", "2", maxMachines}} {
		p := filepath.Join(t.TempDir(), "s.pickle")
		args := []string{"../../scripts/gen_snapshot.py", "--entries", "30000", "--frames", "shared", "--stacks", c.stacks, "--depth", "12", "--protocol", c.protocol, p}
		if out, err := exec.Command("python3", args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := machinesFor(data); got != c.want {
			t.Errorf("%s distinct stacks in 30000 entries (%d bytes, protocol %s): %d machines, want %d", c.stacks, len(data), c.protocol, got, c.want)
		}
	}
}

// TestMachinesOn: a machine per core, on input of parallelMin bytes or more
// (one below), and past maxMachines cores as many as the sample allows
// (machinesFor); up to maxMachines cores, whatever the sample says.
func TestMachinesOn(t *testing.T) {
	repeated := bytes.Repeat([]byte{opNone}, parallelMin)
	mid := len(repeated)/2 - sampleLen/2
	for i := range 10 * sampleMinLists {
		copy(repeated[mid+i*16:], []byte{opEmptyList, opMemoize, opMark, opBinGet, 1, opBinGet, 2, opAppends})
	}
	distinct := bytes.Repeat([]byte{opNone}, parallelMin)
	if machinesFor(repeated) != repeatedMachines || machinesFor(distinct) != maxMachines {
		t.Fatal("the inputs do not sample as meant")
	}
	for _, c := range []struct {
		name  string
		data  []byte
		cores int
		want  int
	}{
		{"under parallelMin", repeated[:parallelMin-1], 8, 1},
		{"one core", repeated, 1, 1},
		{"two cores", repeated, 2, 2},
		{"maxMachines cores, repeated", repeated, maxMachines, maxMachines},
		{"maxMachines cores, distinct", distinct, maxMachines, maxMachines},
		{"one core more, repeated", repeated, maxMachines + 1, maxMachines + 1},
		{"one core more, distinct", distinct, maxMachines + 1, maxMachines},
		{"many cores, repeated", repeated, 64, repeatedMachines},
	} {
		if got := machinesOn(c.data, c.cores); got != c.want {
			t.Errorf("%s: %d machines, want %d", c.name, got, c.want)
		}
	}
}
