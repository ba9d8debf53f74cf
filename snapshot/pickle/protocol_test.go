package pickle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	pt "memscope/internal/pickletest"
	"memscope/snapshot/schema"
)

// TestOlderProtocolsTakeTheFastPaths: protocols 2 and 3 memoize with BINPUT
// and LONG_BINPUT where 4 and 5 write MEMOIZE (Python before 3.8 wrote 3 by
// default, PyTorch's C++ pickler writes 2). The same snapshot in each
// protocol (4 without its FRAME opcodes) takes the frame dicts and frame
// lists at once exactly as often, and binds to the same typed snapshot.
func TestOlderProtocolsTakeTheFastPaths(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the pickles are written by Python's pickle module")
	}
	// Protocol 4 unframed: a FRAME opcode inside a list sends it the slow
	// way, and protocols 2 and 3 have none.
	script := strings.Replace(genTraces, `with open(out, 'wb') as f:
    pickle.dump(s, f, protocol=int(sys.argv[4]) if len(sys.argv) > 4 else 4)`, `import pickletools
data = pickle.dumps(s, protocol=int(sys.argv[4]))
if sys.argv[4] == '4':
    ops = list(pickletools.genops(data))
    data = b''.join(data[pos:ops[k + 1][2] if k + 1 < len(ops) else len(data)] for k, (op, arg, pos) in enumerate(ops) if op.name != 'FRAME')
open(out, 'wb').write(data)`, 1)
	if script == genTraces {
		t.Fatal("the generator no longer ends as this test expects")
	}
	dir := t.TempDir()
	gen := func(shape string, proto int) []byte {
		out := filepath.Join(dir, shape+strconv.Itoa(proto)+".pickle")
		if b, err := exec.Command("python3", "-c", script, shape, "3000", out, strconv.Itoa(proto)).CombinedOutput(); err != nil {
			t.Fatalf("generator: %v\n%s", err, b)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var lists, dicts int // protocol 4's, over every shape
	for _, shape := range []string{"distinct", "shared", "late", "sharedlists", "sharedentries", "multi", "selfref", "segs"} {
		want := gen(shape, 4)
		ref, root, err := decodeWith(context.Background(), want, nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("%s, protocol 4: %v", shape, err)
		}
		lists, dicts = lists+ref.fastLists, dicts+ref.fastDicts
		s4, err := newBinder(ref.g, len(want)).bindRoot(root)
		if err != nil {
			t.Fatalf("%s, protocol 4: %v", shape, err)
		}
		canonStacks(s4)
		for _, proto := range []int{2, 3} {
			data := gen(shape, proto)
			d, root, err := decodeWith(context.Background(), data, nil, nil, nil, nil)
			if err != nil {
				t.Fatalf("%s, protocol %d: %v", shape, proto, err)
			}
			if d.fastLists != ref.fastLists || d.fastDicts != ref.fastDicts {
				t.Errorf("%s, protocol %d: %d lists and %d dicts taken at once, protocol 4 %d and %d", shape, proto, d.fastLists, d.fastDicts, ref.fastLists, ref.fastDicts)
			}
			s, err := newBinder(d.g, len(data)).bindRoot(root)
			if err != nil {
				t.Fatalf("%s, protocol %d: %v", shape, proto, err)
			}
			canonStacks(s)
			if !reflect.DeepEqual(s.Traces, s4.Traces) || !reflect.DeepEqual(s.Segments, s4.Segments) {
				t.Errorf("%s, protocol %d: the typed snapshot differs from protocol 4's", shape, proto)
			}
		}
	}
	if lists == 0 || dicts == 0 {
		t.Errorf("protocol 4 took %d lists and %d dicts at once: the shapes prove nothing", lists, dicts)
	}
}

// TestPutsOfOtherIndices: a BINPUT or LONG_BINPUT that does not name the
// memo's next index (one less, one more, an index already used) is not
// MEMOIZE: a frame list or dict after it runs opcode by opcode, and every
// such pickle loads as CPython loads it.
func TestPutsOfOtherIndices(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the pickles are written by Python's pickle module")
	}
	// Memo: 0 'filename', 1 'line', 2 'name', 3 'f.py', 4 'g', 5 the frame.
	frame := func(w *pt.Writer, put []byte) {
		w.Op(pt.OpEmptyDict)
		w.Op(put...)
		w.Op(pt.OpMark, pt.OpBinGet, 0, pt.OpBinGet, 3, pt.OpBinGet, 1, pt.OpBinInt1, 7, pt.OpBinGet, 2, pt.OpBinGet, 4, pt.OpSetItems)
	}
	build := func(listPut, dictPut []byte) (data []byte, fastLists, fastDicts int) {
		w := &pt.Writer{}
		w.Op(pt.OpProto, 2, pt.OpEmptyList, pt.OpMark)
		for i, s := range []string{"filename", "line", "name", "f.py", "g"} {
			w.Put(s)
			w.Op(pt.OpBinPut, byte(i))
		}
		frame(w, []byte{pt.OpBinPut, 5})
		frame(w, dictPut)
		w.Op(pt.OpEmptyList)
		w.Op(listPut...)
		w.Op(pt.OpMark, pt.OpBinGet, 5, pt.OpBinGet, 5, pt.OpAppends)
		w.Op(pt.OpAppends, pt.OpStop)
		d, _, err := decodeWith(context.Background(), w.Bytes(), nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("puts %v, %v: %v", listPut, dictPut, err)
		}
		return w.Bytes(), d.fastLists, d.fastDicts
	}
	inputs := map[string][]byte{}
	for _, c := range []struct {
		name             string
		listPut, dictPut []byte
		lists, dicts     int
	}{
		{"next (BINPUT)", []byte{pt.OpBinPut, 7}, []byte{pt.OpBinPut, 6}, 1, 2},
		{"next (LONG_BINPUT)", []byte{pt.OpLongBinPut, 7, 0, 0, 0}, []byte{pt.OpLongBinPut, 6, 0, 0, 0}, 1, 2},
		{"one past the next", []byte{pt.OpBinPut, 9}, []byte{pt.OpBinPut, 7}, 0, 1},
		{"one before the next", []byte{pt.OpBinPut, 6}, []byte{pt.OpBinPut, 5}, 0, 1},
		{"none", nil, nil, 0, 1},
	} {
		data, lists, dicts := build(c.listPut, c.dictPut)
		if lists != c.lists || dicts != c.dicts {
			t.Errorf("%s: %d lists and %d dicts taken at once, want %d and %d", c.name, lists, dicts, c.lists, c.dicts)
		}
		inputs[c.name] = data
	}
	if agreed := compareWithPython(t, inputs); agreed != len(inputs) {
		t.Errorf("%d of %d pickles agree with CPython", agreed, len(inputs))
	}
}

// cppPickler is scripts/gen_cpp_snapshot.py, which writes a snapshot as
// PyTorch's C++ pickler lays it out (protocol 2: a list's items in one
// batch, a put only after a shared value), then the same object as
// pickle.dump writes it; tests run it with python3 -c, some changed.
func cppPickler(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "gen_cpp_snapshot.py"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCppPicklerLayout: a snapshot as PyTorch's C++ pickler writes it
// (protocol 2, puts after shared values, none before a MARK) binds to the
// same typed snapshot as the same object written by pickle.dump.
func TestCppPicklerLayout(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the pickles are written by Python's pickle module")
	}
	dir := t.TempDir()
	cpp, py := filepath.Join(dir, "cpp.pickle"), filepath.Join(dir, "py.pickle")
	if b, err := exec.Command("python3", "-c", cppPickler(t), "3000", cpp, py).CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, b)
	}
	var snaps [2]*schema.Snapshot
	for k, path := range []string{cpp, py} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		d, root, err := decodeWith(context.Background(), data, nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if snaps[k], err = newBinder(d.g, len(data)).bindRoot(root); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		canonStacks(snaps[k])
	}
	if len(snaps[0].Trace(0)) != 3000 || !reflect.DeepEqual(snaps[0].Traces, snaps[1].Traces) || !reflect.DeepEqual(snaps[0].Segments, snaps[1].Segments) {
		t.Errorf("the C++ layout binds to another snapshot (%d entries) than pickle.dump's", len(snaps[0].Trace(0)))
	}
}
