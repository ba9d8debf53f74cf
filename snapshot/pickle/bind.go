package pickle

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

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
