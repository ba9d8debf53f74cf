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

	"memscope/internal/pickletest"
)

func decodeBytes(t *testing.T, b []byte) (*Snapshot, error) {
	t.Helper()
	return Decode(context.Background(), b)
}

func TestDecodeBuiltSnapshot(t *testing.T) {
	fr := []any{pickletest.FrameDict("/m/model.py", 12, "forward"), pickletest.FrameDict("/m/train.py", 3, "main")}
	data := pickletest.Of(pickletest.Dict{
		{"segments", []any{pickletest.SegmentDict(4096, 3072,
			pickletest.BlockDict(4096, 1024, 1000, "active_allocated", fr),
			pickletest.BlockDict(5120, 1024, 0, "inactive", []any{}),
			pickletest.BlockDict(6144, 1024, 1024, "active_pending_free", fr))}},
		{"device_traces", []any{[]any{pickletest.Dict{{"action", "alloc"}, {"addr", 4096}, {"size", 1024}, {"stream", 0}, {"time_us", 5}}}}},
		{"allocator_settings", pickletest.Dict{{"max_split_size", -1}, {"expandable_segments", true}}},
		{"external_annotations", []any{pickletest.Dict{{"name", "ProfilerStep#3"}, {"stage", "START"}, {"device", 0}, {"time_us", 4}}}},
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
	if b[0].RequestedSize != 1000 || *s.BlockFrames(&b[0]).At(0) != (Frame{Filename: "/m/model.py", Name: "forward", Line: 12}) {
		t.Errorf("block 0: %+v", b[0])
	}
	if s.BlockFrames(&b[0]).Key() != s.BlockFrames(&b[2]).Key() {
		t.Error("equal stacks should share one backing array")
	}
	if s.Settings.MaxSplitSize != -1 || !s.Settings.ExpandableSegments {
		t.Errorf("settings: %+v", s.Settings)
	}
	if len(s.Annotations) != 1 || s.Annotations[0].Name != "ProfilerStep#3" || s.Annotations[0].TimeUS != 4 {
		t.Errorf("annotations: %+v", s.Annotations)
	}
	if tr := s.Trace(0); len(tr) != 1 || tr[0].Action() != ActionAlloc || tr[0].Addr != 4096 {
		t.Errorf("trace: %+v", tr)
	}
}

func TestDecodeSharedMemoValues(t *testing.T) {
	// A frame list written once and referenced from two blocks must bind to
	// one stack, as PyTorch's files rely on.
	fr := pickletest.Memoize([]any{pickletest.FrameDict("/a.py", 1, "f")})
	// The first block's frames are memoized, the second refers to them.
	data := pickletest.Of(pickletest.Dict{{"segments", []any{pickletest.SegmentDict(0, 2048,
		pickletest.Dict{{"address", 0}, {"size", 1024}, {"requested_size", 1024}, {"state", "active_allocated"}, {"frames", fr}},
		pickletest.Dict{{"address", 1024}, {"size", 1024}, {"requested_size", 1024}, {"state", "active_allocated"}, {"frames", pickletest.Ref(0)}},
	)}}})
	s, err := decodeBytes(t, data)
	if err != nil {
		t.Fatal(err)
	}
	b := s.Segments[0].Blocks
	f0, f1 := s.BlockFrames(&b[0]), s.BlockFrames(&b[1])
	if f1.Len() != 1 || f0.At(0) != f1.At(0) {
		t.Fatalf("shared frames not shared: %+v / %+v", f0, f1)
	}
}

// TestBadInputs covers every bad input the issue lists. Each must fail with
// an error that names the problem, quickly and without a panic.
func TestBadInputs(t *testing.T) {
	bigLen := func(op byte, n uint64) []byte {
		b := []byte{pickletest.OpProto, 4, op}
		switch op {
		case pickletest.OpBinUnicode:
			b = binary.LittleEndian.AppendUint32(b, uint32(n))
		default:
			b = binary.LittleEndian.AppendUint64(b, n)
		}
		return append(b, "abc"...)
	}
	deep := func(n int) []byte {
		b := []byte{pickletest.OpProto, 4}
		b = append(b, bytes.Repeat([]byte{pickletest.OpEmptyList}, n)...)
		b = append(b, bytes.Repeat([]byte{pickletest.OpAppend}, n-1)...)
		return append(b, pickletest.OpStop)
	}
	// A 100k-entry list referring to one trace dict, referred to 100k times:
	// 10^10 records if expanded.
	bomb := func() []byte {
		p := &pickletest.Writer{}
		p.Op(pickletest.OpProto, 4, pickletest.OpEmptyDict, pickletest.OpShortBinUni)
		p.Op(byte(len("device_traces")))
		p.Op([]byte("device_traces")...)
		p.Op(pickletest.OpEmptyList, pickletest.OpMark)
		// inner list, memo 0
		p.Op(pickletest.OpEmptyList, pickletest.OpMemoize, pickletest.OpMark)
		p.Put(pickletest.Memoize(pickletest.Dict{{"action", "alloc"}, {"addr", 1}, {"size", 1}})) // memo 1
		for i := 1; i < 100000; i++ {
			p.Put(pickletest.Ref(1))
		}
		p.Op(pickletest.OpAppends)
		for i := 1; i < 100000; i++ {
			p.Put(pickletest.Ref(0))
		}
		p.Op(pickletest.OpAppends, pickletest.OpSetItem, pickletest.OpStop)
		return p.Bytes()
	}
	// A trace entry that names its frames twice, first as a list of frames,
	// then as a list of something else: CPython keeps the last value.
	dupFrames := func() []byte {
		p := &pickletest.Writer{}
		p.Op(pickletest.OpProto, 4, pickletest.OpEmptyDict, pickletest.OpMark)
		p.Put("device_traces")
		p.Op(pickletest.OpEmptyList, pickletest.OpMark, pickletest.OpEmptyList, pickletest.OpMark)
		p.Put(pickletest.Dict{{"action", "alloc"}, {"addr", 4096}, {"size", 8},
			{"frames", []any{pickletest.Memoize(pickletest.FrameDict("/w/a.py", 1, "f"))}}}) // memo 0
		p.Op(pickletest.OpEmptyDict, pickletest.OpMark)
		for _, x := range []any{"action", "alloc", "addr", 8192, "size", 8, "frames"} {
			p.Put(x)
		}
		p.Op(pickletest.OpEmptyList, pickletest.OpMemoize, pickletest.OpMark) // memo 1: frames, read at once
		p.Put(pickletest.Ref(0))
		p.Put(pickletest.Ref(0))
		p.Op(pickletest.OpAppends)
		p.Put("frames")
		p.Put([]any{"not a frame"})
		p.Op(pickletest.OpSetItems, pickletest.OpAppends, pickletest.OpAppends, pickletest.OpSetItems, pickletest.OpStop)
		return p.Bytes()
	}
	rng := rand.New(rand.NewSource(1))
	random := make([]byte, 4096)
	rng.Read(random)
	random[0] = pickletest.OpProto
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
		{"string length beyond file", bigLen(pickletest.OpBinUnicode, 1<<31-1), "BINUNICODE needs 2147483647 bytes but only 3 remain"},
		{"string8 length beyond file", bigLen(pickletest.OpBinUnicode8, 1<<62), "declares 4611686018427387904 bytes"},
		{"truncated mid-opcode", []byte{pickletest.OpProto, 4, pickletest.OpBinInt}, "BININT needs 4 bytes"},
		{"no STOP", []byte{pickletest.OpProto, 4, pickletest.OpEmptyDict}, "ends before the STOP"},
		{"memo read before write", []byte{pickletest.OpProto, 4, pickletest.OpBinGet, 7, pickletest.OpStop}, "memo key 7 is read before it is written"},
		{"nesting a million levels", deep(1000000), "segments[0]: expected a dict, found list"},
		{"memo bomb", bomb(), "memo bomb"},
		{"segments a string", pickletest.Of(pickletest.Dict{{"segments", "abc"}}), "segments: expected a list, found str"},
		{"negative size", pickletest.Of(pickletest.Dict{{"segments", []any{pickletest.SegmentDict(0, 16, pickletest.BlockDict(0, -5, 0, "inactive", nil))}}}), "segments[0].blocks[0].size: negative size -5"},
		{"size of wrong type", pickletest.Of(pickletest.Dict{{"segments", []any{pickletest.SegmentDict(0, 16, pickletest.BlockDict(0, 16, 0, "inactive", nil))}}, {"device_traces", []any{[]any{pickletest.Dict{{"action", "alloc"}, {"size", "big"}}}}}}), "device_traces[0][0].size: expected an int, found str"},
		{"top level an int", pickletest.Of(5), "top level: expected a dict"},
		{"frames not frames", pickletest.Of(pickletest.Dict{{"segments", []any{pickletest.SegmentDict(0, 16, pickletest.BlockDict(0, 16, 0, "inactive", []any{1}))}}}), "segments[0].blocks[0].frames[0]: expected a frame dict, found int"},
		// A block's errors name their place in full (block binds with
		// paths relative to the block and its segment prefixes them).
		{"second block's state", pickletest.Of(pickletest.Dict{{"segments", []any{pickletest.SegmentDict(0, 32, pickletest.BlockDict(0, 16, 0, "inactive", nil), pickletest.Dict{{"address", 16}, {"size", 16}, {"requested_size", 0}, {"state", 5}})}}}), "segments[0].blocks[1].state: expected a string, found int"},
		// A segment's errors too (segment binds with paths relative to
		// the segment).
		{"second segment's device", pickletest.Of(pickletest.Dict{{"segments", []any{pickletest.SegmentDict(0, 16), pickletest.Dict{{"device", 1 << 20}, {"address", 16}}}}}), "segments[1].device: device ordinal 1048576 out of range"},
		{"segment's pool id", pickletest.Of(pickletest.Dict{{"segments", []any{pickletest.Dict{{"address", 16}, {"segment_pool_id", []any{"x", 0}}}}}}), "segments[0].segment_pool_id: expected an int, found str"},
		{"segment a list", pickletest.Of(pickletest.Dict{{"segments", []any{[]any{1}}}}), "segments[0]: expected a dict, found list"},
		{"frames given twice, the last no frames", dupFrames(), "device_traces[0][1].frames[0]: expected a frame dict, found str"},
		{"unsupported protocol", []byte{pickletest.OpProto, 9, pickletest.OpNone, pickletest.OpStop}, "unsupported pickle protocol 9"},
		{"protocol 0 text", []byte("I1\n."), "unrecognised content"},
		{"gzip truncated", gzipTrunc(t), "gzip"},
		{"html without payload", []byte("<html><body>hi</body></html>"), "HTML without an embedded snapshot"},
		{"json truncated", []byte(`{"segments": [{"address": 1, `), "end of data"},
		{"setitems on a list", []byte{pickletest.OpProto, 4, pickletest.OpEmptyList, pickletest.OpMark, pickletest.OpNone, pickletest.OpNone, pickletest.OpSetItems, pickletest.OpStop}, "SETITEMS on a list"},
		{"appends without mark", []byte{pickletest.OpProto, 4, pickletest.OpEmptyList, pickletest.OpAppends, pickletest.OpStop}, "APPENDS without a preceding MARK"},
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
	p := &pickletest.Writer{}
	p.Op(pickletest.OpProto, 4, pickletest.OpEmptyDict, pickletest.OpShortBinUni, byte(len("segments")))
	p.Op([]byte("segments")...)
	p.Op(pickletest.OpEmptyList, pickletest.OpMark)
	p.Put(pickletest.Memoize(pickletest.SegmentDict(0, 1, pickletest.Memoize(pickletest.Dict{{"address", 0}, {"size", 1}, {"requested_size", 1}, {"state", "inactive"}}))))
	for i := 1; i < 200000; i++ {
		p.Put(pickletest.Ref(1)) // memo 0 is the block, written first
	}
	p.Op(pickletest.OpAppends, pickletest.OpSetItem, pickletest.OpStop)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodeBytes(t, p.Bytes())
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
	if tr := s.Trace(0); len(tr) != 3 || tr[1].Action() != ActionOther || tr[2].Action() != ActionOOM || s.ExtraOf(&tr[2]).DeviceFree != 1<<20 {
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
		if b[0].RequestedSize != 3<<20-100 || s.BlockFrames(&b[0]).Len() != 2 {
			t.Errorf("%s: history[0] not used: %+v", name, b[0])
		}
	}
}

// TestPoolOrderIsStable: known pools first, others by name, whatever the
// map order (run many times).
func TestPoolOrderIsStable(t *testing.T) {
	seg := func(addr int, typ string) pickletest.Dict {
		return pickletest.Dict{{"device", 0}, {"address", addr}, {"total_size", 1024}, {"allocated_size", 0},
			{"active_size", 0}, {"requested_size", 0}, {"stream", 0}, {"segment_type", typ},
			{"segment_pool_id", pickletest.Tuple{0, 0}}, {"is_expandable", false}, {"frames", []any{}},
			{"blocks", []any{pickletest.BlockDict(addr, 1024, 0, "inactive", []any{})}}}
	}
	var segs []any
	for i, typ := range []string{"zeta", "small", "alpha", "large", "mid", "beta"} {
		segs = append(segs, seg(4096*(i+1), typ))
	}
	data := pickletest.Of(pickletest.Dict{{"segments", segs}})
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
