package pickle

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"memscope/internal/par"
	"memscope/snapshot/schema"
)

// binder turns a decoded graph into a typed Snapshot. It walks only the
// schema it knows, so hostile nesting never recurses, and it charges every
// segment, block, trace entry and annotation against a budget derived from
// the file size: memo references can make a small file describe billions of
// records ("memo bomb"), which is refused instead of iterated.
type binder struct {
	g       *graph
	budget  int64
	stackOf []int32        // per container: 1 + index into stacks, 0 when not bound yet
	stacks  []schema.Stack // typed form of graph.stacks, filled on first use
	scratch []uint32
	// table is the typed form of graph.frames, which every stack indexes;
	// it grows as the binder meets frames the decoder did not.
	table   *schema.FrameTable
	warns   map[string]int
	actions map[uint32]schema.Action // parsed action per string id
	workers int                      // goroutines for the parallel parts
	// typed holds traces allocated before the binder ran, by the
	// container of their run of records (see traceArrays); traceList
	// takes them.
	typed map[uint32][]schema.TraceEntry
	// consume is set when the graph is freed after binding (bindGraph):
	// lastTraces then says that the traces being bound are the last
	// reader of the trace records.
	consume, lastTraces bool
	// extras are the snapshot's TraceExtras, interned by value and, for
	// recognised entries, by the graph's extra id (extraOfRaw: 0 when not
	// made yet).
	extras       []schema.TraceExtra
	extrasMax    int // tests: fewer TraceExtras than schema.MaxTraceExtras
	extraByValue map[schema.TraceExtra]uint32
	extraOfRaw   []uint32
	blockSlab    []schema.Block // what is left of newBlocks' array
}

// maxRecordsPerByte bounds records per input byte. An honest snapshot spends
// well over 10 bytes on each segment, block or trace entry.
const maxRecordsPerByte = 0.25

func newBinder(g *graph, inputSize int) *binder {
	budget := int64(float64(inputSize)*maxRecordsPerByte) + 1024
	return &binder{
		g:       g,
		budget:  budget,
		stackOf: make([]int32, g.conts.len()),
		table:   &schema.FrameTable{},
		warns:   map[string]int{},
		workers: runtime.GOMAXPROCS(0),
	}
}

type bindError struct {
	path string
	msg  string
}

func (e *bindError) Error() string { return e.path + ": " + e.msg }

func errAt(path string, format string, args ...any) error {
	return &bindError{path: path, msg: fmt.Sprintf(format, args...)}
}

// under gives err, when a bindError whose path is relative to where a
// value lies, the path of that place in front (see block).
func under(path string, err error) error {
	if be, ok := err.(*bindError); ok {
		be.path = path + be.path
	}
	return err
}

func (b *binder) warn(msg string) { b.warns[msg]++ }

func (b *binder) spend(n int, path string) error {
	b.budget -= int64(n)
	if b.budget < 0 {
		return errAt(path, "shared references expand to more records than the file could hold (a pickle \"memo bomb\"?); refusing to expand them")
	}
	return nil
}

func (b *binder) str(v val) string { return b.g.strs[v.ref] }

func (b *binder) keyRole(k val) keyRole {
	if k.k != kStr {
		return keyUnknown
	}
	return b.g.roles[k.ref]
}

func (b *binder) keyName(k val) string {
	switch k.k {
	case kStr, kBytes:
		return b.str(k)
	}
	return "<" + k.k.String() + " key>"
}

// pairs returns the key/value vals of a dict.
func (b *binder) pairs(v val, path string) ([]val, error) {
	if v.k == kFrame {
		return nil, errAt(path, "expected a record, found a stack frame")
	}
	if v = b.g.traceDictOf(v); v.k == kTrace {
		return nil, errAt(path, "expected a record, found a trace entry")
	}
	if v = b.g.blockDictOf(v); v.k == kBlock {
		return b.g.seq(v), nil
	}
	if v.k != kDict {
		return nil, errAt(path, "expected a dict, found %s", v.k)
	}
	switch b.g.cont(v.ref).kind {
	case cFrame:
		return nil, errAt(path, "expected a record, found a stack frame")
	case cTrace:
		return nil, errAt(path, "expected a record, found a trace entry")
	}
	return b.g.seq(v), nil
}

func (b *binder) list(v val, path string) ([]val, error) {
	if v.k == kStack {
		return nil, errAt(path, "expected a list of records, found a list of stack frames")
	}
	if v.k != kList && v.k != kTuple {
		return nil, errAt(path, "expected a list, found %s", v.k)
	}
	if b.g.cont(v.ref).kind == cStack {
		return nil, errAt(path, "expected a list of records, found a list of stack frames")
	}
	return b.g.seq(v), nil
}

func (b *binder) size(v val, path string) (int64, error) {
	switch v.k {
	case kInt:
		if v.i < 0 {
			return 0, errAt(path, "negative size %d", v.i)
		}
		return v.i, nil
	case kBool:
		return v.i, nil
	case kUint, kHuge:
		return 0, errAt(path, "size does not fit in 63 bits")
	}
	return 0, errAt(path, "expected an int, found %s", v.k)
}

func (b *binder) integer(v val, path string) (int64, error) {
	switch v.k {
	case kInt, kBool:
		return v.i, nil
	case kUint, kHuge:
		return 0, errAt(path, "integer does not fit in 64 bits")
	case kNone:
		return 0, nil
	}
	return 0, errAt(path, "expected an int, found %s", v.k)
}

// addr accepts any 64-bit pattern: addresses and stream handles are unsigned.
func (b *binder) addr(v val, path string) (uint64, error) {
	switch v.k {
	case kInt, kUint, kBool:
		return uint64(v.i), nil
	case kNone:
		return 0, nil
	}
	return 0, errAt(path, "expected an address (int), found %s", v.k)
}

func (b *binder) text(v val, path string) (string, error) {
	switch v.k {
	case kStr, kBytes:
		return b.str(v), nil
	case kNone:
		return "", nil
	}
	return "", errAt(path, "expected a string, found %s", v.k)
}

func (b *binder) boolean(v val) bool {
	switch v.k {
	case kBool, kInt:
		return v.i != 0
	}
	return false
}

func (b *binder) bindRoot(root val) (*schema.Snapshot, error) {
	b.typeStacks()
	s := &schema.Snapshot{}
	switch root.k {
	case kList:
		segs, err := b.segments(root, "segments")
		if err != nil {
			return nil, err
		}
		s.Segments = segs
		b.warn("legacy snapshot: a bare list of segments (torch <= 1.13), no trace")
	case kDict, kBlock: // a dict of block keys alone is read as a record
		kv, err := b.pairs(root, "top level")
		if err != nil {
			return nil, err
		}
		// A dict with neither segments nor traces is something else (a
		// Megatron trace is {"0": …}): say so rather than report an empty
		// snapshot.
		known := len(kv) == 0
		var keys []string
		for i := 0; i < len(kv); i += 2 {
			switch b.keyRole(kv[i]) {
			case keySegments, keyDeviceTraces, keyTraces:
				known = true
			}
			if len(keys) < 5 {
				keys = append(keys, strconv.Quote(b.keyName(kv[i])))
			}
		}
		if !known {
			return nil, fmt.Errorf("%w: the top level has no segments or device_traces (keys: %s)", ErrNotSnapshot, strings.Join(keys, ", "))
		}
		// The traces are bound last, so that nothing reads a trace
		// record after them: the binder of a consumed graph gives their
		// chunks back as it goes (see traceList).
		var traceKeys []int
		for i := 0; i < len(kv); i += 2 {
			k, v := kv[i], kv[i+1]
			switch b.keyRole(k) {
			case keySegments:
				if s.Segments, err = b.segments(v, "segments"); err != nil {
					return nil, err
				}
			case keyDeviceTraces, keyTraces:
				traceKeys = append(traceKeys, i)
			case keyAllocatorSettings:
				if s.Settings, err = b.settings(v); err != nil {
					return nil, err
				}
			case keyExternalAnnotations:
				if s.Annotations, err = b.annotations(v); err != nil {
					return nil, err
				}
			default:
				b.warn(fmt.Sprintf("unknown top-level key %q", b.keyName(k)))
			}
		}
		for _, i := range traceKeys {
			b.lastTraces = b.consume && len(traceKeys) == 1
			if s.Traces, err = b.traces(kv[i+1], b.keyName(kv[i])); err != nil {
				return nil, err
			}
		}
	default:
		return nil, errAt("top level", "expected a dict (or a legacy list of segments), found %s", root.k)
	}
	s.TraceExtras = b.extras
	s.Stacks = b.stacks
	s.Warnings = b.warnings()
	return s, nil
}

func (b *binder) warnings() []string {
	out := make([]string, 0, len(b.warns))
	for m, n := range b.warns {
		if n > 1 {
			m = fmt.Sprintf("%s (%d times)", m, n)
		}
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func (b *binder) segments(v val, path string) ([]schema.Segment, error) {
	items, err := b.list(v, path)
	if err != nil {
		return nil, err
	}
	if err := b.spend(len(items), path); err != nil {
		return nil, err
	}
	segs := make([]schema.Segment, len(items))
	// The segments' own keys are bound in order, their blocks a run of
	// segments at a time (segmentBlocks): before a segment whose frames
	// the binder interns, so that stacks are numbered as one by one.
	var run []segmentBlocks
	flush := func() error {
		err := b.blocksOf(segs, run, path)
		run = run[:0]
		return err
	}
	for i, it := range items {
		if b.internsFrames(it) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		blocks, err := b.segment(it, &segs[i])
		if err != nil {
			if err := flush(); err != nil {
				return nil, err // an earlier segment's block comes first
			}
			return nil, under(path+"["+strconv.Itoa(i)+"]", err)
		}
		if len(blocks) > 0 {
			run = append(run, segmentBlocks{seg: i, items: blocks})
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return segs, nil
}

// segmentBlocks is a segment's block dicts, to bind into its Blocks.
type segmentBlocks struct {
	seg   int
	items []val
}

// internsFrames reports whether binding segment dict v interns a stack:
// frames that are a list the decoder did not intern.
func (b *binder) internsFrames(v val) bool {
	if v = b.g.blockDictOf(v); v.k != kBlock && (v.k != kDict || b.g.cont(v.ref).kind != cGeneric) {
		return false
	}
	kv := b.g.seq(v)
	for i := 0; i+1 < len(kv); i += 2 {
		if b.keyRole(kv[i]) == keyFrames {
			if x := kv[i+1]; (x.k == kList || x.k == kTuple) && b.g.cont(x.ref).n > 0 && b.g.cont(x.ref).kind != cStack {
				return true
			}
		}
	}
	return false
}

// blocksOf binds the blocks of run's segments (their keys bound): those
// that need only reads (quickBlock) on every core, quickBlocksMin blocks
// at least each, then the others in order, as block binds them, each
// address defaulting to the end of the block before.
func (b *binder) blocksOf(segs []schema.Segment, run []segmentBlocks, path string) error {
	total := 0
	for _, r := range run {
		total += len(r.items)
	}
	var done []bool // by block of the run, in order: bound by quickBlock
	if workers := min(b.workers, total/quickBlocksMin); workers > 1 {
		done = make([]bool, total)
		from := make([]int, len(run)+1) // each segment's first block in done
		for k, r := range run {
			from[k+1] = from[k] + len(r.items)
		}
		par.Each(workers, func(w int) {
			// Whole segments, about total/workers blocks each.
			lo, hi := w*total/workers, (w+1)*total/workers
			for k, r := range run {
				if from[k] < lo || from[k] >= hi {
					continue
				}
				s := &segs[r.seg]
				for i, it := range r.items {
					done[from[k]+i] = b.quickBlock(it, &s.Blocks[i])
				}
			}
		})
	}
	at := 0
	for _, r := range run {
		s := &segs[r.seg]
		next := s.Address
		var covered int64
		for i, it := range r.items {
			bl := &s.Blocks[i]
			if done == nil || !done[at+i] {
				*bl = schema.Block{}
				if err := b.block(it, bl, next); err != nil {
					return under(path+"["+strconv.Itoa(r.seg)+"].blocks["+strconv.Itoa(i)+"]", err)
				}
			}
			next = bl.Address + uint64(bl.Size)
			covered += bl.Size
		}
		at += len(r.items)
		if covered != s.TotalSize {
			b.warn("segment blocks do not tile the segment (block sizes sum differs from total_size)")
		}
	}
	return nil
}

// quickBlocksMin is the fewest blocks worth a goroutine of their own.
const quickBlocksMin = 1 << 13

// quickBlock binds block dict v into bl as block does, when that needs
// only reads: its own address, sizes, a known state, frames that are None,
// an empty list or a stack interned while decoding, and no other key;
// false otherwise (block then binds it, warns or fails).
func (b *binder) quickBlock(v val, bl *schema.Block) bool {
	ok, err := b.bindBlock(v, bl, 0, true)
	return ok && err == nil
}

// segment binds a segment dict's keys and returns its block dicts, for
// which it made room in s.Blocks. Its errors' paths are relative to the
// segment, as block's are: built for every key of every segment, the
// paths were 13 ms of the bind of 31k segments.
func (b *binder) segment(v val, s *schema.Segment) ([]val, error) {
	kv, err := b.pairs(v, "")
	if err != nil {
		return nil, err
	}
	var blocks val
	haveBlocks := false
	for i := 0; i < len(kv); i += 2 {
		k, x := kv[i], kv[i+1]
		var err error
		switch b.keyRole(k) {
		case keyDevice:
			var d int64
			d, err = b.integer(x, ".device")
			if err == nil && (d < 0 || d > 1<<16) {
				err = errAt(".device", "device ordinal %d out of range", d)
			}
			s.Device = int(d)
		case keyAddress:
			s.Address, err = b.addr(x, ".address")
		case keyTotalSize:
			s.TotalSize, err = b.size(x, ".total_size")
		case keyAllocatedSize:
			s.AllocatedSize, err = b.size(x, ".allocated_size")
		case keyActiveSize:
			s.ActiveSize, err = b.size(x, ".active_size")
		case keyRequestedSize:
			s.RequestedSize, err = b.size(x, ".requested_size")
		case keyStream:
			s.Stream, err = b.addr(x, ".stream")
		case keySegmentType:
			s.Type, err = b.text(x, ".segment_type")
		case keySegmentPoolID:
			s.PoolID, err = b.poolID(x, ".segment_pool_id")
		case keyIsExpandable:
			s.Expandable = b.boolean(x)
		case keyFrames:
			s.Frames, err = b.stack(x, ".frames")
		case keyBlocks:
			blocks, haveBlocks = x, true
		default:
			b.warn(fmt.Sprintf("unknown segment key %q", b.keyName(k)))
		}
		if err != nil {
			return nil, err
		}
	}
	if !haveBlocks {
		return nil, nil
	}
	items, err := b.list(blocks, ".blocks")
	if err != nil {
		return nil, err
	}
	if err := b.spend(len(items), ".blocks"); err != nil {
		return nil, err
	}
	s.Blocks = b.newBlocks(len(items))
	return items, nil
}

// newBlocks is a segment's n blocks, cut from a slab of blockSlab blocks
// shared by segments of fewer: made one by one, the 9k small arrays of
// 300k blocks were 7 ms of their bind.
func (b *binder) newBlocks(n int) []schema.Block {
	if n >= blockSlab {
		return make([]schema.Block, n)
	}
	if n > len(b.blockSlab) {
		b.blockSlab = make([]schema.Block, blockSlab)
	}
	out := b.blockSlab[:n:n]
	b.blockSlab = b.blockSlab[n:]
	return out
}

// blockSlab is how many blocks newBlocks cuts from one array.
const blockSlab = 4096

func (b *binder) poolID(v val, path string) ([2]int64, error) {
	var id [2]int64
	items, err := b.list(v, path)
	if err != nil {
		return id, err
	}
	for i := 0; i < len(items) && i < 2; i++ {
		x := items[i]
		if x.k == kUint {
			id[i] = x.i
			continue
		}
		n, err := b.integer(x, path)
		if err != nil {
			return id, err
		}
		id[i] = n
	}
	return id, nil
}

// block binds a block dict. Its errors' paths are relative to the block
// (".size"): the caller prefixes its own (under) when one fails. Built
// for every field of every block, "segments[3].blocks[120].size" and the
// like were most of the bind of a snapshot of 300k live blocks (75 ms of
// string concatenation), for errors that almost never come.
func (b *binder) block(v val, bl *schema.Block, defaultAddr uint64) error {
	_, err := b.bindBlock(v, bl, defaultAddr, false)
	return err
}

// bindBlock is block, or with quick set quickBlock: it then writes
// nothing but bl, and says false (with bl partly written) where block
// would warn, intern frames, default the address or read the history.
func (b *binder) bindBlock(v val, bl *schema.Block, defaultAddr uint64, quick bool) (bool, error) {
	if v = b.g.blockDictOf(v); v.k == kBlock {
		return b.recordBlock(b.g.blocks.at(v.ref), bl, quick)
	}
	if quick && (v.k != kDict || b.g.cont(v.ref).kind != cGeneric) {
		return false, nil
	}
	kv, err := b.pairs(v, "")
	if err != nil {
		return false, err
	}
	haveAddr, haveReq, haveFrames := false, false, false
	var history val
	haveHistory := false
	for i := 0; i < len(kv); i += 2 {
		k, x := kv[i], kv[i+1]
		var err error
		switch b.keyRole(k) {
		case keyAddress:
			bl.Address, err = b.addr(x, ".address")
			haveAddr = true
		case keySize:
			bl.Size, err = b.size(x, ".size")
		case keyRequestedSize:
			bl.RequestedSize, err = b.size(x, ".requested_size")
			haveReq = true
		case keyState:
			var st string
			st, err = b.text(x, ".state")
			var ok bool
			bl.State, ok = schema.ParseState(st)
			if !ok && err == nil {
				if quick {
					return false, nil
				}
				b.warn(fmt.Sprintf("unknown block state %q (kept, counted as neither active nor free)", st))
			}
		case keyFrames:
			if quick {
				var ok bool
				if bl.Frames, ok = b.internedStack(x); !ok {
					return false, nil
				}
			} else {
				bl.Frames, err = b.stack(x, ".frames")
			}
			haveFrames = true
		case keyHistory:
			if quick {
				return false, nil
			}
			history, haveHistory = x, true
		default:
			if quick {
				return false, nil
			}
			b.warn(fmt.Sprintf("unknown block key %q", b.keyName(k)))
		}
		if err != nil {
			return false, err
		}
	}
	if !haveAddr {
		if quick {
			return false, nil
		}
		bl.Address = defaultAddr
	}
	if haveHistory && (!haveReq || !haveFrames) {
		// torch ~2.0: requested size and frames live in history[0].
		items, err := b.list(history, ".history")
		if err != nil {
			return false, err
		}
		if len(items) > 0 {
			hkv, err := b.pairs(items[0], ".history[0]")
			if err != nil {
				return false, err
			}
			for i := 0; i < len(hkv); i += 2 {
				switch b.keyRole(hkv[i]) {
				case keyRealSize:
					if !haveReq {
						if bl.RequestedSize, err = b.size(hkv[i+1], ".history[0].real_size"); err != nil {
							return false, err
						}
					}
				case keyFrames:
					if !haveFrames {
						if bl.Frames, err = b.stack(hkv[i+1], ".history[0].frames"); err != nil {
							return false, err
						}
					}
				}
			}
		}
	}
	if !haveReq && !haveHistory && bl.State.Active() {
		bl.RequestedSize = bl.Size
	}
	return true, nil
}

// recordBlock is bindBlock for a block record: what the generic form's
// keys would give, read from the record (blockRecord let through only
// keys and values bindBlock takes without a warning; the address is
// always there).
func (b *binder) recordBlock(r *rawBlock, bl *schema.Block, quick bool) (bool, error) {
	bl.Address, bl.Size, bl.State = r.addr, r.size, r.state
	switch {
	case r.has&blkReq != 0:
		bl.RequestedSize = r.req
	case bl.State.Active():
		bl.RequestedSize = bl.Size
	}
	if r.has&blkFrames == 0 {
		return true, nil
	}
	if quick {
		var ok bool
		bl.Frames, ok = b.internedStack(r.frames())
		return ok, nil
	}
	var err error
	bl.Frames, err = b.stack(r.frames(), ".frames")
	return err == nil, err
}

// internedStack is stack for frames that are None, an empty list or a
// stack interned while decoding, reading only; false for others.
func (b *binder) internedStack(x val) (schema.Stack, bool) {
	id := uint32(0)
	switch x.k {
	case kNone:
		return schema.Stack{}, true
	case kStack:
		id = x.ref
	case kList, kTuple:
		c := b.g.cont(x.ref)
		if c.n == 0 {
			return schema.Stack{}, true
		}
		if c.kind != cStack {
			return schema.Stack{}, false // the binder interns it
		}
		id = c.start
	default:
		return schema.Stack{}, false
	}
	if int(id) >= len(b.stacks) || b.stacks[id].Len() == 0 {
		return schema.Stack{}, false
	}
	return b.stacks[id], true
}
