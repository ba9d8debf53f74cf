package snapshot

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
)

// This file is a restricted pickle virtual machine. It runs the data-only
// subset of protocols 2-5 and builds a compact value graph: no interface{}
// boxing, one 16-byte val per stack slot, containers as runs in one shared
// arena. bind.go then turns the graph into typed structs.
//
// Frame dicts ({filename, line, name}) are by far the most numerous objects in
// a snapshot, so SETITEMS recognises them and stores a 16-byte rawFrame instead
// of six vals: that keeps an 80 MB snapshot with unshared frames in a few
// hundred MB.

// Pickle opcodes (see CPython's Lib/pickletools.py).
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opFloat          = 'F'
	opInt            = 'I'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opLong           = 'L'
	opBinInt2        = 'M'
	opNone           = 'N'
	opPersID         = 'P'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opString         = 'S'
	opBinString      = 'T'
	opShortBinString = 'U'
	opUnicode        = 'V'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opGet            = 'g'
	opBinGet         = 'h'
	opInst           = 'i'
	opLongBinGet     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opObj            = 'o'
	opPut            = 'p'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinFloat       = 'G'
	opBinBytes       = 'B'
	opShortBinBytes  = 'C'

	opProto          = 0x80
	opNewObj         = 0x81
	opExt1           = 0x82
	opExt2           = 0x83
	opExt4           = 0x84
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opLong4          = 0x8b
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opEmptySet       = 0x8f
	opAddItems       = 0x90
	opFrozenSet      = 0x91
	opNewObjEx       = 0x92
	opStackGlobal    = 0x93
	opMemoize        = 0x94
	opFrame          = 0x95
	opByteArray8     = 0x96
	opNextBuffer     = 0x97
	opReadonlyBuffer = 0x98
)

// refusedOps are opcodes that construct objects or call code. A snapshot is
// plain data, so a file that has them is not a snapshot and may be an attack.
var refusedOps = map[byte]string{
	opGlobal: "GLOBAL", opStackGlobal: "STACK_GLOBAL", opReduce: "REDUCE", opBuild: "BUILD",
	opInst: "INST", opObj: "OBJ", opNewObj: "NEWOBJ", opNewObjEx: "NEWOBJ_EX",
	opPersID: "PERSID", opBinPersID: "BINPERSID", opExt1: "EXT1", opExt2: "EXT2", opExt4: "EXT4",
	opNextBuffer: "NEXT_BUFFER", opReadonlyBuffer: "READONLY_BUFFER",
}

// textOps are protocol-0 opcodes; PyTorch never writes protocol 0.
var textOps = map[byte]string{
	opFloat: "FLOAT", opInt: "INT", opLong: "LONG", opString: "STRING", opUnicode: "UNICODE",
	opGet: "GET", opPut: "PUT", opBinString: "BINSTRING", opShortBinString: "SHORT_BINSTRING",
}

type vkind uint8

const (
	kNone vkind = iota
	kBool
	kInt   // i is the value
	kUint  // i holds the bits of a value in [2^63, 2^64)
	kHuge  // an integer wider than 64 bits; i holds float64 bits of an approximation
	kFloat // i holds float64 bits
	kStr   // ref is a string id
	kBytes // ref is a string id
	kList  // ref is a container id (for all container kinds)
	kTuple
	kDict
	kSet
	kUnset vkind = 255 // a hole in the memo
)

var kindNames = [...]string{"None", "bool", "int", "int", "int", "float", "str", "bytes", "list", "tuple", "dict", "set"}

func (k vkind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unset"
}

type val struct {
	i   int64
	ref uint32
	k   vkind
}

type ckind uint8

const (
	cGeneric   ckind = iota // items hold vals (dicts: key, value pairs)
	cFrame                  // a recognised frame dict held in the container (see frameOf)
	cFrameWide              // a recognised frame dict whose line does not fit: start indexes graph.frames
	cStack                  // a list of frame dicts; start indexes graph.stacks
	cTrace                  // a recognised trace entry dict; start indexes graph.traces
)

type container struct {
	start uint32 // index into items, spills (when spilled), frames or stacks
	n     uint32 // number of vals (for cStack: frames)
	// aux is a cFrame's line (start and n hold its file and name): frames
	// are most of a snapshot's dicts, and holding them in the container
	// saves a 16-byte record per frame (measured: 137 MiB of a 208 MiB
	// file with unshared frames).
	aux     uint32
	kind    ckind
	vk      vkind // the kind of val that refers to this container
	spilled bool
}

// lineUnknown is aux's value for line -1 (a line too wide for int64).
const lineUnknown = ^uint32(0)

// isFrame reports whether a container is a recognised frame dict.
func (c *container) isFrame() bool { return c.kind == cFrame || c.kind == cFrameWide }

// frameOf returns a recognised frame container's frame.
func (g *graph) frameOf(c *container) rawFrame {
	if c.kind == cFrameWide {
		return *g.frames.at(c.start)
	}
	f := rawFrame{file: c.start, name: c.n, line: int64(c.aux)}
	if c.aux == lineUnknown {
		f.line = -1
	}
	return f
}

// setFrame makes c a recognised frame container holding f.
func (g *graph) setFrame(c *container, f rawFrame) {
	if f.line >= -1 && f.line < int64(lineUnknown) {
		c.kind, c.start, c.n, c.aux = cFrame, f.file, f.name, uint32(f.line)
		if f.line == -1 {
			c.aux = lineUnknown
		}
		return
	}
	c.kind, c.start = cFrameWide, g.frames.push(f)
}

// rawFrame is a frame dict recognised while decoding; file and name are
// string ids.
type rawFrame struct {
	file, name uint32
	line       int64
}

// rawTrace is a trace entry dict recognised while decoding: a million of
// them would otherwise take 16 vals each. String fields are string ids,
// frames the id of the frames list's container; noRef marks absent ones.
type rawTrace struct {
	addr, stream         uint64
	size, time, devFree  int64
	action, cc, um, fram uint32
	// has records which integer fields were present.
	has uint8
}

const noRef = ^uint32(0)

// has bits of rawTrace.
const (
	hasAddr = 1 << iota
	hasSize
	hasStream
	hasTime
	hasDevFree
)

// graph is the decoded value graph.
type graph struct {
	strs   []string
	roles  []keyRole // role of each string when used as a dict key
	conts  chunked[container]
	items  chunked[val]
	spills [][]val
	frames chunked[rawFrame]
	traces chunked[rawTrace]
	stacks stackTable
	proto  int
}

func (g *graph) cont(id uint32) *container { return g.conts.at(id) }

func (g *graph) seq(v val) []val {
	c := g.conts.at(v.ref)
	switch {
	case c.n == 0 || c.kind != cGeneric:
		return nil
	case c.spilled:
		return g.spills[c.start][:c.n]
	}
	return g.items.slice(c.start, c.n)
}

// DecodeError is a pickle that cannot be decoded.
type DecodeError struct {
	Offset int
	Msg    string
}

func (e *DecodeError) Error() string { return fmt.Sprintf("pickle byte %d: %s", e.Offset, e.Msg) }

type decoder struct {
	data       []byte
	pos        int
	g          *graph
	stack      []val
	marks      []int
	memo       chunked[uint32] // see memoRef
	memoVals   chunked[val]
	memoSparse map[uint32]val
	scratch    []rawFrame
	// progress, when set, is called with the fraction of the input decoded,
	// every progressStep bytes; ctx is checked at the same points.
	progress   func(float64)
	ctx        context.Context
	nextReport int
	// small mirrors memo entries 0-255, which BINGET (one-byte index) reads:
	// in a snapshot those are the dict keys and common strings, read tens of
	// millions of times.
	small    [256]val
	strIndex map[string]uint32
	// puts counts PUT, BINPUT, LONG_BINPUT and MEMOIZE opcodes: the memo
	// budget.
	puts int
	// ops counts opcodes between cancellation checks.
	ops int
}

// decodePickle runs the restricted VM over data and returns the graph and
// the top-level value. Bytes after STOP are ignored (the HTML form pads with
// NULs; pickle.load ignores trailing data too).
func decodePickle(data []byte) (*graph, val, error) {
	return decodePickleCtx(context.Background(), data, nil)
}

// progressStep is how many input bytes pass between progress reports and
// cancellation checks.
const progressStep = 4 << 20

func decodePickleCtx(ctx context.Context, data []byte, progress func(float64)) (*graph, val, error) {
	d := newDecoder(data)
	d.ctx, d.progress = ctx, progress
	root, err := d.run()
	d.data = nil
	if err != nil {
		return nil, val{}, err
	}
	return d.g, root, nil
}

func newDecoder(data []byte) *decoder {
	d := &decoder{
		data:     data,
		g:        &graph{},
		stack:    make([]val, 0, 256),
		strIndex: make(map[string]uint32),
	}
	for i := range d.small {
		d.small[i].k = kUnset
	}
	return d
}

// cancelEvery is how many opcodes run between cancellation checks (a power
// of two): a few microseconds of work, so a cancelled load stops at once
// even on inputs where each opcode is slow.
const cancelEvery = 4096

func (d *decoder) report(pos int) error {
	if d.ctx != nil {
		if err := d.ctx.Err(); err != nil {
			return err
		}
	}
	if pos >= d.nextReport {
		d.nextReport = pos + progressStep
		if d.progress != nil && len(d.data) > 0 {
			d.progress(float64(pos) / float64(len(d.data)))
		}
	}
	return nil
}

func (d *decoder) errf(off int, format string, args ...any) error {
	return &DecodeError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// need returns the next n bytes or a truncation error naming the opcode.
func (d *decoder) need(n int, op string, at int) ([]byte, error) {
	if n < 0 || n > len(d.data)-d.pos {
		return nil, d.errf(at, "%s needs %d bytes but only %d remain (file truncated or corrupt)", op, n, len(d.data)-d.pos)
	}
	b := d.data[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) push(v val) { d.stack = append(d.stack, v) }

func (d *decoder) newCont(k vkind, items []val) uint32 {
	id := d.g.conts.push(container{vk: k})
	if len(items) > 0 {
		d.extend(id, items)
	}
	return id
}

func (d *decoder) str(b []byte) uint32 {
	if id, ok := d.strIndex[string(b)]; ok {
		return id
	}
	s := string(b)
	id := uint32(len(d.g.strs))
	d.g.strs = append(d.g.strs, s)
	d.g.roles = append(d.g.roles, roleOf(s))
	d.strIndex[s] = id
	return id
}

// extend appends vals to a container. Runs are extended in place when they
// sit at the arena's tail (the common case: a container's items are written
// right after it); otherwise the container moves to a slice of its own.
func (d *decoder) extend(cid uint32, vs []val) {
	g := d.g
	c := g.conts.at(cid)
	switch c.kind {
	case cFrame, cFrameWide:
		d.unframe(cid)
	case cStack:
		d.unstack(cid)
	case cTrace:
		d.untrace(cid)
	}
	if !c.spilled {
		if c.n == 0 {
			if start, ok := g.items.run(len(vs)); ok {
				c.start = start
				copy(g.items.slice(start, uint32(len(vs))), vs)
				c.n = uint32(len(vs))
				return
			}
		} else if g.items.canGrow(c.start, c.n, len(vs)) {
			g.items.n += uint32(len(vs))
			copy(g.items.slice(c.start, c.n+uint32(len(vs)))[c.n:], vs)
			c.n += uint32(len(vs))
			return
		}
		// Too big for a chunk, or not at the tail: give the container a
		// slice of its own.
		sp := make([]val, 0, 2*(int(c.n)+len(vs)))
		if c.n > 0 {
			sp = append(sp, g.items.slice(c.start, c.n)...)
		}
		c.start = uint32(len(g.spills))
		c.spilled = true
		g.spills = append(g.spills, sp)
	}
	g.spills[c.start] = append(g.spills[c.start], vs...)
	c.n += uint32(len(vs))
}

// unframe turns a recognised frame back into a generic dict, for the rare
// pickle that adds items to a frame dict after filling it.
func (d *decoder) unframe(cid uint32) {
	g := d.g
	c := g.conts.at(cid)
	f := g.frameOf(c)
	line := val{k: kInt, i: f.line}
	kv := []val{
		{k: kStr, ref: d.str([]byte("filename"))}, {k: kStr, ref: f.file},
		{k: kStr, ref: d.str([]byte("line"))}, line,
		{k: kStr, ref: d.str([]byte("name"))}, {k: kStr, ref: f.name},
	}
	*c = container{vk: kDict}
	d.extend(cid, kv)
}

// untrace turns a recognised trace entry back into a generic dict, for the
// rare pickle that adds items to it after filling it.
func (d *decoder) untrace(cid uint32) {
	g := d.g
	c := g.conts.at(cid)
	r := *g.traces.at(c.start)
	key := func(s string) val { return val{k: kStr, ref: d.str([]byte(s))} }
	kv := []val{key("action"), {k: kStr, ref: r.action}}
	ints := []struct {
		name string
		bit  uint8
		v    int64
	}{{"addr", hasAddr, int64(r.addr)}, {"size", hasSize, r.size}, {"stream", hasStream, int64(r.stream)},
		{"time_us", hasTime, r.time}, {"device_free", hasDevFree, r.devFree}}
	for _, f := range ints {
		if r.has&f.bit != 0 {
			kv = append(kv, key(f.name), val{k: kInt, i: f.v})
		}
	}
	for _, f := range []struct {
		name string
		ref  uint32
		k    vkind
	}{{"compile_context", r.cc, kStr}, {"user_metadata", r.um, kStr}, {"frames", r.fram, kList}} {
		if f.ref != noRef {
			kv = append(kv, key(f.name), val{k: f.k, ref: f.ref})
		}
	}
	c = g.conts.at(cid)
	*c = container{vk: kDict}
	d.extend(cid, kv)
}

// unstack turns an interned frame list back into a generic list of frame
// dicts, for a list that gets more items after its first batch.
func (d *decoder) unstack(cid uint32) {
	g := d.g
	c := g.conts.at(cid)
	raw := g.stacks.raws[c.start]
	vs := make([]val, len(raw))
	for i, f := range raw {
		fc := g.conts.push(container{vk: kDict})
		g.setFrame(g.conts.at(fc), f)
		vs[i] = val{k: kDict, ref: fc}
	}
	*c = container{vk: kList}
	d.extend(cid, vs)
}

// tryTrace stores a freshly filled dict as a rawTrace when it holds only
// the trace-entry keys memscope knows, with the expected value types; any
// other key or type keeps the generic form (and its warnings).
func (d *decoder) tryTrace(cid uint32, kv []val) bool {
	if kv[0].k != kStr || d.g.roles[kv[0].ref] != keyAction {
		return false
	}
	r := rawTrace{action: noRef, cc: noRef, um: noRef, fram: noRef}
	for j := 0; j < len(kv); j += 2 {
		k, v := kv[j], kv[j+1]
		if k.k != kStr {
			return false
		}
		ok := true
		switch d.g.roles[k.ref] {
		case keyAction:
			r.action, ok = v.ref, v.k == kStr
		case keyAddr:
			// A negative address is no address: the generic form keeps it
			// (and the binder says what is wrong) rather than wrap it.
			r.addr, ok = uint64(v.i), (v.k == kInt && v.i >= 0) || v.k == kUint
			r.has |= hasAddr
		case keyStream:
			r.stream, ok = uint64(v.i), (v.k == kInt && v.i >= 0) || v.k == kUint
			r.has |= hasStream
		case keySize:
			r.size, ok = v.i, v.k == kInt && v.i >= 0
			r.has |= hasSize
		case keyTimeUS:
			r.time, ok = v.i, v.k == kInt
			r.has |= hasTime
		case keyDeviceFree:
			r.devFree, ok = v.i, v.k == kInt
			r.has |= hasDevFree
		case keyCompileContext:
			r.cc, ok = v.ref, v.k == kStr
		case keyUserMetadata:
			r.um, ok = v.ref, v.k == kStr
		case keyFrames:
			r.fram, ok = v.ref, v.k == kList
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	if r.action == noRef {
		return false
	}
	c := d.g.conts.at(cid)
	c.kind = cTrace
	c.start = d.g.traces.push(r)
	return true
}

// tryStack interns a fresh list whose items are all recognised frames.
func (d *decoder) tryStack(cid uint32, items []val) bool {
	raw := d.scratch[:0]
	for _, it := range items {
		if it.k != kDict {
			return false
		}
		c := d.g.conts.at(it.ref)
		if !c.isFrame() {
			return false
		}
		raw = append(raw, d.g.frameOf(c))
	}
	d.scratch = raw
	c := d.g.conts.at(cid)
	c.kind = cStack
	c.start = d.g.stacks.intern(raw)
	c.n = uint32(len(raw))
	return true
}

// tryFrame stores a freshly filled 3-key dict as a rawFrame when its keys are
// exactly filename, line and name with the expected value types.
func (d *decoder) tryFrame(cid uint32, kv []val) bool {
	var f rawFrame
	var got uint8
	for j := 0; j < 6; j += 2 {
		k, v := kv[j], kv[j+1]
		if k.k != kStr {
			return false
		}
		switch d.g.roles[k.ref] {
		case keyFilename:
			if v.k != kStr {
				return false
			}
			f.file = v.ref
			got |= 1
		case keyName:
			if v.k != kStr {
				return false
			}
			f.name = v.ref
			got |= 2
		case keyLine:
			switch v.k {
			case kInt:
				f.line = v.i
			case kUint, kHuge:
				f.line = -1
			default:
				return false
			}
			got |= 4
		default:
			return false
		}
	}
	if got != 7 {
		return false
	}
	d.g.setFrame(d.g.conts.at(cid), f)
	return true
}

func (d *decoder) popMark(at int, op string) (int, error) {
	if len(d.marks) == 0 {
		return 0, d.errf(at, "%s without a preceding MARK", op)
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	return m, nil
}

func (d *decoder) lastMark() int {
	if len(d.marks) == 0 {
		return 0
	}
	return d.marks[len(d.marks)-1]
}

func (d *decoder) pop(at int, op string) (val, error) {
	if len(d.stack) <= d.lastMark() {
		return val{}, d.errf(at, "%s on an empty stack", op)
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

// The memo holds one uint32 per entry: 0 for a hole; for a container, its
// kind in bits 29-30 and id + 1 below (so a memo read needs no container
// lookup); memoOther | index into memoVals for anything else.
const (
	memoOther     = 1 << 31
	memoKindShift = 29
	memoIDMask    = 1<<memoKindShift - 1
)

var memoKinds = [4]vkind{kList, kTuple, kDict, kSet}

func (d *decoder) memoRef(v val) uint32 {
	if v.k >= kList && v.k <= kSet && v.ref < memoIDMask-1 {
		return uint32(v.k-kList)<<memoKindShift | (v.ref + 1)
	}
	return memoOther | d.memoVals.push(v)
}

// memoVal decodes a memo entry; ok is false for a hole.
func (d *decoder) memoVal(r uint32) (val, bool) {
	switch {
	case r >= memoOther:
		return *d.memoVals.at(r &^ memoOther), true
	case r&memoIDMask == 0:
		return val{}, false
	}
	return val{k: memoKinds[r>>memoKindShift], ref: r&memoIDMask - 1}, true
}

// denseMemoGap is how far past the end of the dense memo table (and past
// twice the memo opcodes seen) an index may land and still be stored
// densely.
const denseMemoGap = 4096

func (d *decoder) setMemo(idx uint32, v val) {
	d.puts++
	if idx < uint32(len(d.small)) {
		d.small[idx] = v
	}
	n := d.memo.len()
	switch {
	case int(idx) < n:
		*d.memo.at(idx) = d.memoRef(v)
	case int(idx) == n:
		d.memo.push(d.memoRef(v))
	case int(idx) < n+denseMemoGap && int(idx) < 2*d.puts+denseMemoGap:
		// Dense while the table stays within a small multiple of the
		// PUT/MEMOIZE opcodes seen: indices that jump ahead (a hostile file,
		// or an unusual writer) go to the map, so slots never outnumber
		// opcodes by more than denseMemoGap.
		for d.memo.len() < int(idx) {
			d.memo.push(0)
		}
		d.memo.push(d.memoRef(v))
	default:
		// A far-away index: keep it sparse rather than let a hostile file
		// make us allocate 4 billion slots.
		if d.memoSparse == nil {
			d.memoSparse = make(map[uint32]val)
		}
		d.memoSparse[idx] = v
	}
}

func (d *decoder) getMemo(idx uint32, at int) (val, error) {
	if int(idx) < d.memo.len() {
		if v, ok := d.memoVal(*d.memo.at(idx)); ok {
			return v, nil
		}
	}
	if v, ok := d.memoSparse[idx]; ok {
		return v, nil
	}
	return val{}, d.errf(at, "memo key %d is read before it is written", idx)
}

func (d *decoder) top(at int, op string) (val, error) {
	if len(d.stack) == 0 || len(d.stack) <= d.lastMark() {
		return val{}, d.errf(at, "%s on an empty stack", op)
	}
	return d.stack[len(d.stack)-1], nil
}

// run executes the pickle. The opcodes that make up nearly all of a
// snapshot (memo gets, dicts, small ints, SETITEMS/APPENDS) are handled
// inline with the stack and position in locals; everything else goes
// through slowOp.
func (d *decoder) run() (val, error) {
	data := d.data
	pos := d.pos
	stack := d.stack
	g := d.g
	for {
		d.ops++
		if pos >= d.nextReport || d.ops&(cancelEvery-1) == 0 {
			if err := d.report(pos); err != nil {
				return val{}, err
			}
		}
		if pos >= len(data) {
			return val{}, d.errf(pos, "data ends before the STOP opcode (file truncated?)")
		}
		op := data[pos]
		at := pos
		pos++
		switch op {
		case opBinGet:
			if pos >= len(data) {
				return val{}, d.errf(at, "BINGET needs 1 byte but the data ends")
			}
			v := d.small[data[pos]]
			pos++
			if v.k == kUnset {
				return val{}, d.errf(at, "memo key %d is read before it is written", data[pos-1])
			}
			stack = append(stack, v)
		case opLongBinGet:
			if pos+4 > len(data) {
				return val{}, d.errf(at, "LONG_BINGET needs 4 bytes but the data ends")
			}
			idx := binary.LittleEndian.Uint32(data[pos:])
			pos += 4
			if int(idx) < d.memo.len() {
				if v, ok := d.memoVal(*d.memo.at(idx)); ok {
					stack = append(stack, v)
					break
				}
			}
			v, err := d.getMemo(idx, at)
			if err != nil {
				return val{}, err
			}
			stack = append(stack, v)
		case opMemoize:
			if len(stack) == 0 || len(stack) <= d.lastMark() {
				return val{}, d.errf(at, "MEMOIZE on an empty stack")
			}
			v := stack[len(stack)-1]
			if n := d.memo.len(); n < len(d.small) {
				d.small[n] = v
			}
			d.puts++
			d.memo.push(d.memoRef(v))
		case opMark:
			d.marks = append(d.marks, len(stack))
		case opEmptyDict:
			stack = append(stack, val{k: kDict, ref: g.conts.push(container{vk: kDict})})
		case opEmptyList:
			stack = append(stack, val{k: kList, ref: g.conts.push(container{vk: kList})})
		case opBinInt1:
			if pos >= len(data) {
				return val{}, d.errf(at, "BININT1 needs 1 byte but the data ends")
			}
			stack = append(stack, val{k: kInt, i: int64(data[pos])})
			pos++
		case opBinInt2:
			if pos+2 > len(data) {
				return val{}, d.errf(at, "BININT2 needs 2 bytes but the data ends")
			}
			stack = append(stack, val{k: kInt, i: int64(binary.LittleEndian.Uint16(data[pos:]))})
			pos += 2
		case opBinInt:
			if pos+4 > len(data) {
				return val{}, d.errf(at, "BININT needs 4 bytes but the data ends")
			}
			stack = append(stack, val{k: kInt, i: int64(int32(binary.LittleEndian.Uint32(data[pos:])))})
			pos += 4
		case opSetItems:
			if len(d.marks) == 0 {
				return val{}, d.errf(at, "SETITEMS without a preceding MARK")
			}
			m := d.marks[len(d.marks)-1]
			d.marks = d.marks[:len(d.marks)-1]
			if m == 0 {
				return val{}, d.errf(at, "SETITEMS with no dict before the MARK")
			}
			t := stack[m-1]
			if t.k != kDict {
				return val{}, d.errf(at, "SETITEMS on a %s, not a dict", t.k)
			}
			kv := stack[m:]
			if len(kv)%2 != 0 {
				return val{}, d.errf(at, "SETITEMS with an odd number of items (%d)", len(kv))
			}
			c := g.conts.at(t.ref)
			if !(c.n == 0 && c.kind == cGeneric && (len(kv) == 6 && d.tryFrame(t.ref, kv) || len(kv) >= 4 && d.tryTrace(t.ref, kv))) && len(kv) > 0 {
				d.extend(t.ref, kv)
			}
			stack = stack[:m]
		case opAppends:
			if len(d.marks) == 0 {
				return val{}, d.errf(at, "APPENDS without a preceding MARK")
			}
			m := d.marks[len(d.marks)-1]
			d.marks = d.marks[:len(d.marks)-1]
			if m == 0 {
				return val{}, d.errf(at, "APPENDS with nothing to add to")
			}
			t := stack[m-1]
			if t.k != kList {
				return val{}, d.errf(at, "APPENDS to a %s, not a list", t.k)
			}
			if items := stack[m:]; len(items) > 0 {
				c := g.conts.at(t.ref)
				if !(c.n == 0 && c.kind == cGeneric && d.tryStack(t.ref, items)) {
					d.extend(t.ref, items)
				}
			}
			stack = stack[:m]
		default:
			d.pos, d.stack = pos, stack
			stop, v, err := d.slowOp(op, at)
			if err != nil || stop {
				return v, err
			}
			pos, stack = d.pos, d.stack
		}
	}
}

// slowOp executes one opcode with the decoder's stack and position.
func (d *decoder) slowOp(op byte, at int) (stop bool, v val, err error) {
	data := d.data
	switch op {
	case opProto:
		b, err := d.need(1, "PROTO", at)
		if err != nil {
			return false, val{}, err
		}
		if b[0] < 2 || b[0] > 5 {
			return false, val{}, d.errf(at, "unsupported pickle protocol %d (snapshots use 2-5)", b[0])
		}
		d.g.proto = int(b[0])
	case opFrame:
		if _, err := d.need(8, "FRAME", at); err != nil {
			return false, val{}, err
		}
	case opStop:
		if len(d.stack) == 0 {
			return false, val{}, d.errf(at, "STOP with an empty stack")
		}
		return true, d.stack[len(d.stack)-1], nil
	case opPop:
		if len(d.stack) > d.lastMark() {
			d.stack = d.stack[:len(d.stack)-1]
		} else if len(d.marks) > 0 {
			d.marks = d.marks[:len(d.marks)-1]
		} else {
			return false, val{}, d.errf(at, "POP on an empty stack")
		}
	case opPopMark:
		m, err := d.popMark(at, "POP_MARK")
		if err != nil {
			return false, val{}, err
		}
		d.stack = d.stack[:m]
	case opDup:
		v, err := d.top(at, "DUP")
		if err != nil {
			return false, val{}, err
		}
		d.push(v)
	case opNone:
		d.push(val{k: kNone})
	case opNewTrue:
		d.push(val{k: kBool, i: 1})
	case opNewFalse:
		d.push(val{k: kBool})
	case opLong1:
		b, err := d.need(1, "LONG1", at)
		if err != nil {
			return false, val{}, err
		}
		b, err = d.need(int(b[0]), "LONG1", at)
		if err != nil {
			return false, val{}, err
		}
		d.push(decodeLong(b))
	case opLong4:
		b, err := d.need(4, "LONG4", at)
		if err != nil {
			return false, val{}, err
		}
		n := int32(binary.LittleEndian.Uint32(b))
		if n < 0 {
			return false, val{}, d.errf(at, "LONG4 with negative length %d", n)
		}
		b, err = d.need(int(n), "LONG4", at)
		if err != nil {
			return false, val{}, err
		}
		d.push(decodeLong(b))
	case opBinFloat:
		b, err := d.need(8, "BINFLOAT", at)
		if err != nil {
			return false, val{}, err
		}
		d.push(val{k: kFloat, i: int64(binary.BigEndian.Uint64(b))})
	case opShortBinUni, opShortBinBytes:
		name := "SHORT_BINUNICODE"
		if op == opShortBinBytes {
			name = "SHORT_BINBYTES"
		}
		b, err := d.need(1, name, at)
		if err != nil {
			return false, val{}, err
		}
		b, err = d.need(int(b[0]), name, at)
		if err != nil {
			return false, val{}, err
		}
		d.pushStr(op == opShortBinBytes, b)
	case opBinUnicode, opBinBytes:
		name := "BINUNICODE"
		if op == opBinBytes {
			name = "BINBYTES"
		}
		b, err := d.need(4, name, at)
		if err != nil {
			return false, val{}, err
		}
		b, err = d.need(int(binary.LittleEndian.Uint32(b)), name, at)
		if err != nil {
			return false, val{}, err
		}
		d.pushStr(op == opBinBytes, b)
	case opBinUnicode8, opBinBytes8, opByteArray8:
		name := "BINUNICODE8"
		if op != opBinUnicode8 {
			name = "BINBYTES8"
		}
		b, err := d.need(8, name, at)
		if err != nil {
			return false, val{}, err
		}
		n := binary.LittleEndian.Uint64(b)
		if n > uint64(len(data)-d.pos) {
			return false, val{}, d.errf(at, "%s declares %d bytes but only %d remain (file truncated or corrupt)", name, n, len(data)-d.pos)
		}
		b, _ = d.need(int(n), name, at)
		d.pushStr(op != opBinUnicode8, b)
	case opEmptyTuple:
		d.push(val{k: kTuple, ref: d.newCont(kTuple, nil)})
	case opEmptySet:
		d.push(val{k: kSet, ref: d.newCont(kSet, nil)})
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		if len(d.stack)-d.lastMark() < n {
			return false, val{}, d.errf(at, "TUPLE%d needs %d items on the stack", n, n)
		}
		base := len(d.stack) - n
		id := d.newCont(kTuple, d.stack[base:])
		d.stack = append(d.stack[:base], val{k: kTuple, ref: id})
	case opTuple, opList, opDict, opFrozenSet:
		m, err := d.popMark(at, "TUPLE/LIST/DICT")
		if err != nil {
			return false, val{}, err
		}
		items := d.stack[m:]
		k := kTuple
		switch op {
		case opList:
			k = kList
		case opDict:
			k = kDict
		case opFrozenSet:
			k = kSet
		}
		if k == kDict && len(items)%2 != 0 {
			return false, val{}, d.errf(at, "DICT with an odd number of items (%d)", len(items))
		}
		id := d.newCont(k, items)
		d.stack = append(d.stack[:m], val{k: k, ref: id})
	case opAppend:
		v, err := d.pop(at, "APPEND")
		if err != nil {
			return false, val{}, err
		}
		t, err := d.top(at, "APPEND")
		if err != nil {
			return false, val{}, err
		}
		if t.k != kList {
			return false, val{}, d.errf(at, "APPEND to a %s, not a list", t.k)
		}
		one := [1]val{v}
		if c := d.g.conts.at(t.ref); !(c.n == 0 && c.kind == cGeneric && d.tryStack(t.ref, one[:])) {
			d.extend(t.ref, one[:])
		}
	case opAddItems:
		// APPENDS is handled in run.
		name, want := "ADDITEMS", kSet
		m, err := d.popMark(at, name)
		if err != nil {
			return false, val{}, err
		}
		if m == 0 {
			return false, val{}, d.errf(at, "%s with nothing to add to", name)
		}
		t := d.stack[m-1]
		if t.k != want {
			return false, val{}, d.errf(at, "%s to a %s, not a %s", name, t.k, want)
		}
		if items := d.stack[m:]; len(items) > 0 {
			d.extend(t.ref, items)
		}
		d.stack = d.stack[:m]
	case opSetItem:
		if len(d.stack)-d.lastMark() < 3 {
			return false, val{}, d.errf(at, "SETITEM needs a dict, a key and a value on the stack")
		}
		n := len(d.stack)
		t := d.stack[n-3]
		if t.k != kDict {
			return false, val{}, d.errf(at, "SETITEM on a %s, not a dict", t.k)
		}
		d.extend(t.ref, d.stack[n-2:])
		d.stack = d.stack[:n-2]
	case opBinPut:
		b, err := d.need(1, "BINPUT", at)
		if err != nil {
			return false, val{}, err
		}
		v, err := d.top(at, "BINPUT")
		if err != nil {
			return false, val{}, err
		}
		d.setMemo(uint32(b[0]), v)
	case opLongBinPut:
		b, err := d.need(4, "LONG_BINPUT", at)
		if err != nil {
			return false, val{}, err
		}
		v, err := d.top(at, "LONG_BINPUT")
		if err != nil {
			return false, val{}, err
		}
		d.setMemo(binary.LittleEndian.Uint32(b), v)
	default:
		if name, ok := refusedOps[op]; ok {
			return false, val{}, d.refuse(at, op, name)
		}
		if name, ok := textOps[op]; ok {
			return false, val{}, d.errf(at, "opcode %s (0x%02x) is from protocol 0/1, which snapshots never use", name, op)
		}
		return false, val{}, d.errf(at, "unknown opcode 0x%02x (not a pickle, or corrupt)", op)
	}
	return false, val{}, nil
}

func (d *decoder) pushStr(isBytes bool, b []byte) {
	k := kStr
	if isBytes {
		k = kBytes
	}
	d.push(val{k: k, ref: d.str(b)})
}

// refuse names the refused opcode and, for GLOBAL, what it would import.
func (d *decoder) refuse(at int, op byte, name string) error {
	what := ""
	if op == opGlobal {
		mod, rest := readLine(d.data[d.pos:], 200)
		fn, _ := readLine(rest, 200)
		what = fmt.Sprintf(" (%s.%s)", mod, fn)
	}
	return d.errf(at, "refusing opcode %s%s: snapshots hold only plain data, and this opcode would construct objects or run code", name, what)
}

func readLine(b []byte, max int) (string, []byte) {
	for i := 0; i < len(b) && i < max; i++ {
		if b[i] == '\n' {
			return sanitize(string(b[:i])), b[i+1:]
		}
	}
	if len(b) > max {
		b = b[:max]
	}
	return sanitize(string(b)), nil
}

func sanitize(s string) string {
	out := []rune{}
	for _, r := range s {
		if r < 32 || r == 0x7f {
			r = '?'
		}
		out = append(out, r)
	}
	return string(out)
}

// decodeLong decodes a little-endian two's complement integer of any width.
func decodeLong(b []byte) val {
	n := len(b)
	switch {
	case n == 0:
		return val{k: kInt}
	case n <= 8:
		var u uint64
		for i := n - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		shift := uint(64 - 8*n)
		return val{k: kInt, i: int64(u<<shift) >> shift}
	case n == 9 && b[8] == 0:
		u := binary.LittleEndian.Uint64(b)
		if u>>63 == 0 {
			return val{k: kInt, i: int64(u)}
		}
		return val{k: kUint, i: int64(u)}
	}
	// Wider than 64 bits: keep an approximation; no snapshot field needs
	// such values, and binding reports them where a size is expected.
	be := make([]byte, n)
	for i := range b {
		be[n-1-i] = b[i]
	}
	x := new(big.Int).SetBytes(be)
	if b[n-1]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	f, _ := new(big.Float).SetInt(x).Float64()
	return val{k: kHuge, i: int64(math.Float64bits(f))}
}
