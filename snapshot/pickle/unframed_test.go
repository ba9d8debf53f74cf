package pickle

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHelpersOnUnframedProtocols: protocols 2 and 3 have no frames, and
// number every memo entry (LONG_BINPUT) where 4 writes MEMOIZE. Helpers
// still run there: the region starts where the bytes show a batch of
// dicts, the prefix ends where the helper's walk of the opcodes reaches,
// and the region's puts give their indices from the main machine's memo
// size. For every shape, the machines build exactly what one builds, and
// every helper joins.
func TestHelpersOnUnframedProtocols(t *testing.T) {
	needPython(t)
	shapes := map[int][]string{
		2: {"distinct", "shared", "late", "sharedlists", "sharedtuples", "sharedentries", "multi", "selfref", "segs"},
		3: {"late", "segs"}, // 2 with bytes opcodes, which snapshots do not hold
	}
	if testing.Short() {
		shapes = map[int][]string{2: {"late", "sharedentries"}}
	}
	for proto, shapes := range shapes {
		for _, shape := range shapes {
			data := genPickleProto(t, shape, 12000, proto)
			if framed(data) {
				t.Fatalf("%s, protocol %d: framed", shape, proto)
			}
			name := shape + "/protocol " + strconv.Itoa(proto)
			d := decodeCompare(t, name, data, splitAt(1.0/32, 0.4, 0.7))
			if len(d.helpers) != 2 || len(d.joined) != 2 {
				t.Errorf("%s: %d helpers, %d joined; want 2", name, len(d.helpers), len(d.joined))
			}
			for _, j := range d.joined {
				if j.h.regionBase != int64(j.memoAt) {
					t.Errorf("%s: a helper's region numbered from %d, joined at %d", name, j.h.regionBase, j.memoAt)
				}
			}
		}
	}
}

// TestUnframedPlanOnAString: in input without frames a region's start is
// found in the bytes, which may lie inside a string. The helper planned
// there runs, but the main machine passes over that place (no opcode
// starts there) and decodes the region itself: one machine's value.
func TestUnframedPlanOnAString(t *testing.T) {
	needPython(t)
	// The user_metadata of the entry in the middle of each batch holds the
	// bytes of a batch start (APPENDS MARK EMPTY_DICT LONG_BINPUT).
	script := strings.Replace(genTraces, `        e['user_metadata'] = 'um'`, `        e['user_metadata'] = 'um'
    if i % 1000 == 500:
        e['user_metadata'] = 'xe(}rx%d' % i`, 1)
	if script == genTraces {
		t.Fatal("the generator no longer has the line this test changes")
	}
	out := filepath.Join(t.TempDir(), "s.pickle")
	if b, err := exec.Command("python3", "-c", script, "distinct", "12000", out, "2").CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	startInAString(t, data, "xe(}rx", false)
}

// startInAString: data holds fake, the bytes of a region's start two bytes
// into a string, past its middle. A helper planned there (inside a batch
// or not, as inBatch says) runs, but the main machine passes over that
// place (no opcode starts there) and decodes the region itself; a little
// later, at a real start, the helper joins. Either way the value is one
// machine's.
func startInAString(t *testing.T, data []byte, fake string, inBatch bool) {
	t.Helper()
	at := bytes.Index(data[len(data)/2:], []byte(fake))
	if at < 0 {
		t.Fatalf("no string holding %q past the middle", fake)
	}
	at += len(data) / 2
	split := splitAt(1.0/32, float64(at)/float64(len(data)))
	prefix, targets := split(len(data))
	if p, ok := planSplit(data, prefix, targets[0]); !ok || p.at != at+2 || p.inBatch != inBatch {
		t.Fatalf("planned %+v (%v), want the region inside the string, at %d (in a batch: %v)", p, ok, at+2, inBatch)
	}
	d := decodeCompare(t, "a start inside a string", data, split)
	if len(d.helpers) != 1 || len(d.joined) != 0 {
		t.Errorf("%d helpers, %d joined; want 1 that does not join", len(d.helpers), len(d.joined))
	}
	d = decodeCompare(t, "past the string", data, splitAt(1.0/32, float64(at+8)/float64(len(data))))
	if len(d.joined) != 1 {
		t.Errorf("past the string: %d joined, want 1", len(d.joined))
	}
}

// shiftPuts renumbers, in a protocol 2 pickle, every memo index made from
// the first batch start past the middle on by shift (all written as
// LONG_BINPUT and LONG_BINGET), and prints that start: a pickle CPython
// loads (to the same value for shift >= 0) whose puts from there on name
// shift past the memo's size.
const shiftPuts = `
import pickletools, sys
src, out, shift = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, 'rb').read()
ops = list(pickletools.genops(data))
cut, m = None, 0
for k, (op, arg, pos) in enumerate(ops):
    if cut is None and pos > len(data) // 2 and op.name == 'MARK' and ops[k-1][0].name == 'APPENDS' and ops[k+1][0].name == 'EMPTY_DICT':
        cut = pos
    if cut is None and op.name in ('BINPUT', 'LONG_BINPUT'):
        m = max(m, arg + 1)
# 'to:N' shifts the first region entry to index N.
shift = int(shift[3:]) - m if shift.startswith('to:') else int(shift)
res = bytearray()
for k, (op, arg, pos) in enumerate(ops):
    end = ops[k+1][2] if k + 1 < len(ops) else len(data)
    if cut is not None and pos >= cut and op.name in ('BINPUT', 'LONG_BINPUT', 'BINGET', 'LONG_BINGET') and arg >= m:
        code = b'r' if 'PUT' in op.name else b'j'
        res += code + (arg + shift).to_bytes(4, 'little')
    else:
        res += data[pos:end]
import pickle
if shift >= 0:
    assert pickle.loads(bytes(res)) == pickle.loads(data)
# Below, puts replace entries read before: CPython may refuse what it
# then reads (a list as a key), as memscope must then too.
open(out, 'wb').write(bytes(res))
print(cut)
`

// TestRegionPutsFromAnotherBase: a helper learns from its region's first
// put which index the input gives its first entry; the join takes its
// work only where that is the main machine's memo size. Indices shifted
// from a batch start on (a valid pickle, though not as pickle.dump numbers
// it) by one either way or more leave the region to the main machine;
// unshifted, the helper joins. Shifted below the helper's prefix, the
// puts replace entries it read: it stops at the first. Either way, one
// machine's value.
func TestRegionPutsFromAnotherBase(t *testing.T) {
	needPython(t)
	src := filepath.Join(t.TempDir(), "src.pickle")
	if err := os.WriteFile(src, genPickleProto(t, "shared", 12000, 2), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		shift  string
		joined bool
	}{{"0", true}, {"1", false}, {"5", false}, {"-1", false}, {"to:300", false}} {
		out := filepath.Join(t.TempDir(), "shifted.pickle")
		b, err := exec.Command("python3", "-c", shiftPuts, src, out, c.shift).CombinedOutput()
		if err != nil {
			t.Fatalf("shift %s: %v\n%s", c.shift, err, b)
		}
		cut, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("shift %s: %q", c.shift, b)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		name := "shift " + c.shift
		split := func(n int) (int, []int) { return n / 32, []int{cut - 1} }
		if p, ok := planSplit(data, len(data)/32, cut-1); !ok || p.at != cut {
			t.Fatalf("%s: planned %+v (%v), want the region at %d", name, p, ok, cut)
		}
		// Typed snapshots compared (or the binder's errors): the value's
		// canonical form, where replaced entries make lists of lists of
		// lists, takes a gigabyte.
		if joined := bindBoth(t, name, data, split); joined != c.joined {
			t.Errorf("%s: joined %v, want %v", name, joined, c.joined)
		}
	}
}

// TestRegionStart finds a batch of dicts only with the dict's put after
// it, a dict inside a batch only after another's SETITEMS and with a
// memo get after its MARK, whichever comes first, and none that would end
// past the input.
func TestRegionStart(t *testing.T) {
	for _, c := range []struct {
		data    string
		from    int
		at      int // -1: none
		inBatch bool
	}{
		{"xxe(}\x94", 0, 3, false},
		{"xxe(}q\x00", 0, 3, false},
		{"xxe(}r\x00\x00\x00\x00", 0, 3, false},
		{"xxe(}q\x00", 3, -1, false},     // from past its APPENDS
		{"xxe(}Ke(}q\x00", 0, 7, false},  // the first without a put is passed
		{"xxe(}", 0, -1, false},          // no opcode after the dict
		{"xxe(}r\x00\x00", 0, -1, false}, // a put cut short
		{"xxe(]q\x00", 0, -1, false},     // a list
		{"xxu}(h\x05", 0, 3, true},
		{"xxu}(j\x05\x00\x00\x00", 0, 3, true},
		{"xxu}(h\x05", 3, -1, false},      // from past its SETITEMS
		{"xxu}(K\x05", 0, -1, false},      // no memo get: no key read again
		{"xxu}q\x00(h\x05", 0, -1, false}, // a put: pickle.dump's dict, not a batch's start
		{"xxu}(", 0, -1, false},           // nothing after the MARK
		{"e(}q\x00u}(h\x05", 0, 1, false}, // the batch first
		{"u}(h\x05e(}q\x00", 0, 1, true},  // the dict first
	} {
		at, inBatch, ok := regionStart([]byte(c.data), c.from)
		if !ok {
			at = -1
		}
		if at != c.at || inBatch != c.inBatch {
			t.Errorf("%q from %d: at %d (in a batch: %v), want %d (%v)", c.data, c.from, at, inBatch, c.at, c.inBatch)
		}
	}
}

// TestBoundaryAfter walks to the first opcode boundary at or past min, on
// past the puts that follow it, and fails at an opcode it cannot size and
// at the input's end.
func TestBoundaryAfter(t *testing.T) {
	// 0 PROTO 2, 2 EMPTY_DICT, 3 BINPUT 0, 5 MARK, 6 BINUNICODE 'ab', 13
	// LONG_BINPUT 1, 18 MEMOIZE, 19 BININT1 7, 21 SETITEMS, 22 STOP.
	data := []byte("\x80\x02}q\x00(X\x02\x00\x00\x00abr\x01\x00\x00\x00\x94K\x07u.")
	for _, c := range []struct {
		from, min, want int
	}{
		{2, 2, 2}, {2, 3, 5}, {2, 5, 5}, {2, 6, 6}, {2, 7, 19}, {2, 13, 19}, {2, 19, 19}, {2, 20, 21}, {2, 22, 22}, {2, 23, -1}, {5, 6, 6},
	} {
		got, ok := boundaryAfter(data, c.from, c.min)
		if !ok {
			got = -1
		}
		if got != c.want {
			t.Errorf("from %d to %d: %d, want %d", c.from, c.min, got, c.want)
		}
	}
	if _, ok := boundaryAfter([]byte("\x80\x02}p0\n."), 2, 4); ok {
		t.Error("walked past PUT (a text index)")
	}
}

// TestPlanUnframedSearchesNear: a region starts at a batch of dicts whose
// opcodes through the dict's put lie within batchSearchMax past the
// target, and none further.
func TestPlanUnframedSearchesNear(t *testing.T) {
	batch := []byte{opAppends, opMark, opEmptyDict, opBinPut, 0}
	for _, c := range []struct {
		gap int // bytes between the target and the batch's APPENDS
		ok  bool
	}{{0, true}, {batchSearchMax - len(batch), true}, {batchSearchMax - len(batch) + 1, false}} {
		target := 4096
		data := make([]byte, target+c.gap+len(batch)+1)
		copy(data, []byte{opProto, 2})
		copy(data[target+c.gap:], batch)
		p, ok := planSplit(data, 100, target)
		if ok != c.ok || ok && p.at != target+c.gap+1 {
			t.Errorf("a batch %d bytes past the target: planned %+v (%v), want %v", c.gap, p, ok, c.ok)
		}
	}
}

// FuzzHelpers: wherever helpers are placed, in any input, the machines
// build what one machine builds, or fail with its error. The seeds are
// snapshots of the generator's shapes in protocols 2 and 4 (a trace of a
// few batches; at a prefix of an eighth the helper walks most of it, and
// reads the actions first written after it as placeholders), three devices' traces (where a helper's list ends and a
// follower starts: followMin is 1 here) and the C++ pickler's layout (one
// batch), so that mutations reach the planning, the helpers' walk, their
// region puts, the followers and the join.
func FuzzHelpers(f *testing.F) {
	if _, err := exec.LookPath("python3"); err != nil {
		f.Skip("python3 not found: the seeds are written by pickle.dump")
	}
	dir := f.TempDir()
	for _, c := range []struct {
		shape string
		proto int
	}{{"late", 2}, {"shared", 2}, {"sharedentries", 4}, {"segs", 2}, {"lateactions", 4}, {"oddactions", 2}} {
		out := filepath.Join(dir, c.shape+".pickle")
		if b, err := exec.Command("python3", "-c", genTraces, c.shape, "2500", out, strconv.Itoa(c.proto)).CombinedOutput(); err != nil {
			f.Fatalf("generator: %v\n%s", err, b)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint16(2048), uint16(32768))
		f.Add(data, uint16(8192), uint16(50000))
	}
	// Three devices' traces of two batches each, a helper in the first.
	for _, proto := range []int{4, 2} {
		f.Add(genPickleProto(f, "multishared", 6000, proto), uint16(2048), uint16(13107))
	}
	// PyTorch's C++ pickler's layout, where helpers start inside a batch;
	// with 20 frames, the memo holds fewer than 256 entries.
	for _, frames := range []int{300, 20} {
		cpp := genCpp(f, "", 2500, frames, 1, 1)
		f.Add(cpp, uint16(8192), uint16(32768))
		f.Add(cpp, uint16(8192), uint16(50000))
	}
	f.Add(genCpp(f, "", 2500, 300, 3, 1), uint16(2048), uint16(16384))
	f.Fuzz(func(t *testing.T, data []byte, prefix, target uint16) {
		if len(data) < 11 || data[0] != opProto {
			return
		}
		at := func(frac uint16) int { return int(uint64(len(data)) * uint64(frac) >> 16) }
		split := func(int) (int, []int) { return at(prefix), []int{at(target)} }
		one, root1, err1 := decodeWith(context.Background(), data, nil, nil, nil, nil)
		two, root2, err2 := decodeWith(context.Background(), data, nil, split, nil, nil,
			func(d *decoder) { d.followMin = 1 })
		// The canonical forms only where a helper joined: the rest is one
		// machine's decode twice.
		if sameErrors(t, "input", "one machine", err1, "with helpers", err2) && len(two.joined) > 0 {
			if c1, c2 := canonical(one.g, root1), canonical(two.g, root2); c1 != c2 {
				t.Fatalf("values differ (%d and %d bytes of canonical form)", len(c1), len(c2))
			}
			if a, b, ok := stackTwice(&two.g.stacks); ok {
				t.Fatalf("stacks %d and %d are the same", a, b)
			}
		}
	})
}
