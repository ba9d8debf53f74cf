package snapshot

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// binder turns a decoded graph into a typed Snapshot. It walks only the
// schema it knows, so hostile nesting never recurses, and it charges every
// segment, block, trace entry and annotation against a budget derived from
// the file size: memo references can make a small file describe billions of
// records ("memo bomb"), which is refused instead of iterated.
type binder struct {
	g       *graph
	budget  int64
	stackOf []int32 // per container: 1 + index into stacks, 0 when not bound yet
	stacks  []Stack // typed form of graph.stacks, filled on first use
	scratch []rawFrame
	warns   map[string]int
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
		warns:   map[string]int{},
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
	if v.k != kDict {
		return nil, errAt(path, "expected a dict, found %s", v.k)
	}
	switch b.g.cont(v.ref).kind {
	case cFrame, cFrameWide:
		return nil, errAt(path, "expected a record, found a stack frame")
	case cTrace:
		return nil, errAt(path, "expected a record, found a trace entry")
	}
	return b.g.seq(v), nil
}

func (b *binder) list(v val, path string) ([]val, error) {
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

func (b *binder) bindRoot(root val) (*Snapshot, error) {
	s := &Snapshot{}
	switch root.k {
	case kList:
		segs, err := b.segments(root, "segments")
		if err != nil {
			return nil, err
		}
		s.Segments = segs
		b.warn("legacy snapshot: a bare list of segments (torch <= 1.13), no trace")
	case kDict:
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
		for i := 0; i < len(kv); i += 2 {
			k, v := kv[i], kv[i+1]
			switch b.keyRole(k) {
			case keySegments:
				if s.Segments, err = b.segments(v, "segments"); err != nil {
					return nil, err
				}
			case keyDeviceTraces, keyTraces:
				if s.Traces, err = b.traces(v, b.keyName(k)); err != nil {
					return nil, err
				}
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
	default:
		return nil, errAt("top level", "expected a dict (or a legacy list of segments), found %s", root.k)
	}
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

func (b *binder) segments(v val, path string) ([]Segment, error) {
	items, err := b.list(v, path)
	if err != nil {
		return nil, err
	}
	if err := b.spend(len(items), path); err != nil {
		return nil, err
	}
	segs := make([]Segment, len(items))
	for i, it := range items {
		if err := b.segment(it, &segs[i], path+"["+strconv.Itoa(i)+"]"); err != nil {
			return nil, err
		}
	}
	return segs, nil
}

func (b *binder) segment(v val, s *Segment, path string) error {
	kv, err := b.pairs(v, path)
	if err != nil {
		return err
	}
	var blocks val
	haveBlocks := false
	for i := 0; i < len(kv); i += 2 {
		k, x := kv[i], kv[i+1]
		var err error
		switch b.keyRole(k) {
		case keyDevice:
			var d int64
			d, err = b.integer(x, path+".device")
			if err == nil && (d < 0 || d > 1<<16) {
				err = errAt(path+".device", "device ordinal %d out of range", d)
			}
			s.Device = int(d)
		case keyAddress:
			s.Address, err = b.addr(x, path+".address")
		case keyTotalSize:
			s.TotalSize, err = b.size(x, path+".total_size")
		case keyAllocatedSize:
			s.AllocatedSize, err = b.size(x, path+".allocated_size")
		case keyActiveSize:
			s.ActiveSize, err = b.size(x, path+".active_size")
		case keyRequestedSize:
			s.RequestedSize, err = b.size(x, path+".requested_size")
		case keyStream:
			s.Stream, err = b.addr(x, path+".stream")
		case keySegmentType:
			s.Type, err = b.text(x, path+".segment_type")
		case keySegmentPoolID:
			s.PoolID, err = b.poolID(x, path+".segment_pool_id")
		case keyIsExpandable:
			s.Expandable = b.boolean(x)
		case keyFrames:
			s.Frames, err = b.stack(x, path+".frames")
		case keyBlocks:
			blocks, haveBlocks = x, true
		default:
			b.warn(fmt.Sprintf("unknown segment key %q", b.keyName(k)))
		}
		if err != nil {
			return err
		}
	}
	if haveBlocks {
		items, err := b.list(blocks, path+".blocks")
		if err != nil {
			return err
		}
		if err := b.spend(len(items), path+".blocks"); err != nil {
			return err
		}
		s.Blocks = make([]Block, len(items))
		next := s.Address
		var covered int64
		for i, it := range items {
			bl := &s.Blocks[i]
			bpath := path + ".blocks[" + strconv.Itoa(i) + "]"
			if err := b.block(it, bl, next, bpath); err != nil {
				return err
			}
			next = bl.Address + uint64(bl.Size)
			covered += bl.Size
		}
		if covered != s.TotalSize {
			b.warn("segment blocks do not tile the segment (block sizes sum differs from total_size)")
		}
	}
	return nil
}

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

func (b *binder) block(v val, bl *Block, defaultAddr uint64, path string) error {
	kv, err := b.pairs(v, path)
	if err != nil {
		return err
	}
	haveAddr, haveReq, haveFrames := false, false, false
	var history val
	haveHistory := false
	for i := 0; i < len(kv); i += 2 {
		k, x := kv[i], kv[i+1]
		var err error
		switch b.keyRole(k) {
		case keyAddress:
			bl.Address, err = b.addr(x, path+".address")
			haveAddr = true
		case keySize:
			bl.Size, err = b.size(x, path+".size")
		case keyRequestedSize:
			bl.RequestedSize, err = b.size(x, path+".requested_size")
			haveReq = true
		case keyState:
			var st string
			st, err = b.text(x, path+".state")
			var ok bool
			bl.State, ok = parseState(st)
			if !ok && err == nil {
				b.warn(fmt.Sprintf("unknown block state %q (kept, counted as neither active nor free)", st))
			}
		case keyFrames:
			bl.Frames, err = b.stack(x, path+".frames")
			haveFrames = true
		case keyHistory:
			history, haveHistory = x, true
		default:
			b.warn(fmt.Sprintf("unknown block key %q", b.keyName(k)))
		}
		if err != nil {
			return err
		}
	}
	if !haveAddr {
		bl.Address = defaultAddr
	}
	if haveHistory && (!haveReq || !haveFrames) {
		// torch ~2.0: requested size and frames live in history[0].
		items, err := b.list(history, path+".history")
		if err != nil {
			return err
		}
		if len(items) > 0 {
			hkv, err := b.pairs(items[0], path+".history[0]")
			if err != nil {
				return err
			}
			for i := 0; i < len(hkv); i += 2 {
				switch b.keyRole(hkv[i]) {
				case keyRealSize:
					if !haveReq {
						if bl.RequestedSize, err = b.size(hkv[i+1], path+".history[0].real_size"); err != nil {
							return err
						}
					}
				case keyFrames:
					if !haveFrames {
						if bl.Frames, err = b.stack(hkv[i+1], path+".history[0].frames"); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	if !haveReq && !haveHistory && bl.State.Active() {
		bl.RequestedSize = bl.Size
	}
	return nil
}

func (b *binder) traces(v val, path string) ([][]TraceEntry, error) {
	devs, err := b.list(v, path)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, dv := range devs {
		if dv.k == kList || dv.k == kTuple {
			total += int(b.g.cont(dv.ref).n)
		}
	}
	if err := b.spend(total, path); err != nil {
		return nil, err
	}
	if len(devs) > 1<<16 {
		return nil, errAt(path, "%d devices is not plausible", len(devs))
	}
	out := make([][]TraceEntry, len(devs))
	for d, dv := range devs {
		dpath := path + "[" + strconv.Itoa(d) + "]"
		items, err := b.list(dv, dpath)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			continue
		}
		t := make([]TraceEntry, len(items))
		for i, it := range items {
			if err := b.traceEntry(it, &t[i], dpath, i); err != nil {
				return nil, err
			}
		}
		out[d] = t
	}
	return out, nil
}

func (b *binder) traceEntry(v val, e *TraceEntry, dpath string, i int) error {
	if v.k == kDict && b.g.cont(v.ref).kind == cTrace {
		return b.rawTraceEntry(b.g.traces.at(b.g.cont(v.ref).start), e, dpath, i)
	}
	if v.k != kDict || b.g.cont(v.ref).kind != cGeneric {
		_, err := b.pairs(v, fmt.Sprintf("%s[%d]", dpath, i))
		if err == nil {
			err = errAt(fmt.Sprintf("%s[%d]", dpath, i), "expected a trace entry dict")
		}
		return err
	}
	kv := b.g.seq(v)
	for j := 0; j < len(kv); j += 2 {
		k, x := kv[j], kv[j+1]
		var err error
		switch b.keyRole(k) {
		case keyAction:
			if x.k != kStr {
				err = fmt.Errorf("expected a string, found %s", x.k)
				break
			}
			var ok bool
			e.Action, ok = parseAction(b.str(x))
			if !ok {
				b.warn(fmt.Sprintf("unknown trace action %q (kept)", b.str(x)))
			}
		case keyAddr:
			e.Addr, err = b.addr(x, "")
		case keySize:
			e.Size, err = b.size(x, "")
		case keyStream:
			e.Stream, err = b.addr(x, "")
		case keyTimeUS:
			e.TimeUS, err = b.integer(x, "")
		case keyFrames:
			e.Frames, err = b.stack(x, "")
		case keyDeviceFree:
			e.DeviceFree, err = b.integer(x, "")
		case keyCompileContext:
			if x.k == kStr {
				e.CompileContext = b.str(x)
			}
		case keyUserMetadata:
			if x.k == kStr {
				e.UserMetadata = b.str(x)
			}
		case keyPoolID, keyForwardFrames, keyDevice:
			// Known, not used by the analysis.
		default:
			b.warn(fmt.Sprintf("unknown trace entry key %q", b.keyName(k)))
		}
		if err != nil {
			// Field helpers were given no path (building one per field
			// costs more than decoding it); name the field here.
			msg := err.Error()
			if be, ok := err.(*bindError); ok {
				msg = be.msg
			}
			return errAt(fmt.Sprintf("%s[%d].%s", dpath, i, b.keyName(k)), "%s", msg)
		}
	}
	return nil
}

// rawTraceEntry binds a trace entry recognised while decoding.
func (b *binder) rawTraceEntry(r *rawTrace, e *TraceEntry, dpath string, i int) error {
	var ok bool
	e.Action, ok = parseAction(b.g.strs[r.action])
	if !ok {
		b.warn(fmt.Sprintf("unknown trace action %q (kept)", b.g.strs[r.action]))
	}
	e.Addr, e.Size, e.Stream, e.TimeUS, e.DeviceFree = r.addr, r.size, r.stream, r.time, r.devFree
	if r.cc != noRef {
		e.CompileContext = b.g.strs[r.cc]
	}
	if r.um != noRef {
		e.UserMetadata = b.g.strs[r.um]
	}
	if r.fram != noRef {
		st, err := b.stack(val{k: kList, ref: r.fram}, fmt.Sprintf("%s[%d].frames", dpath, i))
		if err != nil {
			return err
		}
		e.Frames = st
	}
	return nil
}

func (b *binder) annotations(v val) ([]Annotation, error) {
	items, err := b.list(v, "external_annotations")
	if err != nil {
		return nil, err
	}
	if err := b.spend(len(items), "external_annotations"); err != nil {
		return nil, err
	}
	out := make([]Annotation, 0, len(items))
	for i, it := range items {
		path := "external_annotations[" + strconv.Itoa(i) + "]"
		kv, err := b.pairs(it, path)
		if err != nil {
			return nil, err
		}
		var a Annotation
		for j := 0; j < len(kv); j += 2 {
			k, x := kv[j], kv[j+1]
			switch b.keyRole(k) {
			case keyName:
				a.Name, err = b.text(x, path+".name")
			case keyStage:
				a.Stage, err = b.text(x, path+".stage")
			case keyDevice:
				var d int64
				d, err = b.integer(x, path+".device")
				a.Device = int(d)
			case keyTimeUS:
				a.TimeUS, err = b.integer(x, path+".time_us")
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func (b *binder) settings(v val) (Settings, error) {
	st := Settings{Present: true}
	kv, err := b.pairs(v, "allocator_settings")
	if err != nil {
		if v.k == kNone {
			return Settings{}, nil
		}
		return st, err
	}
	for i := 0; i < len(kv); i += 2 {
		k, x := kv[i], kv[i+1]
		name := b.keyName(k)
		st.Raw = append(st.Raw, KV{Key: name, Value: b.render(x, 0)})
		switch name {
		case "PYTORCH_CUDA_ALLOC_CONF":
			st.AllocConf, _ = b.text(x, name)
		case "max_split_size":
			st.MaxSplitSize, _ = b.integer(x, name)
		case "expandable_segments":
			st.ExpandableSegments = b.boolean(x)
		case "garbage_collection_threshold":
			if x.k == kFloat {
				st.GCThreshold = math.Float64frombits(uint64(x.i))
			} else if x.k == kInt {
				st.GCThreshold = float64(x.i)
			}
		case "trace_alloc_max_entries":
			st.TraceMaxEntries, _ = b.integer(x, name)
		case "trace_alloc_overflowed":
			st.TraceOverflowed = b.boolean(x)
			st.TraceOverflowedKnown = true
		}
	}
	return st, nil
}

// render formats a value for display, with bounded depth and width.
func (b *binder) render(v val, depth int) string {
	switch v.k {
	case kNone:
		return "None"
	case kBool:
		if v.i != 0 {
			return "True"
		}
		return "False"
	case kInt:
		return strconv.FormatInt(v.i, 10)
	case kUint:
		return strconv.FormatUint(uint64(v.i), 10)
	case kHuge, kFloat:
		return strconv.FormatFloat(math.Float64frombits(uint64(v.i)), 'g', -1, 64)
	case kStr, kBytes:
		s := b.str(v)
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		return strconv.Quote(s)
	}
	if depth > 3 {
		return "…"
	}
	items := b.g.seq(v)
	var sb strings.Builder
	open, close := "[", "]"
	switch v.k {
	case kTuple:
		open, close = "(", ")"
	case kDict, kSet:
		open, close = "{", "}"
	}
	switch b.g.cont(v.ref).kind {
	case cFrame, cFrameWide:
		return "{frame}"
	case cStack:
		return fmt.Sprintf("[%d frames]", b.g.cont(v.ref).n)
	case cTrace:
		return "{trace entry}"
	}
	sb.WriteString(open)
	step := 1
	if v.k == kDict {
		step = 2
	}
	for i := 0; i < len(items); i += step {
		if i > 0 {
			sb.WriteString(", ")
		}
		if sb.Len() > 300 {
			sb.WriteString("…")
			break
		}
		sb.WriteString(b.render(items[i], depth+1))
		if step == 2 {
			sb.WriteString(": ")
			sb.WriteString(b.render(items[i+1], depth+1))
		}
	}
	sb.WriteString(close)
	return sb.String()
}

// stack binds a list of frame dicts. Lists shared through the memo are bound
// once; equal stacks share one backing array.
func (b *binder) stack(v val, path string) (Stack, error) {
	if v.k == kNone {
		return nil, nil
	}
	if v.k != kList && v.k != kTuple {
		return nil, errAt(path, "expected a list of frames, found %s", v.k)
	}
	c := b.g.cont(v.ref)
	if c.n == 0 {
		return nil, nil
	}
	if c.kind == cStack {
		return b.typedStack(c.start), nil
	}
	if s := b.stackOf[v.ref]; s > 0 {
		return b.typedStack(uint32(s - 1)), nil
	}
	items := b.g.seq(v)
	raw := b.scratch[:0]
	for i, it := range items {
		if it.k != kDict {
			return nil, errAt(fmt.Sprintf("%s[%d]", path, i), "expected a frame dict, found %s", it.k)
		}
		fc := b.g.cont(it.ref)
		if fc.isFrame() {
			raw = append(raw, b.g.frameOf(fc))
			continue
		}
		f, err := b.genericFrame(it, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		raw = append(raw, f)
	}
	b.scratch = raw
	id := b.g.stacks.intern(raw)
	b.stackOf[v.ref] = int32(id) + 1
	return b.typedStack(id), nil
}

// typedStack converts an interned stack to Frames once.
func (b *binder) typedStack(id uint32) Stack {
	for int(id) >= len(b.stacks) {
		b.stacks = append(b.stacks, nil)
	}
	if st := b.stacks[id]; st != nil {
		return st
	}
	raw := b.g.stacks.raws[id]
	st := make(Stack, len(raw))
	for i, f := range raw {
		st[i] = Frame{Filename: b.strOrEmpty(f.file), Name: b.strOrEmpty(f.name), Line: f.line}
	}
	b.stacks[id] = st
	return st
}

func (b *binder) genericFrame(v val, path string) (rawFrame, error) {
	f := rawFrame{file: math.MaxUint32, name: math.MaxUint32}
	kv := b.g.seq(v)
	for j := 0; j < len(kv); j += 2 {
		k, x := kv[j], kv[j+1]
		switch b.keyRole(k) {
		case keyFilename:
			if x.k != kStr {
				return f, errAt(path+".filename", "expected a string, found %s", x.k)
			}
			f.file = x.ref
		case keyName:
			if x.k != kStr {
				return f, errAt(path+".name", "expected a string, found %s", x.k)
			}
			f.name = x.ref
		case keyLine:
			switch x.k {
			case kInt:
				f.line = x.i
			case kUint, kHuge:
				f.line = -1
			default:
				return f, errAt(path+".line", "expected an int, found %s", x.k)
			}
		}
	}
	return f, nil
}

func (b *binder) strOrEmpty(id uint32) string {
	if int(id) < len(b.g.strs) {
		return b.g.strs[id]
	}
	return ""
}
