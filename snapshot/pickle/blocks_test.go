package pickle

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pt "memscope/internal/pickletest"
	"memscope/snapshot/schema"
)

// blockSnapshot is a snapshot whose one segment holds blocks, and whose
// other top-level keys are more (key, value pairs: raw opcodes allowed).
func blockSnapshot(blocks []any, more ...pt.KV) []byte {
	root := pt.Dict{{"segments", []any{pt.SegmentDict(4096, 1<<20, blocks...)}}, {"device_traces", []any{[]any{}}}}
	return pt.Of(append(root, more...))
}

// bindWith decodes and binds data with opts: the decoder, the value and
// the typed snapshot (its stacks renumbered, see canonStacks).
func bindWith(data []byte, opts ...func(*decoder)) (*decoder, val, any, error) {
	d, root, err := decodeWith(context.Background(), data, nil, nil, nil, nil, opts...)
	if err != nil {
		return d, root, nil, err
	}
	s, err := newBinder(d.g, len(data)).bindRoot(root)
	if err == nil {
		canonStacks(s)
	}
	return d, root, s, err
}

func noBlocks(d *decoder) { d.noBlocks = true }

// TestBlockRecords: a block dict becomes a record (kBlock) when its keys
// and values are ones the binder reads without a word, and stays a generic
// dict otherwise; either way the typed snapshot, its warnings and its
// errors are those of every block left generic (noBlocks). Records too
// read as their dicts wherever a pickle puts them (settings, a trace, a
// frame list) and go back to dicts when a pickle changes them.
func TestBlockRecords(t *testing.T) {
	// Frame dicts written out in a block (not memoized, as pickle.dump
	// would) leave it generic: a dict opened inside a pending one makes
	// the pending one generic (materialize).
	frames := []any{pt.FrameDict("/m/a.py", 3, "f"), pt.FrameDict("/m/b.py", 9, "g")}
	uint64Addr := []byte{pt.OpLong1, 9, 5, 0, 0, 0, 0, 0, 0, 0x80, 0} // 2^63 + 5: an unsigned int
	// SETITEM on the memo's first entry: the block memoized first.
	change := func(key string, v any) []byte {
		w := &pt.Writer{}
		w.Put(pt.Ref(0))
		w.Put(key)
		w.Put(v)
		w.Op(pt.OpSetItem)
		return w.Bytes()
	}
	for _, c := range []struct {
		name    string
		data    []byte
		records int // blocks read as records
	}{
		{"as PyTorch writes them", blockSnapshot([]any{
			pt.BlockDict(4096, 512, 500, "active_allocated", frames),
			pt.BlockDict(4608, 1024, 0, "inactive", []any{}),
			pt.BlockDict(5632, 2048, 2000, "active_pending_free", frames),
			pt.BlockDict(7680, 512, 512, "active_awaiting_free", nil),
		}), 2},
		{"keys in another order", blockSnapshot([]any{
			pt.Dict{{"address", 4096}, {"frames", nil}, {"state", "active_allocated"}, {"requested_size", 7}, {"size", 512}},
			pt.Dict{{"address", 4096}, {"frames", frames}, {"state", "active_allocated"}, {"requested_size", 7}, {"size", 512}},
		}), 1},
		{"keys missing", blockSnapshot([]any{
			pt.Dict{{"address", 4096}, {"size", 512}, {"state", "active_allocated"}}, // requested = size
			pt.Dict{{"address", 4608}, {"size", 512}, {"state", "inactive"}},         // requested 0
			pt.Dict{{"address", 5120}},
			pt.Dict{{"address", 5632}, {"frames", []byte{pt.OpEmptyTuple}}},
		}), 4},
		{"an unsigned address", blockSnapshot([]any{pt.Dict{{"address", uint64Addr}, {"size", 512}}}), 1},
		{"a negative address", blockSnapshot([]any{pt.Dict{{"address", -5}, {"size", 512}}}), 1},
		{"the address not first", blockSnapshot([]any{
			pt.Dict{{"size", 512}, {"address", 4096}, {"state", "inactive"}},
		}), 0},
		{"no address", blockSnapshot([]any{pt.Dict{{"size", 512}, {"state", "inactive"}}}), 0},
		{"an unknown state", blockSnapshot([]any{
			pt.BlockDict(4096, 512, 512, "gone_fishing", nil),
			pt.BlockDict(4608, 512, 512, "inactive", nil),
		}), 1},
		{"a key met twice", blockSnapshot([]any{
			pt.Dict{{"address", 4096}, {"size", 512}, {"size", 1024}},
			pt.Dict{{"address", 4096}, {"address", 8192}},
		}), 0},
		{"another key", blockSnapshot([]any{
			pt.Dict{{"address", 4096}, {"size", 512}, {"history", []any{pt.Dict{{"real_size", 100}, {"frames", frames}}}}},
			pt.Dict{{"address", 4608}, {"size", 512}, {"stream", 0}},
		}), 0},
		{"a negative size", blockSnapshot([]any{pt.Dict{{"address", 4096}, {"size", -512}}}), 0},
		{"a bool size", blockSnapshot([]any{pt.Dict{{"address", 4096}, {"size", true}}}), 0},
		{"frames that are no list", blockSnapshot([]any{pt.Dict{{"address", 4096}, {"frames", "x"}}}), 0},
		{"frames that are not frames", blockSnapshot([]any{pt.Dict{{"address", 4096}, {"frames", []any{1, 2}}}}), 1},
		{"a state that is no string", blockSnapshot([]any{pt.Dict{{"address", 4096}, {"state", 3}}}), 0},
		{"a block changed after", blockSnapshot([]any{
			pt.Memoize(pt.BlockDict(4096, 512, 512, "active_allocated", nil)),
			pt.BlockDict(4608, 512, 512, "active_allocated", nil),
		}, pt.KV{"x", change("state", "inactive")}), 2},
		{"a block given an unknown key after", blockSnapshot([]any{
			pt.Memoize(pt.BlockDict(4096, 512, 512, "active_allocated", nil)),
		}, pt.KV{"x", change("extra", 1)}), 1},
		{"one block twice", blockSnapshot([]any{
			pt.Memoize(pt.BlockDict(4096, 512, 512, "active_allocated", []any{})), pt.Ref(0),
		}), 1},
		{"block-shaped settings", blockSnapshot([]any{}, pt.KV{"allocator_settings", pt.Dict{{"address", 5}, {"size", 7}}}), 1},
		{"a block-shaped trace entry", pt.Of(pt.Dict{{"segments", []any{}}, {"device_traces", []any{[]any{pt.Dict{{"address", 5}}}}}}), 1},
		{"a block-shaped frame", blockSnapshot([]any{pt.Dict{{"address", 4096}, {"frames", []any{pt.Dict{{"address", 1}}}}}}), 1},
		{"a block-shaped segment", pt.Of(pt.Dict{{"segments", []any{pt.Dict{{"address", 4096}, {"size", 5}}}}, {"device_traces", []any{}}}), 1},
		{"a block-shaped root", pt.Of(pt.Dict{{"address", 1}, {"size", 2}}), 1},
	} {
		d, root, s, err := bindWith(c.data)
		d2, root2, want, wantErr := bindWith(c.data, noBlocks)
		switch {
		case (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error():
			t.Errorf("%s: error %v, generic %v", c.name, err, wantErr)
		case !reflect.DeepEqual(s, want):
			t.Errorf("%s: snapshot\n%+v\ngeneric\n%+v", c.name, s, want)
		}
		if got := d.g.blocks.len(); got != c.records {
			t.Errorf("%s: %d block records, want %d", c.name, got, c.records)
		}
		// The values agree too (as CPython reads them, see canonical).
		if canonical(d.g, root) != canonical(d2.g, root2) {
			t.Errorf("%s: values differ from the generic form's", c.name)
		}
	}
}

// genBlocks writes, with pickle.dump, a snapshot of n blocks in segments
// of 1 to 40 (so that helpers start among them), of every form a writer
// gives: frames from a shared pool (memo reads of frame dicts), frames of
// their own, one frames list shared by several blocks, None, [] and
// tuples; every state, an unknown one, and blocks of torch 2.0 (history),
// with a stream key, or with no requested_size. A fifth of the segments
// come after the trace; one state is first written past half of them
// (its string id differs between machines).
const genBlocks = `
import pickle, random, sys
n, out = int(sys.argv[1]), sys.argv[2]
rnd = random.Random(5)
pool = [{'filename': '/src/m%d.py' % (i % 30), 'line': i, 'name': 'fn_%d' % (i % 50)} for i in range(800)]
shared = [[pool[rnd.randrange(800)] for _ in range(6)] for _ in range(50)]
states = ['active_allocated', 'inactive', 'active_pending_free', 'active_awaiting_free']
def frames(i):
    k = i % 9
    if k < 3:
        return [pool[rnd.randrange(800)] for _ in range(1 + rnd.randrange(12))]
    if k == 3:
        return [{'filename': '/own/f%d.py' % i, 'line': i, 'name': 'own'} for _ in range(3)]
    if k == 4:
        return shared[rnd.randrange(50)]
    if k == 5:
        return None
    if k == 6:
        return tuple(pool[rnd.randrange(800)] for _ in range(3))
    return []
def block(i, addr):
    size = 512 * (1 + rnd.randrange(64))
    b = {'address': addr, 'size': size, 'requested_size': size - rnd.randrange(512),
         'state': states[i % (4 if i > n * 11 // 20 else 3)] if i % 97 else 'unknown_state', 'frames': frames(i)}
    if i % 53 == 0:
        del b['requested_size']
    if i % 61 == 0:
        b = {'address': addr, 'size': size, 'state': 'active_allocated', 'history': [{'real_size': 100, 'frames': frames(i)}]}
    if i % 67 == 0:
        b['stream'] = 0
    return b
segs, i, addr = [], 0, 1 << 40
while i < n:
    k = min(n - i, 1 + rnd.randrange(40))
    bs, a = [], addr
    for _ in range(k):
        bs.append(block(i, a))
        a += bs[-1]['size']
        i += 1
    segs.append({'device': 0, 'address': addr, 'total_size': a - addr, 'stream': 0, 'segment_type': 'large', 'blocks': bs})
    addr = a + (1 << 21)
trace = [{'action': 'alloc', 'addr': 4096 * j, 'size': 512, 'stream': 0, 'frames': shared[j % 50]} for j in range(2000)]
cut = len(segs) * 4 // 5
s = {'segments': segs[:cut], 'device_traces': [trace], 'more': segs[cut:]}
with open(out, 'wb') as f:
    pickle.dump(s, f, protocol=4)
`

// TestBlockRecordsAsPickleWrites: on blocks as pickle.dump writes them (frame
// dicts memoized, lists shared), records bind as the generic dicts do, on
// one machine and with helpers that start among the blocks, and every
// block whose keys and values allow it is a record.
func TestBlockRecordsAsPickleWrites(t *testing.T) {
	needPython(t)
	out := filepath.Join(t.TempDir(), "blocks.pickle")
	if b, err := exec.Command("python3", "-c", genBlocks, "30000", out).CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	d, root, s, err := bindWith(data)
	_, _, want, wantErr := bindWith(data, noBlocks)
	if err != nil || wantErr != nil {
		t.Fatalf("errors %v, generic %v", err, wantErr)
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatal("typed snapshots differ from the generic form's")
	}
	// Every block but those with history, a stream key or an unknown
	// state (about 5%), and those whose frames are their own dicts or a
	// tuple (a dict or a MARK inside a pending dict leaves it generic:
	// two ninths).
	if got := d.g.blocks.len(); got < 30000*65/100 || got > 30000*80/100 {
		t.Errorf("%d block records of 30000 blocks", got)
	}
	if canonical(d.g, root) == "" {
		t.Fatal("no canonical form")
	}
	for _, targets := range [][]float64{{0.5}, {0.3, 0.5, 0.7}} {
		split := splitAt(1.0/32, targets...)
		h, hroot, err := decodeWith(context.Background(), data, nil, split, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.joined) == 0 {
			t.Errorf("%v: no helper joined", targets)
		}
		// A helper leaves generic the blocks whose frames list was made
		// before its region (a memo entry it cannot read: the shared
		// lists, a ninth of a helper's blocks).
		if n, one := h.g.blocks.len(), d.g.blocks.len(); n < one*95/100 || n > one {
			t.Errorf("%v: %d block records, one machine %d", targets, n, one)
		}
		hs, err := newBinder(h.g, len(data)).bindRoot(hroot)
		if err != nil {
			t.Fatal(err)
		}
		canonStacks(hs)
		if !reflect.DeepEqual(any(hs), s) {
			t.Errorf("%v: typed snapshots differ from one machine's", targets)
		}
		if canonical(h.g, hroot) != canonical(d.g, root) {
			t.Errorf("%v: values differ from one machine's", targets)
		}
	}
}

// TestCopyBlocks: the join renumbers a helper's block records into the
// main machine's tables: the state's string, the frames by their kind (a
// stack's id, a list's container, None kept), a changed block's container,
// and the key strings blockPairs names, each only where the helper met it.
func TestCopyBlocks(t *testing.T) {
	d, h := newDecoder(nil), newDecoder(nil)
	d.g.blocks.push(rawBlock{addr: 1, cid: noRef}) // the main machine's own
	d.g.blockKeys[0], d.g.blockKeysMet = 7, 1
	h.g.blockKeys = [5]uint32{0, 1, 0, 2, 3}
	h.g.blockKeysMet = 1<<1 | 1<<3 | 1<<4 // size, state, frames: not the address
	recs := []rawBlock{
		{addr: 10, stateStr: 2, fk: kStack, fram: 1, cid: noRef, has: blkState | blkFrames},
		{addr: 20, stateStr: 2, fk: kList, fram: 4, cid: noRef, has: blkState | blkFrames},
		{addr: 30, stateStr: 0, fk: kNone, fram: 0, cid: 5, has: blkState | blkFrames | blkGeneric},
	}
	for _, r := range recs {
		h.g.blocks.push(r)
	}
	j := &joiner{d: d, h: h, strs: []uint32{40, 41, 42, 43}, stacks: []uint32{60, 61}, conts: 100, blocks: 1}
	j.copyBlocks()
	want := []rawBlock{
		{addr: 1, cid: noRef},
		{addr: 10, stateStr: 42, fk: kStack, fram: 61, cid: noRef, has: blkState | blkFrames},
		{addr: 20, stateStr: 42, fk: kList, fram: 104, cid: noRef, has: blkState | blkFrames},
		{addr: 30, stateStr: 40, fk: kNone, fram: 0, cid: 105, has: blkState | blkFrames | blkGeneric},
	}
	if d.g.blocks.len() != len(want) {
		t.Fatalf("%d records, want %d", d.g.blocks.len(), len(want))
	}
	for i, w := range want {
		if got := *d.g.blocks.at(uint32(i)); got != w {
			t.Errorf("record %d: %+v, want %+v", i, got, w)
		}
	}
	if wantKeys := [5]uint32{7, 41, 0, 42, 43}; d.g.blockKeys != wantKeys || d.g.blockKeysMet != 1|1<<1|1<<3|1<<4 {
		t.Errorf("keys %v (met %b), want %v", d.g.blockKeys, d.g.blockKeysMet, wantKeys)
	}
	if v := j.remap(val{k: kBlock, ref: 2}); v != (val{k: kBlock, ref: 3}) {
		t.Errorf("a helper's block 2 is %+v, want the main machine's 3", v)
	}
}

// TestBlockStatesPastTheCache: the states met after stateCacheMax distinct
// ones (here unknown states, whose blocks stay generic) are still read:
// known ones make records with their state, unknown ones stay generic.
func TestBlockStatesPastTheCache(t *testing.T) {
	for _, unknown := range []int{stateCacheMax - 1, stateCacheMax, stateCacheMax + 1} {
		var blocks []any
		for i := range unknown {
			blocks = append(blocks, pt.Dict{{"address", 4096 * i}, {"size", 512}, {"state", fmt.Sprintf("odd_%d", i)}})
		}
		blocks = append(blocks,
			pt.Dict{{"address", 1 << 30}, {"size", 512}, {"state", "active_allocated"}},
			pt.Dict{{"address", 1<<30 + 512}, {"size", 512}, {"state", "inactive"}},
			pt.Dict{{"address", 1<<30 + 1024}, {"size", 512}, {"state", "odd_0"}})
		data := blockSnapshot(blocks)
		d, _, s, err := bindWith(data)
		_, _, want, wantErr := bindWith(data, noBlocks)
		if err != nil || wantErr != nil || !reflect.DeepEqual(s, want) {
			t.Errorf("%d unknown states: snapshot differs from the generic form's (errors %v, %v)", unknown, err, wantErr)
		}
		if got := d.g.blocks.len(); got != 2 {
			t.Errorf("%d unknown states: %d block records, want 2", unknown, got)
		}
		if n := len(d.states); n > stateCacheMax {
			t.Errorf("%d unknown states: %d states remembered", unknown, n)
		}
	}
}

// TestAnnotations binds external_annotations as written (strings and ints,
// None as empty) and refuses an annotation whose field has another kind,
// or that is no dict, naming it by its index and field.
func TestAnnotations(t *testing.T) {
	ann := func(name, stage, device, time any) pt.Dict {
		return pt.Dict{{"name", name}, {"stage", stage}, {"device", device}, {"time_us", time}}
	}
	good := []any{ann("fwd", "START", 0, 17), ann("bwd", nil, 1, 19), ann("opt", "END", nil, 23)}
	_, _, s, err := bindWith(blockSnapshot(nil, pt.KV{"external_annotations", good}))
	if err != nil {
		t.Fatal(err)
	}
	want := []schema.Annotation{{Name: "fwd", Stage: "START", Device: 0, TimeUS: 17}, {Name: "bwd", Device: 1, TimeUS: 19}, {Name: "opt", Stage: "END", TimeUS: 23}}
	if got := s.(*schema.Snapshot).Annotations; !reflect.DeepEqual(got, want) {
		t.Errorf("annotations %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		bad  any
		want string
	}{
		{ann(5, "START", 0, 1), "external_annotations[1].name"},
		{ann("x", 5, 0, 1), "external_annotations[1].stage"},
		{ann("x", "START", "0", 1), "external_annotations[1].device"},
		{ann("x", "START", 0, "1"), "external_annotations[1].time_us"},
		{[]any{"x"}, "external_annotations[1]"},
	} {
		_, _, _, err := bindWith(blockSnapshot(nil, pt.KV{"external_annotations", []any{good[0], c.bad, good[1]}}))
		if err == nil || !strings.Contains(err.Error(), c.want+":") {
			t.Errorf("%v: error %v, want one at %s", c.bad, err, c.want)
		}
	}
}
