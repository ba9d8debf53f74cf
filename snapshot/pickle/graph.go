package pickle

import "memscope/snapshot/schema"

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
	// kFrame is a frame dict recognised while decoding: ref is its id in
	// graph.frames. It has no container: a snapshot holds millions of frame
	// dicts, and a container each cost 16 bytes (plus the binder's 4) per
	// dict.
	kFrame
	// kRef is a memo entry a helper cannot read (helper.go): ref is its
	// index. Joining replaces it with the entry.
	kRef
	// kTop stands, in a helper, for the list below its region.
	kTop
	// kTrace is a trace entry dict recognised while decoding
	// (pendingTrace): ref is its record in graph.traces. Like a frame it
	// has no container, a million of which were 16 MiB of a real trace's
	// peak, until a pickle changes it (traceDict): the record then has
	// hasGeneric and names the container (cid).
	kTrace
	// kStack is a frame list interned while decoding (frameList): ref is
	// its stack in graph.stacks; it has no container, 16 bytes for each of
	// a trace's hundreds of thousands of lists. i is, while the list is
	// the fresh one on the stack, 1 + its memo slot: a pickle that adds to
	// it then gives it a container (decoder.stackList); 0 on every copy.
	kStack
	// kBlock is a segment's block dict recognised while decoding
	// (pendingBlock): ref is its record in graph.blocks. A snapshot of
	// 300k blocks held a container and ten 16-byte items for each (53
	// MB); a record is 40 bytes. Like a trace entry it gets a container
	// (blockDict) when a pickle changes it.
	kBlock
	kUnset vkind = 255 // a hole in the memo
)

var kindNames = [...]string{"None", "bool", "int", "int", "int", "float", "str", "bytes", "list", "tuple", "dict", "set", "dict", "memo entry", "list", "dict", "list", "dict"}

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
	cGeneric ckind = iota // items hold vals (dicts: key, value pairs)
	cFrame                // a recognised frame dict; start is its id in graph.frames
	cStack                // a list of frame dicts; start indexes graph.stacks
	cTrace                // a recognised trace entry dict; start indexes graph.traces
	// cTraceList is a list of recognised trace entries whose records are
	// graph.traces[start:start+n], in order: a device's trace, a million
	// entries that would otherwise take a 16-byte val each (and the copies
	// of a slice grown by doubling).
	cTraceList
)

type container struct {
	start   uint32 // index into items, spills (when spilled), frames, stacks or traces
	n       uint32 // number of vals (for cStack: frames)
	kind    ckind
	vk      vkind // the kind of val that refers to this container
	spilled bool
}

// rawFrame is a frame dict recognised while decoding; file and name are
// string ids.
type rawFrame struct {
	file, name uint32
	line       int64
}

// rawTrace is a trace entry dict recognised while decoding: a million of
// them would otherwise take 16 vals each. It is 40 bytes: the fields few
// entries have, or have but share (the stream), are in graph.extras.
// String fields are string ids, frames the id of the frames list's
// container; noRef marks absent ones.
type rawTrace struct {
	addr         uint64
	size, time   int64
	action, fram uint32
	// cid is the dict's container, which a list of trace records
	// (cTraceList) names when it goes back to the generic form; noRef
	// for a record made without one (kTrace) until a change gives it one.
	cid uint32
	// ex holds, in its top byte, which fields were present (has bits),
	// and below it 1 + the index of the entry's rawExtra in graph.extras
	// (0 for none).
	ex uint32
}

// rawExtra holds a trace entry's rarely present or rarely distinct fields:
// the stream (0 in every entry of the real traces here), device_free (an
// oom entry's), compile_context and user_metadata (string ids, or noRef).
type rawExtra struct {
	stream  uint64
	devFree int64
	cc, um  uint32
}

// rawBlock is a block dict recognised while decoding: its address first,
// then any of size, requested_size, state (a known one) and frames (None,
// an interned stack or a list), each once (see blockRecord).
type rawBlock struct {
	addr      uint64
	size, req int64
	// fram is the frames value's ref, fk its kind (kNone when absent).
	fram uint32
	// stateStr is the state's string id, state what it names.
	stateStr uint32
	// cid is the dict's container once a change gave it one (blockDict).
	cid   uint32
	fk    vkind
	state schema.BlockState
	has   uint8 // blk bits
}

// rawBlock.has bits: the keys present, and the forms a record was read
// from or went back to.
const (
	blkSize = 1 << iota
	blkReq
	blkState
	blkFrames
	// blkUint marks an address read as an unsigned int (kUint).
	blkUint
	// blkGeneric marks a record whose dict went back to the generic form:
	// cid is its container, which every copy of the record reads.
	blkGeneric
)

// noExtra is the rawExtra of an entry without those fields.
var noExtra = rawExtra{cc: noRef, um: noRef}

// exBits is the width of rawTrace.ex's extra index: a graph holds at most
// 1<<exBits - 1 distinct extras (a trace entry beyond stays a generic dict).
const exBits = 24

func (r *rawTrace) has() uint8        { return uint8(r.ex >> exBits) }
func (r *rawTrace) mark(bits uint8)   { r.ex |= uint32(bits) << exBits }
func (r *rawTrace) unmark(bits uint8) { r.ex &^= uint32(bits) << exBits }

// frames is r's frames value (see traceToDict; unused when it has none).
func (r *rawTrace) frames() val {
	switch h := r.has(); {
	case h&hasFramesRef != 0:
		return val{k: kRef, ref: r.fram}
	case h&hasFramesStack != 0:
		return val{k: kStack, ref: r.fram}
	}
	return val{k: kList, ref: r.fram}
}

// extra is 1 + the index of r's rawExtra in graph.extras, 0 for none.
func (r *rawTrace) extra() uint32 { return r.ex & (1<<exBits - 1) }

// setExtra sets r's extra index (see extra).
func (r *rawTrace) setExtra(id uint32) { r.ex = r.ex&^(1<<exBits-1) | id }

const noRef = ^uint32(0)

// actionRef marks, in a helper, a record's action that is a memo entry it
// cannot read: action is actionRef | the entry's index (below actionRef-1,
// so never noRef), and joining resolves it (joiner.actions). An action
// first written after a helper's prefix and before its region ("free_completed"
// after a snapshot's segments) otherwise made every entry of the region
// with it a generic dict, and the region's trace a list of vals.
const actionRef = 1 << 31

// has bits of rawTrace.
const (
	hasAddr = 1 << iota
	hasSize
	hasStream
	hasTime
	hasDevFree
	// hasFramesRef marks, in a helper, a frames value that is a memo
	// entry it cannot read (a kRef: fram is its index); joining resolves
	// it. A real trace shares one frames list among entries with the same
	// stack, so a third of a helper's entries name a list made before its
	// region.
	hasFramesRef
	// hasGeneric marks a record whose dict went back to the generic form
	// (untrace), or never left it (a frames value that is no list, found
	// at the join): a cTraceList holding it binds that dict instead.
	hasGeneric
	// hasFramesStack marks a frames value that is an interned stack with
	// no container (a kStack: fram is the stack's id).
	hasFramesStack
)

// graph is the decoded value graph.
type graph struct {
	strs   []string
	roles  []keyRole // role of each string when used as a dict key
	conts  chunked[container]
	items  chunked[val]
	spills [][]val
	// spilled counts the vals put in spills (the decoder's budget).
	spilled int64
	frames  frameTable
	traces  chunked[rawTrace]
	// extras are the distinct rawExtras of the records, interned by value
	// (extraIDs, and lastExtra for the run of equal ones a real trace
	// has); maxExtras, when set (tests), bounds them below 1<<exBits - 1.
	extras      []rawExtra
	extraIDs    map[rawExtra]uint32
	lastExtra   rawExtra
	lastExtraID uint32
	maxExtras   int
	stacks      stackTable
	// blocks are the block records (kBlock); blockKeys the string ids of
	// their keys as met (address, size, requested_size, state, frames:
	// blockPairs' order).
	blocks    chunked[rawBlock]
	blockKeys [5]uint32
	// blockKeysMet has bit i set once blockKeys[i] is known.
	blockKeysMet uint8
	// allocs0 is heapAllocs when the decode began (see collectAfter).
	allocs0 uint64
	proto   int
	// typed is room for the typed traces, reserved at the last join (see
	// reserveTyped); nil when none was.
	typed []schema.TraceEntry
}

func (g *graph) cont(id uint32) *container { return g.conts.at(id) }

// internExtra returns x's extra index (see rawTrace.extra); ok is false
// when the table is full.
func (g *graph) internExtra(x rawExtra) (id uint32, ok bool) {
	if x == noExtra {
		return 0, true
	}
	if x == g.lastExtra && g.lastExtraID != 0 {
		return g.lastExtraID, true
	}
	id, ok = g.extraIDs[x]
	if !ok {
		limit := 1<<exBits - 1
		if g.maxExtras > 0 {
			limit = g.maxExtras
		}
		if len(g.extras) >= limit {
			return 0, false
		}
		if g.extraIDs == nil {
			g.extraIDs = map[rawExtra]uint32{}
		}
		g.extras = append(g.extras, x)
		id = uint32(len(g.extras))
		g.extraIDs[x] = id
	}
	g.lastExtra, g.lastExtraID = x, id
	return id, true
}

// extraOf is r's rawExtra.
func (g *graph) extraOf(r *rawTrace) rawExtra {
	if id := r.extra(); id != 0 {
		return g.extras[id-1]
	}
	return noExtra
}

// free gives back the trace and block records held off the heap (see
// chunked): after it, nothing may read them. A graph of records on the
// heap only drops them.
func (g *graph) free() {
	g.traces.free()
	g.blocks.free()
}

// setPool makes g's records take their chunks off the heap, from pool. A
// chunk of block records is mapped in small pages as it is written: most
// snapshots have a few thousand blocks, and a chunk holds 65536 (as huge
// pages, a trace's 2000 blocks took 4 MiB of RSS on two machines).
func (g *graph) setPool(pool *offHeapPool) {
	g.traces.pool = pool
	g.blocks.pool, g.blocks.small = pool, true
}

func (g *graph) seq(v val) []val {
	if v.k == kBlock {
		if v = g.blockDictOf(v); v.k == kBlock {
			return g.blockPairs(g.blocks.at(v.ref))
		}
	}
	if v.k == kTrace || v.k == kFrame || v.k == kStack {
		return nil // no container: its ref is a record's, a frame's or a stack's
	}
	c := g.conts.at(v.ref)
	switch {
	case c.kind == cTraceList:
		return g.traceListItems(c)
	case c.n == 0 || c.kind != cGeneric:
		return nil
	case c.spilled:
		return g.spills[c.start][:c.n]
	}
	return g.items.slice(c.start, c.n)
}

// traceDictOf is v, or for a kTrace whose record was given a container
// (decoder.traceDict) that container's val.
func (g *graph) traceDictOf(v val) val {
	if v.k == kTrace {
		if r := g.traces.at(v.ref); r.has()&hasGeneric != 0 {
			return val{k: kDict, ref: r.cid}
		}
	}
	return v
}

// traceVal is record idx as a val: its container's when it has one.
func (g *graph) traceVal(idx uint32) val {
	if cid := g.traces.at(idx).cid; cid != noRef {
		return val{k: kDict, ref: cid}
	}
	return val{k: kTrace, ref: idx}
}

// traceListItems is a cTraceList's items as vals (a fresh slice: only rare
// paths read such a list item by item; the binder reads its records).
func (g *graph) traceListItems(c *container) []val {
	vs := make([]val, c.n)
	for i := range vs {
		vs[i] = g.traceVal(c.start + uint32(i))
	}
	return vs
}

// blockDictOf is v, or for a kBlock whose record was given a container
// (decoder.blockDict) that container's val.
func (g *graph) blockDictOf(v val) val {
	if v.k == kBlock {
		if r := g.blocks.at(v.ref); r.has&blkGeneric != 0 {
			return val{k: kDict, ref: r.cid}
		}
	}
	return v
}

// blockPairs is record r as its dict's key, value pairs (a fresh slice:
// only rare paths read a block generically; the binder reads records). A
// dict's key order is its writer's; the keys here are each met once, so
// the order does not change what the dict says.
func (g *graph) blockPairs(r *rawBlock) []val {
	kv := make([]val, 0, 10)
	key := func(i int) val { return val{k: kStr, ref: g.blockKeys[i]} }
	addr := val{k: kInt, i: int64(r.addr)}
	if r.has&blkUint != 0 {
		addr.k = kUint
	}
	kv = append(kv, key(0), addr)
	if r.has&blkSize != 0 {
		kv = append(kv, key(1), val{k: kInt, i: r.size})
	}
	if r.has&blkReq != 0 {
		kv = append(kv, key(2), val{k: kInt, i: r.req})
	}
	if r.has&blkState != 0 {
		kv = append(kv, key(3), val{k: kStr, ref: r.stateStr})
	}
	if r.has&blkFrames != 0 {
		kv = append(kv, key(4), r.frames())
	}
	return kv
}

// frames is r's frames value (kNone when it has none).
func (r *rawBlock) frames() val {
	if r.fk == kNone {
		return val{}
	}
	return val{k: r.fk, ref: r.fram}
}
