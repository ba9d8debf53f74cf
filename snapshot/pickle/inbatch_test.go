package pickle

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// genCpp writes, with cppPickler (scripts/gen_cpp_snapshot.py), a
// snapshot of n trace entries over frames distinct frames and devices
// devices, after blocks blocks, as PyTorch's C++ pickler lays it out;
// script, when not empty, is the generator to run instead.
func genCpp(t testing.TB, script string, n, frames, devices, blocks int) []byte {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the pickles are written by a Python script")
	}
	if script == "" {
		script = cppPickler(t)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "cpp.pickle")
	return runPython(t, out, "-c", script, strconv.Itoa(n), out, filepath.Join(dir, "py.pickle"),
		strconv.Itoa(frames), strconv.Itoa(devices), strconv.Itoa(blocks))
}

// TestHelpersInBatch: PyTorch's C++ pickler writes a list's items in one
// batch (MARK, every item, APPENDS), and no put after a dict, so no batch
// boundary shows where a helper could start. Helpers start inside the
// batch instead, at a dict (regionStart). A region that ends inside the
// batch hands its items to the main machine's stack, above the main
// machine's own; one that holds the batch's APPENDS has the main machine
// append its items first. With one, two or three helpers, with a
// device's trace ending inside a region, and with few frames (fewer than
// 256 memo entries), every helper joins and the machines build what one
// builds.
func TestHelpersInBatch(t *testing.T) {
	for _, c := range []struct {
		frames, devices int
		targets         []float64
	}{
		{300, 1, []float64{0.5}},
		{300, 1, []float64{0.4, 0.7}},
		{300, 1, []float64{0.3, 0.5, 0.7}},
		// repeatedMachines: the stacks repeat (machinesFor).
		{300, 1, []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}},
		{300, 2, []float64{0.3, 0.7}}, // the first region ends at the first device's APPENDS
		// Few frames: the memo holds fewer than 256 entries at the
		// prefix's end, and the region reads the rest by BINGET.
		{20, 1, []float64{0.4, 0.7}},
	} {
		name := fmt.Sprintf("%d frames, %d devices, helpers at %v", c.frames, c.devices, c.targets)
		data := genCpp(t, "", 12000, c.frames, c.devices, 1)
		split := splitAt(1.0/32, c.targets...)
		prefix, targets := split(len(data))
		for _, target := range targets {
			if p, ok := planSplit(data, prefix, target); !ok || !p.inBatch {
				t.Fatalf("%s: planned %+v (%v) at %d, want a region inside the batch", name, p, ok, target)
			}
		}
		d := decodeCompare(t, name, data, split)
		if len(d.helpers) != len(c.targets) || len(d.joined) != len(c.targets) {
			t.Errorf("%s: %d helpers, %d joined; want %d", name, len(d.helpers), len(d.joined), len(c.targets))
		}
		bindBoth(t, name, data, split)
	}
}

// TestInBatchClosedByTuple: a batch that a TUPLE ends, not an APPENDS to
// the list below its MARK, is no list's items. The helper whose region
// holds the TUPLE stops at it (only an APPENDS may pop the batch's MARK
// in a helper), and the main machine runs that region; a region that
// ends before it still joins. Either way the value is one machine's.
func TestInBatchClosedByTuple(t *testing.T) {
	gen := cppPickler(t)
	script := strings.Replace(gen, `pstr('device_traces'); out.extend(b'](](')`, `pstr('device_traces'); out.extend(b'](((')`, 1)
	script = strings.Replace(script, `out.extend(b'eeu.')`, `out.extend(b'tteu.')`, 1)
	if script == gen {
		t.Fatal("the generator no longer has the lines this test changes")
	}
	data := genCpp(t, script, 12000, 300, 1, 1)
	d := decodeCompare(t, "a tuple's items", data, splitAt(1.0/32, 0.4, 0.7))
	if len(d.helpers) != 2 || len(d.joined) != 1 {
		t.Errorf("%d helpers, %d joined; want 2, the first joined", len(d.helpers), len(d.joined))
	}
}

// TestInBatchPlanOnAString: the bytes of a dict inside a batch may lie in
// a string (here an entry's action, two thirds in). The helper planned
// there runs, but the main machine passes over that place (no opcode
// starts there) and decodes the region itself; a little later, at a real
// dict, the helper joins.
func TestInBatchPlanOnAString(t *testing.T) {
	gen := cppPickler(t)
	script := strings.Replace(gen, `pstr('action'); pstr(['alloc', 'free_requested', 'free_completed'][i % 3])`,
		`pstr('action'); pstr(['alloc', 'free_requested', 'free_completed'][i % 3] if i != n * 2 // 3 else 'xu}(h\x05x')`, 1)
	if script == gen {
		t.Fatal("the generator no longer has the line this test changes")
	}
	data := genCpp(t, script, 12000, 300, 1, 1)
	startInAString(t, data, "xu}(h\x05x", true)
}

// TestInBatchStackLimit: the main machine takes a helper's items onto its
// stack only while the stack stays within its limit, with the items of a
// region that ends inside the batch, or with the batch's items for a
// region that holds its APPENDS (one machine holds them all before the
// APPENDS). Past it the main machine runs the region and fails at the
// limit, as one machine does.
func TestInBatchStackLimit(t *testing.T) {
	const n = 40000 // entries: 8 times the cancellation checks' spacing
	data := genCpp(t, "", n, 300, 1, 1)
	split := splitAt(1.0/32, 0.4, 0.7)
	for _, c := range []struct {
		name   string
		limit  int
		joined int
		fails  bool
	}{
		{"the whole batch within the limit", n + 2*stackSlack, 2, false},
		// The first region's items fit (0.7 of the batch); with the
		// second's, the main machine would hold the whole batch.
		{"the batch past the limit", n * 85 / 100, 1, true},
		// With the first region's, the main machine would hold 0.7 of it.
		{"the first regions' items past the limit", n * 55 / 100, 0, true},
	} {
		limit := func(d *decoder) { d.stackMax = c.limit }
		one, _, err1 := decodeWith(context.Background(), data, nil, nil, nil, nil, limit)
		two, _, err2 := decodeWith(context.Background(), data, nil, split, nil, nil, limit)
		for _, err := range []error{err1, err2} {
			if (err != nil) != c.fails || err != nil && !strings.Contains(err.Error(), "values on the pickle stack") {
				t.Errorf("%s: %v; want failing %v, at the stack's limit", c.name, err, c.fails)
			}
		}
		if two == nil || one == nil {
			continue
		}
		if len(two.joined) != c.joined {
			t.Errorf("%s: %d joined, want %d", c.name, len(two.joined), c.joined)
		}
	}
}

// TestWalkReadsTheFirstEntry: where a snapshot's blocks reach past a 32nd
// of unframed input, a helper's prefix is planned to end at the trace's
// first key; its walk reads on through that entry (walkPastKey), whose
// other keys are first written there, so that its region's entries are
// records, as one machine's are, not generic dicts. A region that starts
// within walkPastKey of the key ends the walk at the key: its entries are
// generic, the value one machine's.
func TestWalkReadsTheFirstEntry(t *testing.T) {
	data := genCpp(t, "", 20000, 300, 1, 6000)
	key := traceKeyAt(data, actionKeyLong, len(data), len(data), nil)
	if key <= len(data)/32 {
		t.Fatalf("the trace's first key at %d of %d: the blocks end within the usual prefix", key, len(data))
	}
	near, _, ok := regionStart(data, key+walkPastKey/2)
	if !ok || near >= key+walkPastKey {
		t.Fatalf("no dict within %d bytes past the key", walkPastKey)
	}
	for _, c := range []struct {
		name   string
		target int
		all    bool // the region's entries all records
	}{
		{"a region far past the key", len(data) * 6 / 10, true},
		{"a region within walkPastKey of it", near, false},
	} {
		split := func(int) (int, []int) { return key, []int{c.target} }
		d := decodeCompare(t, c.name, data, split)
		one, _, err := decodeWith(context.Background(), data, nil, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.joined) != 1 {
			t.Errorf("%s: %d joined, want 1", c.name, len(d.joined))
		}
		if all := d.g.traces.len() == one.g.traces.len(); all != c.all {
			t.Errorf("%s: %d trace records, one machine %d", c.name, d.g.traces.len(), one.g.traces.len())
		}
	}
}

// TestInBatchReadBeforeWritten: with fewer than 256 memo entries at a
// helper's prefix's end, a BINGET in its region may name an entry the main
// machine makes before the region, read as a placeholder; one that names
// an entry nobody has made is an error, which the join must not hide. A
// region past the middle reads entry 250 of a memo of about 50: one
// machine's error, with or without the helper.
func TestInBatchReadBeforeWritten(t *testing.T) {
	data := genCpp(t, "", 12000, 20, 1, 1)
	at := len(data) * 8 / 10
	i := bytes.Index(data[at:], []byte("](h"))
	if i < 0 {
		t.Fatal("no frame list past 0.8")
	}
	data[at+i+3] = 250
	_, _, err := decodeWith(context.Background(), data, nil, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "memo key 250 is read before it is written") {
		t.Fatalf("one machine: %v", err)
	}
	decodeCompare(t, "a read of entry 250", data, splitAt(1.0/32, 0.6))
}
