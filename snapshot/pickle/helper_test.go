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
	"strconv"
	"testing"
	"time"

	"memscope/snapshot/schema"
)

// genTraces is a snapshot writer in Python, so the tests read what
// pickle.dump writes (protocol 4 frames, batches of 1000 items), in shapes
// that reach each path of the helper and the join:
//
//	distinct     fresh frame dicts, strings shared through the memo
//	shared       a pool of frame dicts reused (memo reads of dicts)
//	late         new strings every few entries, reused after (memo reads
//	             the helper cannot resolve itself)
//	sharedlists  entries far apart share one frames list object
//	sharedtuples the same with tuples: a frames value that is no list
//	multi        three devices' lists, a segment list after them
//	selfref      entries hold a list that contains itself
const genTraces = `
import pickle, random, sys
shape, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rnd = random.Random(7)
files = ['/src/pkg/mod%d.py' % i for i in range(40)]
names = ['fn_%d' % i for i in range(60)]
pool = [{'filename': files[i % 40], 'line': i, 'name': names[i % 60]} for i in range(300)]
late = {}
def frames(i):
    depth = 3 + rnd.randrange(12)
    if shape == 'shared':
        return [pool[rnd.randrange(300)] for _ in range(depth)]
    if shape == 'late':
        g = i // 7
        if g not in late:
            late[g] = ('/late/f%d.py' % g, 'late_%d' % g)
        f, nm = late[g]
        return [{'filename': f, 'line': j, 'name': nm} for j in range(depth)]
    return [{'filename': files[rnd.randrange(40)], 'line': rnd.randrange(5000), 'name': names[rnd.randrange(60)]} for _ in range(depth)]
lists = {}
def entry(i):
    e = {'action': ['alloc', 'free_requested', 'free_completed'][i % 3], 'addr': 139637976727552 + 512 * i,
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
         'state': 'active_allocated', 'frames': frames(i)} for i in range(40)]}]
if shape == 'multi':
    traces = [[entry(i) for i in range(d, n, 3)] for d in range(3)]
    s = {'device_traces': traces, 'segments': segs}
else:
    s = {'segments': segs, 'device_traces': [[entry(i) for i in range(n)]], 'allocator_settings': {'x': 1}}
with open(out, 'wb') as f:
    pickle.dump(s, f, protocol=4)
`

func genPickle(t *testing.T, shape string, n int) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), shape+".pickle")
	cmd := exec.Command("python3", "-c", genTraces, shape, strconv.Itoa(n), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// splitAt places the helper at fractions of the input, whatever its size.
func splitAt(prefix, target float64) func(int) (int, int, bool) {
	return func(n int) (int, int, bool) { return int(float64(n) * prefix), int(float64(n) * target), true }
}

// decodeTwice decodes data on one machine, then with a helper placed by
// split.
func decodeTwice(data []byte, split func(int) (int, int, bool)) (one, two *decoder, root1, root2 val, err1, err2 error) {
	one, root1, err1 = decodeWith(context.Background(), data, nil, nil, nil, nil)
	two, root2, err2 = decodeWith(context.Background(), data, nil, split, nil, nil)
	return
}

// decodeBoth decodes data on one machine and with a helper placed by split,
// checks that both give the same value (or the same error), and reports
// whether the helper's work was joined.
func decodeBoth(t *testing.T, name string, data []byte, split func(int) (int, int, bool)) (joined bool) {
	t.Helper()
	one, two, root1, root2, err1, err2 := decodeTwice(data, split)
	switch {
	case (err1 == nil) != (err2 == nil):
		t.Fatalf("%s: one machine: %v; with a helper: %v", name, err1, err2)
	case err1 != nil:
		if err1.Error() != err2.Error() {
			t.Fatalf("%s: errors differ: %q and %q", name, err1, err2)
		}
	default:
		if c1, c2 := canonical(one.g, root1), canonical(two.g, root2); c1 != c2 {
			t.Fatalf("%s: values differ (%d and %d bytes of canonical form)", name, len(c1), len(c2))
		}
	}
	return two.joined != nil
}

// bindBoth is decodeBoth for snapshots, comparing the typed snapshots the
// binder makes (the canonical form of a real one is too slow to build).
func bindBoth(t *testing.T, name string, data []byte, split func(int) (int, int, bool)) (joined bool) {
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
	return two.joined != nil
}

// canonStacks renumbers a snapshot's trace stacks in order of first use:
// the ids are the interning order, which differs between one machine and
// two; the frames each entry refers to must not.
func canonStacks(s *schema.Snapshot) {
	ids := map[uint32]uint32{}
	var stacks []schema.Stack
	for _, tr := range s.Traces {
		for i := range tr {
			if k := tr[i].Stack; k != 0 {
				id, ok := ids[k]
				if !ok {
					stacks = append(stacks, s.Stacks[k-1])
					id = uint32(len(stacks))
					ids[k] = id
				}
				tr[i].Stack = id
			}
		}
	}
	s.Stacks = stacks
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
	for _, shape := range []string{"distinct", "shared", "late", "sharedlists", "sharedtuples", "multi", "selfref"} {
		data := genPickle(t, shape, 5000)
		for _, target := range []float64{0.3, 0.6} {
			name := shape + "@" + strconv.FormatFloat(target, 'f', -1, 64)
			if !decodeBoth(t, name, data, splitAt(1.0/32, target)) {
				t.Errorf("%s: the helper's work was not joined", name)
			}
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
	for _, split := range []func(int) (int, int, bool){nil, splitAt(1.0/32, 0.6)} {
		d, _, err := decodeWith(context.Background(), data, nil, split, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if split != nil && d.joined == nil {
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
	d := newDecoder(data)
	d.end = pos
	if _, err := d.run(); err != errPrefix {
		t.Fatalf("running to %d: %v", pos, err)
	}
	return d.memo.len()
}

// TestHelperThresholds: splitHalf leaves input under parallelMin to one
// machine; planSplit needs frames (protocol 4 or 5) and a batch past the
// target; a prefix with fewer than 256 memo entries is not enough.
func TestHelperThresholds(t *testing.T) {
	if _, _, ok := splitHalf(parallelMin - 1); ok {
		t.Error("splitHalf splits input under parallelMin")
	}
	if _, _, ok := splitHalf(parallelMin); !ok && splitAllowed() {
		t.Error("splitHalf does not split input of parallelMin bytes")
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
	// The prefix's memo entries, around 256.
	for _, c := range []struct {
		memo   int
		joined bool
	}{{255, false}, {256, true}} {
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
		p.prefix = prefix
		h := runHelper(context.Background(), data, p, nil, nil, false)
		if (h != nil) != c.joined {
			t.Errorf("prefix with %d memo entries: helper ran %v, want %v", c.memo, h != nil, c.joined)
		}
	}
}

func splitAllowed() bool { _, _, ok := splitHalf(1 << 40); return ok }

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
	d, _, err := decodeWith(ctx, data, nil, splitAt(1.0/32, 0.5), nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if d.help == nil || !d.help.joined {
		t.Error("the decode returned without waiting for its helper")
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
