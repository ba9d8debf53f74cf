package pickle

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	pt "memscope/internal/pickletest"
	"memscope/snapshot/schema"
)

// TestTraceParts: the records of a run are split among the workers at chunk
// boundaries of the graph's records, in order and without a gap, one part
// for a run of less than two chunks.
func TestTraceParts(t *testing.T) {
	for _, c := range []struct {
		start, n uint32
		workers  int
		parts    int
	}{
		{0, 1000, 4, 1},
		{0, 2*chunkLen - 1, 4, 1},
		{0, 2 * chunkLen, 4, 2},
		{0, 3*chunkLen + 5, 3, 3},
		{chunkLen - 1, 2 * chunkLen, 2, 2}, // the first part is one record
		{1000, 3 * chunkLen, 3, 3},
		{5 * chunkLen, 7 * chunkLen, 16, 7},
		{0, 10 * chunkLen, 1, 1},
	} {
		b := &binder{workers: c.workers}
		parts := b.traceParts(c.start, c.n)
		if len(parts) != c.parts {
			t.Errorf("%+v: %d parts, want %d", c, len(parts), c.parts)
			continue
		}
		lo := uint32(0)
		for w, p := range parts {
			if p.lo != lo || p.hi <= p.lo {
				t.Errorf("%+v: part %d is [%d, %d) after %d", c, w, p.lo, p.hi, lo)
			}
			if w < len(parts)-1 && (c.start+p.hi)&chunkMask != 0 {
				t.Errorf("%+v: part %d ends at record %d, inside a chunk", c, w, c.start+p.hi)
			}
			lo = p.hi
		}
		if lo != c.n {
			t.Errorf("%+v: parts end at %d", c, lo)
		}
	}
}

// TestTraceListParallel: trace entries bound on several cores are those of
// one core, for every kind of record: plain ones, with extras, without
// frames, with an unknown action (warned about once per entry), frames as
// a list interned while decoding (as Python writes them) or as a
// container (a list without MEMOIZE, one shared by several entries), and
// entries changed after they were added (generic dicts in a run of
// records); and the chunks of records read are given back.
func TestTraceListParallel(t *testing.T) {
	// Two workers need two chunks of records; under -short (the race
	// detector's run) only just that many.
	n, counts := 200000, []int{1, 2, 3}
	if testing.Short() {
		n, counts = 2*chunkLen+100, []int{1, 2}
	}
	script := strings.ReplaceAll(`
import pickle, sys
frames = [{'filename': '/src/m%d.py' % (i % 7), 'name': 'f%d' % i, 'line': i} for i in range(40)]
shared = [frames[1], frames[2], frames[3]]
trace = []
for i in range(N_ENTRIES):
    d = {'action': 'weird' if i % 11 == 0 else ('alloc' if i % 2 else 'free_completed'),
         'addr': 4096 * (i % 5000), 'size': 512 * (1 + i % 9), 'stream': i % 3, 'time_us': i}
    if i % 5 == 0:
        d['compile_context'] = 'ctx%d' % (i % 13)
        d['user_metadata'] = ''
    if i % 17 == 0:
        d['device_free'] = i
    if i % 19 == 0:
        d['frames'] = []
    elif i % 3 == 0:
        d['frames'] = shared
    else:
        d['frames'] = [frames[(i + j) % 40] for j in range(1 + i % 6)]
    trace.append(d)
pickle.dump({'segments': [], 'device_traces': [trace]}, open(sys.argv[1], 'wb'), protocol=4)
`, "N_ENTRIES", strconv.Itoa(n))
	// want is entry i of either input, as the generators above and below
	// make it (action names by input).
	frame := func(k int) schema.Frame {
		return schema.Frame{Filename: fmt.Sprintf("/src/m%d.py", k%7), Name: fmt.Sprintf("f%d", k), Line: int64(k)}
	}
	want := func(i int, action func(int) string, devFree bool) (schema.TraceEntry, schema.Stack, schema.TraceExtra) {
		a, _ := schema.ParseAction(action(i))
		e := schema.TraceEntry{Addr: uint64(4096 * (i % 5000)), Size: int64(512 * (1 + i%9)), TimeUS: int64(i)}.With(a)
		x := schema.TraceExtra{Stream: uint64(i % 3)}
		if i%5 == 0 {
			x.CompileContext = fmt.Sprintf("ctx%d", i%13)
		}
		if devFree && i%17 == 0 {
			x.DeviceFree = int64(i)
		}
		var fr []schema.Frame
		switch {
		case i%19 == 0:
		case i%3 == 0:
			fr = []schema.Frame{frame(1), frame(2), frame(3)}
		default:
			for j := range 1 + i%6 {
				fr = append(fr, frame((i+j)%40))
			}
		}
		return e, schema.StackOf(fr...), x
	}
	inputs := []struct {
		name     string
		data     []byte
		action   func(i int) string
		devFree  bool
		warnings []string
	}{
		{"python", pythonPickle(t, script), func(i int) string {
			switch {
			case i%11 == 0:
				return "weird"
			case i%2 == 1:
				return "alloc"
			}
			return "free_completed"
		}, true,
			[]string{fmt.Sprintf(`unknown trace action "weird" (kept) (%d times)`, (n+10)/11)}},
		{"changed entries", changedEntries(n), func(i int) string { return []string{"alloc", "free_completed", "weird"}[i%3] }, false,
			[]string{`unknown top-level key "x"`, fmt.Sprintf(`unknown trace action "weird" (kept) (%d times)`, n/3),
				fmt.Sprintf(`unknown trace entry key "mystery" (%d times)`, (n+9972)/9973)}},
	}
	// Off the heap, a worker moves the pages of the records it has read
	// under the entries it has yet to write (pages.Supply): the entries it
	// leaves to the binder ("weird") must not keep the records' bytes.
	for _, in := range inputs {
		for _, workers := range counts {
			for _, pool := range []*offHeapPool{nil, {}} {
				testTraceList(t, in.name, in.data, pool, workers, n, func(s *schema.Snapshot) {
					if !slices.Equal(s.Warnings, in.warnings) {
						t.Errorf("%s, %d workers: warnings %q, want %q", in.name, workers, s.Warnings, in.warnings)
					}
				}, func(i int) (schema.TraceEntry, schema.Stack, schema.TraceExtra) {
					return want(i, in.action, in.devFree)
				})
			}
		}
	}
}

// testTraceList decodes data (off the heap with pool), binds its one trace
// on workers cores, and checks its n entries against want's and the
// snapshot with check.
func testTraceList(t *testing.T, name string, data []byte, pool *offHeapPool, workers, n int, check func(*schema.Snapshot),
	want func(i int) (schema.TraceEntry, schema.Stack, schema.TraceExtra)) {
	t.Helper()
	name = fmt.Sprintf("%s (off the heap: %v), %d workers", name, pool != nil, workers)
	g, root, err := decodePickleCtx(context.Background(), data, nil, nil, pool)
	if err != nil {
		t.Fatal(err)
	}
	if devs := g.seq(g.seq(root)[3]); len(devs) != 1 || g.cont(devs[0].ref).kind != cTraceList {
		t.Fatalf("%s: the trace is no run of records", name)
	}
	b := newBinder(g, len(data))
	b.workers, b.consume = workers, true
	s, err := b.bindRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Traces[0]
	if len(tr) != n {
		t.Fatalf("%s: %d entries", name, len(tr))
	}
	for i := range tr {
		e, fr, x := want(i)
		got := tr[i]
		got.Stack = 0
		got.SetExtra(0)
		if got != e || !s.FramesOf(&tr[i]).Equal(fr) || s.ExtraOf(&tr[i]) != x {
			t.Fatalf("%s: entry %d is %+v (frames %v, extra %+v), want %+v (%v, %+v)",
				name, i, tr[i], s.FramesOf(&tr[i]), s.ExtraOf(&tr[i]), e, fr, x)
		}
	}
	check(s)
	// Every chunk whose records were all read is given back.
	for k, ch := range g.traces.chunks {
		if ch != nil && (k+1)*chunkLen <= g.traces.len() {
			t.Errorf("%s: chunk %d of %d kept", name, k, len(g.traces.chunks))
		}
	}
	g.free()
	if pool != nil && pool.live.Load() != 0 {
		t.Errorf("%s: %d chunks off the heap left mapped", name, pool.live.Load())
	}
}

// changedEntries is a snapshot of n trace entries whose frames are lists
// with no MEMOIZE (containers: a Writer's lists), every third one a list
// shared with earlier entries, and whose every 9973rd entry gets a key
// after the list holds it (SETITEMS on a memo read).
func changedEntries(n int) []byte {
	w := &pt.Writer{}
	w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMark)
	w.Put("x")
	frames := make([]any, 40)
	for i := range frames {
		frames[i] = pt.Memoize(pt.FrameDict(fmt.Sprintf("/src/m%d.py", i%7), i, fmt.Sprintf("f%d", i)))
	}
	w.Put(frames) // memo entries 0 to 39
	memo := uint32(len(frames))
	w.Put("device_traces")
	w.Op(pt.OpEmptyList, pt.OpEmptyList)
	shared := uint32(0)
	var changed []uint32
	for i := range n {
		if i%1000 == 0 {
			if i > 0 {
				w.Op(pt.OpAppends)
			}
			w.Op(pt.OpMark)
		}
		d := pt.Dict{{"action", []string{"alloc", "free_completed", "weird"}[i%3]}, {"addr", 4096 * (i % 5000)},
			{"size", 512 * (1 + i%9)}, {"stream", i % 3}, {"time_us", i}}
		if i%5 == 0 {
			d = append(d, pt.KV{"compile_context", fmt.Sprintf("ctx%d", i%13)}, pt.KV{"user_metadata", ""})
		}
		switch {
		case i%19 == 0:
			d = append(d, pt.KV{"frames", []any{}})
		case i%3 == 0 && shared == 0:
			d = append(d, pt.KV{"frames", pt.Memoize([]any{pt.Ref(1), pt.Ref(2), pt.Ref(3)})})
			shared = memo
			memo++
		case i%3 == 0:
			d = append(d, pt.KV{"frames", pt.Ref(shared)})
		default:
			fr := make([]any, 1+i%6)
			for j := range fr {
				fr[j] = pt.Ref(uint32((i + j) % 40))
			}
			d = append(d, pt.KV{"frames", fr})
		}
		if i%9973 == 0 {
			w.Put(pt.Memoize(d))
			changed = append(changed, memo)
			memo++
			continue
		}
		w.Put(d)
	}
	w.Op(pt.OpAppends)
	for _, m := range changed {
		w.Put(pt.Ref(m))
		w.Op(pt.OpMark)
		w.Put("mystery")
		w.Put(1)
		w.Op(pt.OpSetItems, pt.OpPop)
	}
	w.Op(pt.OpAppend)
	w.Put("segments")
	w.Put([]any{})
	w.Op(pt.OpSetItems, pt.OpStop)
	return w.Bytes()
}

// TestActionCache: actions by string id on each side of actionSmall (the
// array, then the map) parse as schema.ParseAction does, the first time
// and again, an unknown one included.
func TestActionCache(t *testing.T) {
	strs := make([]string, 2*actionSmall)
	names := []string{"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot", "no_such_action"}
	for i := range strs {
		strs[i] = names[i%len(names)]
	}
	c := actionCache{more: map[uint32]schema.Action{}}
	for round := range 2 {
		for _, id := range []uint32{0, 1, 7, actionSmall - 1, actionSmall, actionSmall + 1, 2*actionSmall - 1} {
			want, _ := schema.ParseAction(strs[id])
			if got := c.of(id, strs); got != want {
				t.Errorf("round %d: id %d (%q): %v, want %v", round, id, strs[id], got, want)
			}
		}
	}
	if len(c.more) != 3 {
		t.Errorf("%d ids in the map, want the 3 from actionSmall on", len(c.more))
	}
}

// TestNewBlocks: segments' blocks cut from one slab (fewer than blockSlab)
// never share an element, and each ends at its own length, so that an
// append cannot write over the next segment's; blockSlab blocks or more
// have an array of their own.
func TestNewBlocks(t *testing.T) {
	b := &binder{}
	var all [][]schema.Block
	for _, n := range []int{1, 0, blockSlab - 1, 3, blockSlab, blockSlab + 1, 7, blockSlab / 2, blockSlab / 2} {
		bl := b.newBlocks(n)
		if len(bl) != n || cap(bl) != n {
			t.Fatalf("%d blocks: len %d, cap %d", n, len(bl), cap(bl))
		}
		for i := range bl {
			bl[i].Size = int64(len(all) + 1) // whose it is
		}
		all = append(all, bl)
	}
	for k := range all {
		all[k] = append(all[k], schema.Block{Size: -1}) // a new array, never the next one's
	}
	for k, bl := range all {
		for i := range bl[:len(bl)-1] {
			if bl[i].Size != int64(k+1) {
				t.Fatalf("segment %d's block %d was written by segment %d", k, i, bl[i].Size-1)
			}
		}
	}
}

// TestBlocksParallel: blocks bound on several cores are those of one core,
// for every kind of block: plain ones with frames interned while decoding,
// without frames, with frames the binder interns (dicts with a key more
// than a frame's), torch
// 2.0's history, an unknown key and an unknown state (warned about), no
// address (the end of the block before), and segments whose own frames
// the binder interns (the blocks before them bound first: stacks numbered
// as one by one); on both sides of quickBlocksMin. An input with a bad
// block in one segment and a bad key in a later one names the block.
func TestBlocksParallel(t *testing.T) {
	script := `
import pickle, sys
n, bad = int(sys.argv[2]), sys.argv[3] == 'true'
frames = [{'filename': '/src/m%d.py' % (i % 7), 'name': 'f%d' % i, 'line': i} for i in range(60)]
# Frames with a key more: no frame dicts to the decoder, so their lists are
# interned by the binder.
odd = [{'filename': '/src/o%d.py' % (i % 7), 'name': 'g%d' % i, 'line': i, 'extra': 1} for i in range(60)]
segs, addr, i = [], 1 << 40, 0
while i < n:
    blocks, a = [], addr
    for j in range(1 + i % 37):
        if i >= n:
            break
        b = {'address': a, 'size': 512 * (1 + i % 9), 'requested_size': 500, 'state': 'active_allocated',
             'frames': [frames[(i + k) % 60] for k in range(1 + i % 5)]}
        kind = i % 23
        if kind == 1:
            b['frames'] = []
        elif kind == 2:
            b['frames'] = [odd[(i + k) % 60] for k in range(3)]
        elif kind == 3:
            del b['requested_size'], b['frames']
            b['history'] = [{'real_size': 77, 'frames': [frames[i % 60]]}]
        elif kind == 4:
            b['mystery'] = 1
        elif kind == 5:
            b['state'] = 'odd'
        elif kind == 6:
            del b['address']
        elif kind == 7:
            b['state'] = 'inactive'
            del b['requested_size']
        elif kind == 8:
            del b['requested_size']
        if bad and i == n // 3:
            b['size'] = -1
        blocks.append(b)
        a += b['size']
        i += 1
    seg = {'device': 0, 'address': addr, 'total_size': a - addr, 'stream': 0, 'segment_type': 'large', 'blocks': blocks}
    if len(segs) in (7, n // 40):
        seg['frames'] = [odd[len(segs) % 60], odd[1]]
    if bad and i > 2 * n // 3:
        seg['device'] = 'x'
    segs.append(seg)
    addr = a + (1 << 21)
pickle.dump({'segments': segs, 'device_traces': [[]]}, open(sys.argv[1], 'wb'), protocol=4)
`
	gen := func(n int, bad bool) []byte {
		needPython(t)
		out := filepath.Join(t.TempDir(), "blocks.pickle")
		if b, err := exec.Command("python3", "-c", script, out, strconv.Itoa(n), strconv.FormatBool(bad)).CombinedOutput(); err != nil {
			t.Fatalf("python: %v\n%s", err, b)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	bind := func(data []byte, workers int) (*schema.Snapshot, error) {
		g, root, err := decodePickleCtx(context.Background(), data, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := newBinder(g, len(data))
		b.workers = workers
		return b.bindRoot(root)
	}
	// A stack by its frames and, for the order stacks are numbered in, its
	// ids.
	stack := func(st schema.Stack) string {
		var sb strings.Builder
		for i, f := range st.All() {
			fmt.Fprintf(&sb, "%d:%s:%d:%s ", st.ID(i), f.Filename, f.Line, f.Name)
		}
		return sb.String()
	}
	canon := func(s *schema.Snapshot) string {
		var sb strings.Builder
		for _, seg := range s.Segments {
			fmt.Fprintf(&sb, "%d %#x %d %s|", seg.Device, seg.Address, seg.TotalSize, stack(seg.Frames))
			for i := range seg.Blocks {
				bl := &seg.Blocks[i]
				fmt.Fprintf(&sb, "%#x %d %d %d %s;", bl.Address, bl.Size, bl.RequestedSize, bl.State, stack(s.BlockFrames(bl)))
			}
		}
		for _, st := range s.Stacks {
			fmt.Fprint(&sb, stack(st), ",")
		}
		fmt.Fprint(&sb, s.Warnings)
		return sb.String()
	}
	for _, n := range []int{2*quickBlocksMin - 1, 5*quickBlocksMin + 11} {
		data := gen(n, false)
		one, err := bind(data, 1)
		if err != nil {
			t.Fatal(err)
		}
		blocks := 0
		for _, seg := range one.Segments {
			blocks += len(seg.Blocks)
		}
		if blocks != n || len(one.Warnings) != 2 {
			t.Fatalf("%d blocks: one core bound %d, warnings %q", n, blocks, one.Warnings)
		}
		// The stacks the binder interned (of the odd frames) are numbered
		// in the order the input holds them, as one by one.
		index := map[schema.StackKey]int{}
		for k, st := range one.Stacks {
			if st.Len() > 0 {
				index[st.Key()] = k
			}
		}
		last, seen := -1, map[int]bool{}
		order := func(st schema.Stack) {
			if st.Len() == 0 || !strings.HasPrefix(st.At(0).Filename, "/src/o") {
				return
			}
			k, ok := index[st.Key()]
			if !ok {
				t.Fatalf("%d blocks: a stack of odd frames is not among the snapshot's", n)
			}
			if !seen[k] {
				if k < last {
					t.Fatalf("%d blocks: stack %d met after stack %d", n, k, last)
				}
				seen[k], last = true, k
			}
		}
		for _, seg := range one.Segments {
			order(seg.Frames)
			for i := range seg.Blocks {
				order(one.BlockFrames(&seg.Blocks[i]))
			}
		}
		if len(seen) < 10 {
			t.Fatalf("%d blocks: only %d stacks of odd frames", n, len(seen))
		}
		want := canon(one)
		for _, workers := range []int{2, 3} {
			s, err := bind(data, workers)
			if err != nil {
				t.Fatal(err)
			}
			if got := canon(s); got != want {
				t.Errorf("%d blocks on %d cores: differ from one core's", n, workers)
			}
		}
		bad := gen(n, true)
		for _, workers := range []int{1, 2} {
			if _, err := bind(bad, workers); err == nil || !strings.Contains(err.Error(), ".blocks[") || !strings.Contains(err.Error(), "negative size -1") {
				t.Errorf("%d blocks on %d cores, two errors: %v; want the block's", n, workers, err)
			}
		}
	}
}
