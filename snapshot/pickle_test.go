package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func frameD(file string, line int, name string) pdict {
	return pdict{{"filename", file}, {"line", line}, {"name", name}}
}

func block(addr, size, req int, state string, frames []any) pdict {
	return pdict{{"address", addr}, {"size", size}, {"requested_size", req}, {"state", state}, {"frames", frames}}
}

func segment(addr, total int, blocks ...any) pdict {
	return pdict{{"device", 0}, {"address", addr}, {"total_size", total}, {"allocated_size", 0},
		{"active_size", 0}, {"requested_size", 0}, {"stream", 0}, {"segment_type", "large"},
		{"segment_pool_id", ptuple{0, 0}}, {"is_expandable", false}, {"frames", []any{}}, {"blocks", blocks}}
}

func decodeBytes(t *testing.T, b []byte) (*Snapshot, error) {
	t.Helper()
	return Decode(context.Background(), b)
}

func TestDecodeBuiltSnapshot(t *testing.T) {
	fr := []any{frameD("/m/model.py", 12, "forward"), frameD("/m/train.py", 3, "main")}
	data := pickleOf(pdict{
		{"segments", []any{segment(4096, 3072,
			block(4096, 1024, 1000, "active_allocated", fr),
			block(5120, 1024, 0, "inactive", []any{}),
			block(6144, 1024, 1024, "active_pending_free", fr))}},
		{"device_traces", []any{[]any{pdict{{"action", "alloc"}, {"addr", 4096}, {"size", 1024}, {"stream", 0}, {"time_us", 5}}}}},
		{"allocator_settings", pdict{{"max_split_size", -1}, {"expandable_segments", true}}},
		{"external_annotations", []any{pdict{{"name", "ProfilerStep#3"}, {"stage", "START"}, {"device", 0}, {"time_us", 4}}}},
	})
	s, err := decodeBytes(t, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Segments) != 1 || len(s.Segments[0].Blocks) != 3 {
		t.Fatalf("segments/blocks: %+v", s.Segments)
	}
	b := s.Segments[0].Blocks
	if b[0].State != StateActiveAllocated || b[1].State != StateInactive || b[2].State != StateActivePendingFree {
		t.Errorf("states: %v %v %v", b[0].State, b[1].State, b[2].State)
	}
	if b[0].RequestedSize != 1000 || b[0].Frames[0] != (Frame{Filename: "/m/model.py", Name: "forward", Line: 12}) {
		t.Errorf("block 0: %+v", b[0])
	}
	if &b[0].Frames[0] != &b[2].Frames[0] {
		t.Error("equal stacks should share one backing array")
	}
	if s.Settings.MaxSplitSize != -1 || !s.Settings.ExpandableSegments {
		t.Errorf("settings: %+v", s.Settings)
	}
	if len(s.Annotations) != 1 || s.Annotations[0].Name != "ProfilerStep#3" || s.Annotations[0].TimeUS != 4 {
		t.Errorf("annotations: %+v", s.Annotations)
	}
	if tr := s.Trace(0); len(tr) != 1 || tr[0].Action != ActionAlloc || tr[0].Addr != 4096 {
		t.Errorf("trace: %+v", tr)
	}
}

func TestDecodeSharedMemoValues(t *testing.T) {
	// A frame list written once and referenced from two blocks must bind to
	// one stack, as PyTorch's files rely on.
	fr := pmemo{[]any{frameD("/a.py", 1, "f")}}
	data := pickleOf(pdict{{"segments", []any{segment(0, 2048,
		block(0, 1024, 1024, "active_allocated", []any{}),
		block(1024, 1024, 1024, "active_allocated", []any{}))}}})
	// Rebuild with sharing: first block's frames memoized, second refers.
	p := &pickler{}
	p.op(opProto, 4)
	p.put(pdict{{"segments", []any{segment(0, 2048,
		pdict{{"address", 0}, {"size", 1024}, {"requested_size", 1024}, {"state", "active_allocated"}, {"frames", fr}},
		pdict{{"address", 1024}, {"size", 1024}, {"requested_size", 1024}, {"state", "active_allocated"}, {"frames", pref(0)}},
	)}}})
	p.op(opStop)
	_ = data
	s, err := decodeBytes(t, p.buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	b := s.Segments[0].Blocks
	if len(b[1].Frames) != 1 || &b[0].Frames[0] != &b[1].Frames[0] {
		t.Fatalf("shared frames not shared: %+v / %+v", b[0].Frames, b[1].Frames)
	}
}

func TestDecodeIntegers(t *testing.T) {
	cases := []struct {
		name string
		ops  []byte
		want val
	}{
		{"BININT negative", []byte{opBinInt, 0xff, 0xff, 0xff, 0xff}, val{k: kInt, i: -1}},
		{"BININT2", []byte{opBinInt2, 0x34, 0x12}, val{k: kInt, i: 0x1234}},
		{"LONG1 empty", []byte{opLong1, 0}, val{k: kInt}},
		{"LONG1 negative", []byte{opLong1, 1, 0xff}, val{k: kInt, i: -1}},
		{"LONG1 5 bytes", []byte{opLong1, 5, 0, 0, 0, 0, 1}, val{k: kInt, i: 1 << 32}},
		// 2^64-1 needs 9 bytes (a frame line in a real file).
		{"LONG1 9 bytes 2^64-1", []byte{opLong1, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}, val{k: kUint, i: -1}},
		{"LONG1 9 bytes small", []byte{opLong1, 9, 5, 0, 0, 0, 0, 0, 0, 0, 0}, val{k: kInt, i: 5}},
		{"LONG4", []byte{opLong4, 2, 0, 0, 0, 0x00, 0x01}, val{k: kInt, i: 256}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := append([]byte{opProto, 4}, c.ops...)
			data = append(data, opStop)
			_, v, err := decodePickle(data)
			if err != nil {
				t.Fatal(err)
			}
			if v != c.want {
				t.Errorf("got %+v want %+v", v, c.want)
			}
		})
	}
}

func TestDecodeStackOps(t *testing.T) {
	// [1, 1] via DUP; POP drops; POP_MARK drops to the mark; EMPTY_SET +
	// ADDITEMS; DICT and LIST from a mark.
	data := []byte{opProto, 4, opEmptyList, opMark, opBinInt1, 1, opDup, opBinInt1, 9, opPop, opAppends,
		opMark, opBinInt1, 7, opPopMark,
		opStop}
	g, v, err := decodePickle(data)
	if err != nil {
		t.Fatal(err)
	}
	if items := g.seq(v); len(items) != 2 || items[0].i != 1 || items[1].i != 1 {
		t.Errorf("list: %+v", items)
	}
	data = []byte{opProto, 4, opMark, opShortBinUni, 1, 'a', opEmptySet, opMark, opBinInt1, 3, opAddItems, opDict, opStop}
	g, v, err = decodePickle(data)
	if err != nil {
		t.Fatal(err)
	}
	kv := g.seq(v)
	if v.k != kDict || len(kv) != 2 || kv[1].k != kSet || len(g.seq(kv[1])) != 1 {
		t.Errorf("dict: %+v", kv)
	}
}

// TestBadInputs covers every bad input the issue lists. Each must fail with
// an error that names the problem, quickly and without a panic.
func TestBadInputs(t *testing.T) {
	bigLen := func(op byte, n uint64) []byte {
		b := []byte{opProto, 4, op}
		switch op {
		case opBinUnicode:
			b = binary.LittleEndian.AppendUint32(b, uint32(n))
		default:
			b = binary.LittleEndian.AppendUint64(b, n)
		}
		return append(b, "abc"...)
	}
	deep := func(n int) []byte {
		b := []byte{opProto, 4}
		b = append(b, bytes.Repeat([]byte{opEmptyList}, n)...)
		b = append(b, bytes.Repeat([]byte{opAppend}, n-1)...)
		return append(b, opStop)
	}
	// A 100k-entry list referring to one trace dict, referred to 100k times:
	// 10^10 records if expanded.
	bomb := func() []byte {
		p := &pickler{}
		p.op(opProto, 4, opEmptyDict, opShortBinUni)
		p.op(byte(len("device_traces")))
		p.buf.WriteString("device_traces")
		p.op(opEmptyList, opMark)
		// inner list, memo 0
		p.op(opEmptyList, opMemoize, opMark)
		p.put(pmemo{pdict{{"action", "alloc"}, {"addr", 1}, {"size", 1}}}) // memo 1
		for i := 1; i < 100000; i++ {
			p.put(pref(1))
		}
		p.op(opAppends)
		for i := 1; i < 100000; i++ {
			p.put(pref(0))
		}
		p.op(opAppends, opSetItem, opStop)
		return p.buf.Bytes()
	}
	rng := rand.New(rand.NewSource(1))
	random := make([]byte, 4096)
	rng.Read(random)
	random[0] = opProto
	random[1] = 4

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty file", nil, "empty file"},
		{"random bytes", random, "byte"},
		{"not a pickle", []byte("hello world"), "unrecognised content"},
		{"GLOBAL os system + REDUCE", []byte("\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00echoq\x01\x85q\x02Rq\x03."), "refusing opcode GLOBAL (os.system)"},
		{"STACK_GLOBAL", []byte("\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94."), "refusing opcode STACK_GLOBAL"},
		{"REDUCE alone", []byte("\x80\x04N)R."), "refusing opcode REDUCE"},
		{"BUILD", []byte("\x80\x04}}b."), "refusing opcode BUILD"},
		{"INST", []byte("\x80\x04(ios\nsystem\n."), "refusing opcode INST"},
		{"OBJ", []byte("\x80\x04(No."), "refusing opcode OBJ"},
		{"NEWOBJ", []byte("\x80\x04N)\x81."), "refusing opcode NEWOBJ"},
		{"PERSID", []byte("\x80\x04P1\n."), "refusing opcode PERSID"},
		{"EXT1", []byte("\x80\x04\x82\x01."), "refusing opcode EXT1"},
		{"string length beyond file", bigLen(opBinUnicode, 1<<31-1), "BINUNICODE needs 2147483647 bytes but only 3 remain"},
		{"string8 length beyond file", bigLen(opBinUnicode8, 1<<62), "declares 4611686018427387904 bytes"},
		{"truncated mid-opcode", []byte{opProto, 4, opBinInt}, "BININT needs 4 bytes"},
		{"no STOP", []byte{opProto, 4, opEmptyDict}, "ends before the STOP"},
		{"memo read before write", []byte{opProto, 4, opBinGet, 7, opStop}, "memo key 7 is read before it is written"},
		{"nesting a million levels", deep(1000000), "segments[0]: expected a dict, found list"},
		{"memo bomb", bomb(), "memo bomb"},
		{"segments a string", pickleOf(pdict{{"segments", "abc"}}), "segments: expected a list, found str"},
		{"negative size", pickleOf(pdict{{"segments", []any{segment(0, 16, block(0, -5, 0, "inactive", nil))}}}), "segments[0].blocks[0].size: negative size -5"},
		{"size of wrong type", pickleOf(pdict{{"segments", []any{segment(0, 16, block(0, 16, 0, "inactive", nil))}}, {"device_traces", []any{[]any{pdict{{"action", "alloc"}, {"size", "big"}}}}}}), "device_traces[0][0].size: expected an int, found str"},
		{"top level an int", pickleOf(5), "top level: expected a dict"},
		{"frames not frames", pickleOf(pdict{{"segments", []any{segment(0, 16, block(0, 16, 0, "inactive", []any{1}))}}}), "frames[0]: expected a frame dict, found int"},
		{"unsupported protocol", []byte{opProto, 9, opNone, opStop}, "unsupported pickle protocol 9"},
		{"protocol 0 text", []byte("I1\n."), "unrecognised content"},
		{"gzip truncated", gzipTrunc(t), "gzip"},
		{"html without payload", []byte("<html><body>hi</body></html>"), "HTML without an embedded snapshot"},
		{"json truncated", []byte(`{"segments": [{"address": 1, `), "end of data"},
		{"setitems on a list", []byte{opProto, 4, opEmptyList, opMark, opNone, opNone, opSetItems, opStop}, "SETITEMS on a list"},
		{"appends without mark", []byte{opProto, 4, opEmptyList, opAppends, opStop}, "APPENDS without a preceding MARK"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := decodeBytes(t, c.data)
			if err == nil {
				t.Fatalf("no error; got %+v", s)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func gzipTrunc(t *testing.T) []byte {
	b, err := os.ReadFile("../testdata/snapshots/synthetic/base.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	return b[:len(b)/2]
}

func TestMemoBombBoundedMemory(t *testing.T) {
	// The refusal must come before anything proportional to 10^10 is built.
	p := &pickler{}
	p.op(opProto, 4, opEmptyDict, opShortBinUni, byte(len("segments")))
	p.buf.WriteString("segments")
	p.op(opEmptyList, opMark)
	p.put(pmemo{segment(0, 1, pmemo{pdict{{"address", 0}, {"size", 1}, {"requested_size", 1}, {"state", "inactive"}}})})
	for i := 1; i < 200000; i++ {
		p.put(pref(1)) // memo 0 is the block, written first
	}
	p.op(opAppends, opSetItem, opStop)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodeBytes(t, p.buf.Bytes())
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "memo bomb") {
		t.Fatalf("want memo bomb refusal, got %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Errorf("allocated %d MiB before refusing", grew>>20)
	}
}

// TestTruncatedEverywhere cuts a real snapshot at every byte: each prefix
// must give an error, never a panic or a hang.
func TestTruncatedEverywhere(t *testing.T) {
	data, err := os.ReadFile("../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle")
	if err != nil {
		t.Fatal(err)
	}
	step := 1
	if testing.Short() {
		step = 17
	}
	for n := 0; n < len(data)-1; n += step {
		if _, err := decodeBytes(t, data[:n]); err == nil {
			t.Fatalf("prefix of %d bytes decoded without error", n)
		}
	}
	if _, err := decodeBytes(t, data); err != nil {
		t.Fatalf("whole file: %v", err)
	}
}

func TestUnknownThingsAreKeptAndNamed(t *testing.T) {
	s, err := Open(context.Background(), "../testdata/snapshots/synthetic/unknown_and_oom.pickle")
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(s.Warnings, "\n")
	for _, want := range []string{`unknown block state "quantum_superposition"`, `unknown trace action "teleport"`,
		`unknown segment key "mystery"`, `unknown top-level key "brand_new_key"`} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if len(s.Segments[0].Blocks) != 2 || s.Segments[0].Blocks[1].State != StateOther {
		t.Errorf("unknown-state block not kept: %+v", s.Segments[0].Blocks)
	}
	if tr := s.Trace(0); len(tr) != 3 || tr[1].Action != ActionOther || tr[2].Action != ActionOOM || tr[2].DeviceFree != 1<<20 {
		t.Errorf("trace: %+v", tr)
	}
}

// TestFormsAgree: every form of the same snapshot decodes to the same data.
func TestFormsAgree(t *testing.T) {
	dir := "../testdata/snapshots/synthetic"
	base, err := Open(context.Background(), filepath.Join(dir, "base.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	want := Analyze(base, nil)
	for _, name := range []string{"proto2.pickle", "proto5.pickle", "base.pickle.gz", "base.json", "base.html"} {
		t.Run(name, func(t *testing.T) {
			s, err := Open(context.Background(), filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			got := Analyze(s, nil)
			if len(got.Devices) != len(want.Devices) {
				t.Fatalf("devices %d want %d", len(got.Devices), len(want.Devices))
			}
			g, w := got.Devices[0], want.Devices[0]
			if g.AllocatedBytes != w.AllocatedBytes || g.ReservedBytes != w.ReservedBytes || g.Blocks != w.Blocks ||
				g.TraceEntries != w.TraceEntries || len(g.Allocations) != len(w.Allocations) {
				t.Errorf("totals differ: %+v vs %+v", g, w)
			}
			for i := range g.Allocations {
				if g.Allocations[i].Location() != w.Allocations[i].Location() || g.Allocations[i].Category != w.Allocations[i].Category {
					t.Fatalf("allocation %d differs", i)
				}
			}
			if len(s.Annotations) != len(base.Annotations) || len(s.Settings.Raw) != len(base.Settings.Raw) {
				t.Errorf("annotations/settings differ")
			}
		})
	}
}

func TestLegacyForms(t *testing.T) {
	for _, name := range []string{"legacy_list.pickle", "legacy_history.pickle"} {
		s, err := Open(context.Background(), "../testdata/snapshots/synthetic/"+name)
		if err != nil {
			t.Fatal(err)
		}
		b := s.Segments[0].Blocks
		if b[0].Address != 1<<30 || b[1].Address != 1<<30+3<<20 {
			t.Errorf("%s: addresses not derived from the segment base: %x %x", name, b[0].Address, b[1].Address)
		}
		if b[0].RequestedSize != 3<<20-100 || len(b[0].Frames) != 2 {
			t.Errorf("%s: history[0] not used: %+v", name, b[0])
		}
	}
}

// TestFrameLinesAroundTheInlineLimit: a frame's line is held in 32 bits
// inside its container up to 2^32-2; wider lines take the wide form, and
// lines wider than int64 read as -1. Each frame is also read again through
// the memo (GET), as shared frames are.
func TestFrameLinesAroundTheInlineLimit(t *testing.T) {
	huge := []byte{opLong1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x40} // 2^70
	for _, c := range []struct {
		line any
		want int64
	}{
		{0, 0}, {1, 1}, {int64(lineUnknown) - 1, int64(lineUnknown) - 1}, {int64(lineUnknown), int64(lineUnknown)},
		{int64(lineUnknown) + 1, int64(lineUnknown) + 1}, {int64(1) << 62, int64(1) << 62}, {huge, -1}, {-1, -1}, {-7, -7},
	} {
		fr := pdict{{"filename", "/m/a.py"}, {"line", c.line}, {"name", "f"}}
		data := pickleOf(pdict{
			{"segments", []any{segment(4096, 2048,
				block(4096, 1024, 1000, "active_allocated", []any{pmemo{fr}}),
				block(5120, 1024, 1000, "active_allocated", []any{pref(0), frameD("/m/b.py", 2, "g")}))}},
		})
		s, err := decodeBytes(t, data)
		if err != nil {
			t.Fatalf("line %v: %v", c.line, err)
		}
		b := s.Segments[0].Blocks
		if got := b[0].Frames[0].Line; got != c.want {
			t.Errorf("line %v read as %d, want %d", c.line, got, c.want)
		}
		if got := b[1].Frames[0].Line; got != c.want || b[1].Frames[1].Name != "g" {
			t.Errorf("line %v through the memo: %+v", c.line, b[1].Frames)
		}
	}
}

// TestPoolOrderIsStable: known pools first, others by name, whatever the
// map order (run many times).
func TestPoolOrderIsStable(t *testing.T) {
	seg := func(addr int, typ string) pdict {
		return pdict{{"device", 0}, {"address", addr}, {"total_size", 1024}, {"allocated_size", 0},
			{"active_size", 0}, {"requested_size", 0}, {"stream", 0}, {"segment_type", typ},
			{"segment_pool_id", ptuple{0, 0}}, {"is_expandable", false}, {"frames", []any{}},
			{"blocks", []any{block(addr, 1024, 0, "inactive", []any{})}}}
	}
	var segs []any
	for i, typ := range []string{"zeta", "small", "alpha", "large", "mid", "beta"} {
		segs = append(segs, seg(4096*(i+1), typ))
	}
	data := pickleOf(pdict{{"segments", segs}})
	want := "large,small,alpha,beta,mid,zeta"
	for i := 0; i < 50; i++ {
		s, err := decodeBytes(t, data)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range Analyze(s, nil).Devices[0].Pools {
			names = append(names, p.Name)
		}
		if got := strings.Join(names, ","); got != want {
			t.Fatalf("pools %s, want %s", got, want)
		}
	}
}
