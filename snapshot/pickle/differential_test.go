package pickle

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"memscope/internal/pickletest"
)

// canonical writes v in the canonical form of scripts/pickle_canon.py, so
// what the decoder built can be compared with what CPython's pickle loads.
// Containers the decoder recognised (frames, stacks, trace entries) are
// written back as the dicts and lists they came from.
func canonical(g *graph, v val) string {
	var b strings.Builder
	canonInto(g, v, &b, map[uint32]bool{})
	return b.String()
}

func canonInto(g *graph, v val, b *strings.Builder, open map[uint32]bool) {
	switch v.k {
	case kNone:
		b.WriteString("N")
	case kBool:
		if v.i != 0 {
			b.WriteString("T")
		} else {
			b.WriteString("F")
		}
	case kInt:
		b.WriteString("i" + strconv.FormatInt(v.i, 10))
	case kUint:
		b.WriteString("i" + strconv.FormatUint(uint64(v.i), 10))
	case kHuge:
		b.WriteString("I")
	case kFloat:
		fmt.Fprintf(b, "f%016x", uint64(v.i))
	case kStr:
		b.WriteString("s" + hex.EncodeToString([]byte(g.strs[v.ref])))
	case kBytes:
		b.WriteString("b" + hex.EncodeToString([]byte(g.strs[v.ref])))
	case kFrame:
		b.WriteString(frameCanon(g, g.frames.at(v.ref)))
	case kStack:
		parts := []string{}
		for _, id := range g.stacks.get(v.ref) {
			parts = append(parts, frameCanon(g, g.frames.at(id)))
		}
		b.WriteString("[" + strings.Join(parts, ",") + "]")
	case kTrace:
		if d := g.traceDictOf(v); d.k != kTrace {
			canonInto(g, d, b, open) // given a container: the dict
			return
		}
		b.WriteString(traceCanon(g, g.traces.at(v.ref), func(x val) string {
			var s strings.Builder
			canonInto(g, x, &s, open)
			return s.String()
		}))
	case kBlock:
		if d := g.blockDictOf(v); d.k != kBlock {
			canonInto(g, d, b, open) // given a container: the dict
			return
		}
		b.WriteString(dictCanon(g.blockPairs(g.blocks.at(v.ref)), func(x val) string {
			var s strings.Builder
			canonInto(g, x, &s, open)
			return s.String()
		}))
	case kList, kTuple, kDict, kSet:
		if open[v.ref] {
			b.WriteString("@")
			return
		}
		open[v.ref] = true
		defer delete(open, v.ref)
		sub := func(x val) string {
			var s strings.Builder
			canonInto(g, x, &s, open)
			return s.String()
		}
		c := g.cont(v.ref)
		switch c.kind {
		case cFrame:
			b.WriteString(frameCanon(g, g.frames.at(c.start)))
			return
		case cStack:
			parts := make([]string, 0, c.n)
			for _, id := range g.stacks.get(c.start) {
				parts = append(parts, frameCanon(g, g.frames.at(id)))
			}
			b.WriteString("[" + strings.Join(parts, ",") + "]")
			return
		case cTrace:
			b.WriteString(traceCanon(g, g.traces.at(c.start), sub))
			return
		}
		items := g.seq(v)
		switch v.k {
		case kList, kTuple:
			parts := make([]string, len(items))
			for i, x := range items {
				parts[i] = sub(x)
			}
			o, cl := "[", "]"
			if v.k == kTuple {
				o, cl = "(", ")"
			}
			b.WriteString(o + strings.Join(parts, ",") + cl)
		case kDict:
			b.WriteString(dictCanon(items, sub))
		case kSet:
			m := map[string]bool{}
			for _, x := range items {
				m[sub(x)] = true
			}
			parts := make([]string, 0, len(m))
			for k := range m {
				parts = append(parts, k)
			}
			slices.Sort(parts)
			b.WriteString("<" + strings.Join(parts, ",") + ">")
		}
	default:
		b.WriteString("?")
	}
}

// dictCanon is a dict's key, value pairs in canonical form: sorted, later
// keys winning, as in a Python dict.
func dictCanon(items []val, sub func(val) string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(items); i += 2 {
		m[sub(items[i])] = sub(items[i+1])
	}
	parts := make([]string, 0, len(m))
	for k, x := range m {
		parts = append(parts, k+":"+x)
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

func strCanon(g *graph, id uint32) string { return "s" + hex.EncodeToString([]byte(g.strs[id])) }

func frameCanon(g *graph, f rawFrame) string {
	parts := []string{strCanon(g, g.keyID("filename")) + ":" + strCanon(g, f.file),
		strCanon(g, g.keyID("line")) + ":i" + strconv.FormatInt(f.line, 10),
		strCanon(g, g.keyID("name")) + ":" + strCanon(g, f.name)}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

func traceCanon(g *graph, r *rawTrace, sub func(val) string) string {
	x := g.extraOf(r)
	key := func(k string) string { return strCanon(g, g.keyID(k)) + ":" }
	parts := []string{key("action") + strCanon(g, r.action)}
	for _, f := range []struct {
		name string
		bit  uint8
		v    string
	}{{"addr", hasAddr, strconv.FormatUint(r.addr, 10)}, {"size", hasSize, strconv.FormatInt(r.size, 10)},
		{"stream", hasStream, strconv.FormatUint(x.stream, 10)}, {"time_us", hasTime, strconv.FormatInt(r.time, 10)},
		{"device_free", hasDevFree, strconv.FormatInt(x.devFree, 10)}} {
		if r.has()&f.bit != 0 {
			parts = append(parts, key(f.name)+"i"+f.v)
		}
	}
	if x.cc != noRef {
		parts = append(parts, key("compile_context")+strCanon(g, x.cc))
	}
	if x.um != noRef {
		parts = append(parts, key("user_metadata")+strCanon(g, x.um))
	}
	if r.fram != noRef {
		parts = append(parts, key("frames")+sub(r.frames()))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// keyID finds a key string's id (it was read, or the container would not
// have been recognised).
func (g *graph) keyID(s string) uint32 {
	if i := slices.Index(g.strs, s); i >= 0 {
		return uint32(i)
	}
	g.strs = append(g.strs, s)
	return uint32(len(g.strs) - 1)
}

// corpusInputs reads the FuzzDecode seed corpus (go test fuzz v1 files
// holding one []byte) and keeps the pickles.
func corpusInputs(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	files, _ := filepath.Glob("../testdata/fuzz/FuzzDecode/*")
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(raw), "\n", 3)
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "[]byte(") {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(lines[1]), "[]byte("), ")"))
		if err != nil || len(s) < 2 || s[0] != opProto {
			continue
		}
		out["corpus/"+filepath.Base(p)] = []byte(s)
	}
	return out
}

// pythonCanon runs scripts/pickle_canon.py over files and returns its line
// for each.
func pythonCanon(t *testing.T, paths []string) []string {
	t.Helper()
	cmd := exec.Command("python3", append([]string{"../../scripts/pickle_canon.py"}, paths...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pickle_canon.py: %v", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != len(paths) {
		t.Fatalf("pickle_canon.py printed %d lines for %d files", len(lines), len(paths))
	}
	return lines
}

// compareWithPython decodes each input and checks it against CPython:
// whatever pickle.load (refusing every global) loads, the decoder must
// load to the same value. The decoder may refuse more (its memo and size
// budgets), but only with an error that names the budget.
func compareWithPython(t *testing.T, inputs map[string][]byte) (agreed int) {
	t.Helper()
	dir := t.TempDir()
	var names, paths []string
	for name, data := range inputs {
		p := filepath.Join(dir, strconv.Itoa(len(paths))+".pickle")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		names, paths = append(names, name), append(paths, p)
	}
	py := pythonCanon(t, paths)
	for i, name := range names {
		g, root, err := decodePickle(inputs[name])
		pyOK := strings.HasPrefix(py[i], "OK ")
		switch {
		case !pyOK:
			continue
		case err != nil:
			// Refusals memscope makes on purpose: its budgets and limits,
			// and a PROTO opcode naming protocol 0 or 1, which no snapshot
			// writer emits (CPython accepts any up to its highest).
			if msg := err.Error(); !strings.Contains(msg, "budget") && !strings.Contains(msg, "limit") &&
				!strings.Contains(msg, "unsupported pickle protocol") {
				t.Errorf("%s: CPython loads it, memscope refuses: %v", name, err)
			}
			continue
		}
		sum := sha256.Sum256([]byte(canonical(g, root)))
		if got := "OK " + hex.EncodeToString(sum[:]); got != py[i] {
			c := canonical(g, root)
			t.Errorf("%s: values differ from CPython's (memscope: %.300s)", name, c)
			continue
		}
		agreed++
	}
	return agreed
}

// TestPickleAgreesWithCPython runs the fuzz corpus and the sample
// snapshots through both readers.
func TestPickleAgreesWithCPython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	inputs := corpusInputs(t)
	samples, _ := filepath.Glob("../../testdata/snapshots/*.pickle")
	more, _ := filepath.Glob("../../testdata/snapshots/synthetic/*.pickle")
	for _, p := range append(samples, more...) {
		limit := int64(8 << 20)
		if testing.Short() {
			limit = 1 << 20 // the race run: the small ones only
		}
		if st, err := os.Stat(p); err == nil && st.Size() < limit {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			inputs[filepath.Base(p)] = b
		}
	}
	agreed := compareWithPython(t, inputs)
	if agreed < 5 {
		t.Errorf("only %d inputs loaded by both: the comparison proves little", agreed)
	}
	t.Logf("%d of %d inputs agree with CPython", agreed, len(inputs))
}

// FuzzDifferential: anything CPython's pickle loads (refusing globals),
// memscope's reader loads to the same value. Runs python3 per input, so it
// is slow; seeds come from FuzzDecode's corpus.
//
//	go test ./snapshot -run '^$' -fuzz FuzzDifferential
func FuzzDifferential(f *testing.F) {
	if _, err := exec.LookPath("python3"); err != nil {
		f.Skip("python3 not found")
	}
	for _, b := range corpusInputs(f) {
		f.Add(b)
	}
	f.Add(pickletest.Of(pickletest.Dict{{"segments", []any{}}, {"x", pickletest.Tuple{1.5, math.MaxInt64, "é"}}}))
	// Block records (pendingBlock): one changed after (SETITEM on its
	// memo entry), one read twice, one of a single key.
	w := &pickletest.Writer{}
	w.Put(pickletest.Ref(0))
	w.Put("state")
	w.Put("inactive")
	w.Op(pickletest.OpSetItem)
	f.Add(pickletest.Of(pickletest.Dict{{"segments", []any{pickletest.SegmentDict(4096, 1024,
		pickletest.Memoize(pickletest.BlockDict(4096, 512, 512, "active_allocated", []any{})), pickletest.Ref(0),
		pickletest.Dict{{"address", 4608}})}}, {"x", w.Bytes()}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != opProto {
			return
		}
		compareWithPython(t, map[string][]byte{"input": data})
	})
}

// TestMemoReadsAroundSmallMemo: LONG_BINGET reads the first smallMemo
// memo entries from decoder.small, the rest from the memo. Pickles whose
// shared values (strings, lists, dicts, a trace entry's frames, a dict
// that holds itself while still being filled) fall on both sides of
// smallMemo load as CPython loads them: written with MEMOIZE (protocol
// 4), with LONG_BINPUT (protocol 2), and with MEMOIZE then an entry near
// the boundary put again by LONG_BINPUT and read back.
func TestMemoReadsAroundSmallMemo(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	dir := t.TempDir()
	script := `
import pickle, pickletools, sys
d, small = sys.argv[1], int(sys.argv[2])

def unframed(data):
    # FRAME opcodes are optional: without them bytes can be appended.
    out, ops = bytearray(), list(pickletools.genops(data))
    for k, (op, arg, pos) in enumerate(ops):
        if op.name != 'FRAME':
            out += data[pos:ops[k + 1][2] if k + 1 < len(ops) else len(data)]
    return bytes(out)

for fill in range(small - 24, small + 3, 3):
    strs = ['s%d' % i for i in range(fill)]
    frame = {'filename': 'f.py', 'line': 7, 'name': 'g'}
    shared = [frame, frame]
    selfish = {}
    selfish['me'] = selfish
    entry = {'action': 'alloc', 'addr': 4096, 'size': 512, 'stream': 0, 'frames': shared}
    obj = [strs, 'x', shared, selfish, entry, 'x', shared, selfish, dict(entry), strs[-3:], selfish, shared]
    p4 = unframed(pickle.dumps(obj, protocol=4))
    open('%s/memoize_%d.pickle' % (d, fill), 'wb').write(p4)
    open('%s/puts_%d.pickle' % (d, fill), 'wb').write(pickle.dumps(obj, protocol=2))
    k = (small - 1).to_bytes(4, 'little')
    mixed = p4[:-1] + b'\x8c\x03new' + b'r' + k + b'0' + b'j' + k + b'\x86' + b'.'
    assert pickle.loads(mixed)[1] == 'new'
    open('%s/mixed_%d.pickle' % (d, fill), 'wb').write(mixed)
`
	if out, err := exec.Command("python3", "-c", script, dir, strconv.Itoa(smallMemo)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pickle"))
	if len(files) != 27 {
		t.Fatalf("%d pickles written, want 27", len(files))
	}
	inputs := map[string][]byte{}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inputs[filepath.Base(p)] = b
	}
	if agreed := compareWithPython(t, inputs); agreed != len(inputs) {
		t.Errorf("%d of %d pickles agree with CPython", agreed, len(inputs))
	}
}
