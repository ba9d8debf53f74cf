package pickle

import (
	"slices"

	"memscope/snapshot/schema"
)

// Recognising the bulk of a snapshot while decoding: frame dicts, frame
// lists and trace entries become compact records (see graph.go), and go
// back to the generic form when a pickle keeps adding to them.

// unframe turns a recognised frame back into a generic dict, for the rare
// pickle that adds items to a frame dict after filling it.
func (d *decoder) unframe(cid uint32) {
	c := d.g.conts.at(cid)
	kv := d.frameItems(d.g.frames.at(c.start))
	*c = container{vk: kDict}
	d.extend(cid, kv[:])
}

// frameItems is a frame as the key, value pairs of its dict.
func (d *decoder) frameItems(f rawFrame) [6]val {
	return [6]val{
		{k: kStr, ref: d.str([]byte("filename"))}, {k: kStr, ref: f.file},
		{k: kStr, ref: d.str([]byte("line"))}, {k: kInt, i: f.line},
		{k: kStr, ref: d.str([]byte("name"))}, {k: kStr, ref: f.name},
	}
}

// materialize gives the pending dict a container, because it is used as
// something other than a frame: filled with other keys, added to a list
// while empty, read from the memo before it is filled. stack is the
// machine's current stack.
func (d *decoder) materialize(stack []val) {
	if d.pendPos < 0 {
		return
	}
	d.settle(stack, val{k: kDict, ref: d.g.conts.push(container{vk: kDict})})
}

// settle makes v what the pending dict is: on stack and in the memo slot
// MEMOIZE reserved for it.
func (d *decoder) settle(stack []val, v val) {
	stack[d.pendPos] = v
	if d.pendMemo >= 0 {
		// A reference fits the memo unless the memo is full, which
		// leaves the slot a hole: reading it is then an error.
		if r, ok := d.memoRef(v); ok {
			*d.memo.at(uint32(d.pendMemo)) = r
			if d.pendMemo < len(d.small) {
				d.small[d.pendMemo] = v
			}
		}
	}
	d.pendPos, d.pendMemo = -1, -1
}

// pendingFrame makes the pending dict, at the top of stack below kv, a
// frame when kv holds exactly a frame's keys; false leaves it pending.
func (d *decoder) pendingFrame(stack, kv []val) bool {
	id, ok := d.frameID(kv)
	if !ok {
		return false
	}
	d.settle(stack, val{k: kFrame, ref: id})
	return true
}

// errFrameChanged refuses a pickle that adds to a frame dict after filling
// it. Frames are values here (see pendingFrame), so a change could not reach
// the copies already in stacks; pickle.dump never writes such a change.
func (d *decoder) errFrameChanged(at int, op string) error {
	return d.errf(at, "%s adds to a frame dict that was already filled; memscope reads frames as values and does not support changing them (a limit of its reader; pickle.dump never writes this)", op)
}

// pushOnly marks the opcodes outside run's hot loop that only push a new
// value (or do nothing to the stack): they leave a pending dict pending.
var pushOnly = func() (t [256]bool) {
	for _, op := range []byte{opNone, opNewTrue, opNewFalse, opLong1, opLong4, opBinFloat,
		opShortBinUni, opShortBinBytes, opBinUnicode, opBinBytes, opBinUnicode8, opBinBytes8,
		opByteArray8, opEmptyTuple, opEmptySet, opFrame, opProto} {
		t[op] = true
	}
	return t
}()

// untrace turns a recognised trace entry back into a generic dict, for the
// rare pickle that adds items to it after filling it.
func (d *decoder) untrace(cid uint32) {
	g := d.g
	c := g.conts.at(cid)
	g.traces.at(c.start).mark(hasGeneric) // a cTraceList may hold it
	r := *g.traces.at(c.start)
	d.traceToDict(cid, &r, r.frames())
}

// traceToDict makes container cid the generic dict of trace record r, whose
// frames value is frames (unused when r has none).
func (d *decoder) traceToDict(cid uint32, r *rawTrace, frames val) {
	g := d.g
	x := g.extraOf(r)
	key := func(s string) val { return val{k: kStr, ref: d.str([]byte(s))} }
	kv := []val{key("action"), {k: kStr, ref: r.action}}
	if r.action&actionRef != 0 {
		kv[1] = val{k: kRef, ref: r.action &^ actionRef}
	}
	ints := []struct {
		name string
		bit  uint8
		v    int64
	}{{"addr", hasAddr, int64(r.addr)}, {"size", hasSize, r.size}, {"stream", hasStream, int64(x.stream)},
		{"time_us", hasTime, r.time}, {"device_free", hasDevFree, x.devFree}}
	for _, f := range ints {
		if r.has()&f.bit != 0 {
			kv = append(kv, key(f.name), val{k: kInt, i: f.v})
		}
	}
	for _, f := range []struct {
		name string
		v    val
	}{{"compile_context", val{k: kStr, ref: x.cc}}, {"user_metadata", val{k: kStr, ref: x.um}}, {"frames", frames}} {
		if f.v.ref != noRef || f.v.k == kRef {
			kv = append(kv, key(f.name), f.v)
		}
	}
	c := g.conts.at(cid)
	*c = container{vk: kDict}
	d.extend(cid, kv)
}

// traceRun reports whether items are trace dicts whose records follow one
// another from record next on (first is the first one's).
func (d *decoder) traceRun(items []val, next uint32, any bool) (first uint32, ok bool) {
	g := d.g
	for i, it := range items {
		var rec uint32
		switch {
		case it.k == kTrace && g.traces.at(it.ref).has()&hasGeneric == 0:
			rec = it.ref
		case it.k == kDict && it.ref != noRef && g.conts.at(it.ref).kind == cTrace:
			rec = g.conts.at(it.ref).start
		default:
			return 0, false
		}
		if i == 0 {
			first = rec
			if !any && first != next {
				return 0, false
			}
			next = first
		}
		if rec != next {
			return 0, false
		}
		next++
	}
	return first, true
}

// tryTraceList makes a fresh list whose first items are consecutive trace
// records a cTraceList.
func (d *decoder) tryTraceList(cid uint32, items []val) bool {
	first, ok := d.traceRun(items, 0, true)
	if !ok {
		return false
	}
	c := d.g.conts.at(cid)
	c.kind, c.start, c.n = cTraceList, first, uint32(len(items))
	return true
}

// growTraceList adds items to a cTraceList when they continue its run.
func (d *decoder) growTraceList(c *container, items []val) bool {
	if _, ok := d.traceRun(items, c.start+c.n, false); !ok {
		return false
	}
	c.n += uint32(len(items))
	return true
}

// untraceList turns a cTraceList back into a generic list.
func (d *decoder) untraceList(cid uint32) {
	c := d.g.conts.at(cid)
	vs := d.g.traceListItems(c)
	*c = container{vk: kList}
	d.extend(cid, vs)
}

// unstack turns an interned frame list back into a generic list of frames,
// for a list that gets more items after its first batch.
func (d *decoder) unstack(cid uint32) {
	c := d.g.conts.at(cid)
	ids := d.g.stacks.get(c.start)
	vs := make([]val, len(ids))
	for i, id := range ids {
		vs[i] = stackItem(id)
	}
	*c = container{vk: kList}
	d.extend(cid, vs)
}

// tryTrace stores a freshly filled dict as a rawTrace when it holds only
// the trace-entry keys memscope knows, with the expected value types; any
// other key or type keeps the generic form (and its warnings).
func (d *decoder) tryTrace(cid uint32, kv []val) bool {
	r := d.g.traces.next()
	if !d.traceRecord(r, kv) {
		d.g.traces.abandon()
		return false
	}
	r.cid = cid
	c := d.g.conts.at(cid)
	c.kind = cTrace
	c.start = d.g.traces.commit()
	return true
}

// pendingTrace makes the pending dict, at the top of stack below kv, a
// trace record with no container (a kTrace val) when kv is a trace
// entry's (see tryTrace); false leaves it pending.
func (d *decoder) pendingTrace(stack, kv []val) bool {
	if kv[0].k != kStr || d.g.roles[kv[0].ref] != keyAction {
		// Not a trace entry (a block, a segment): no record to reserve
		// and give back, which for 300k blocks was 4 ms of CPU.
		return false
	}
	r := d.g.traces.next()
	if !d.traceRecord(r, kv) {
		d.g.traces.abandon()
		return false
	}
	r.cid = noRef
	d.settle(stack, val{k: kTrace, ref: d.g.traces.commit()})
	return true
}

// noteActionRef records that a record's action names memo entry idx (see
// actionRef); false, with nothing recorded, for a distinct entry past
// actionRefsMax. A helper meets few such entries, each in many records.
func (d *decoder) noteActionRef(idx uint32) bool {
	if n := len(d.actionRefs); n > 0 && d.actionRefs[n-1] == idx || slices.Contains(d.actionRefs, idx) {
		return true
	}
	if len(d.actionRefs) >= actionRefsMax {
		return false
	}
	d.actionRefs = append(d.actionRefs, idx)
	return true
}

// actionRefsMax bounds the distinct actions a helper reads as
// placeholders: PyTorch writes nine actions, and a hostile file of a
// distinct one an entry would make each record's search linear. The
// entries past it stay generic dicts, as before placeholders.
const actionRefsMax = 64

// traceDict gives trace record idx's dict a container, once, for a pickle
// that changes the entry after filling it (SETITEM on a memo read of it):
// the record is then bound from the container, which every list and memo
// entry holding the record reads through it.
func (d *decoder) traceDict(idx uint32) val {
	r := d.g.traces.at(idx)
	if r.has()&hasGeneric != 0 {
		return val{k: kDict, ref: r.cid}
	}
	cid := d.g.conts.push(container{vk: kDict})
	r.cid = cid
	r.mark(hasGeneric)
	rr := *r
	d.traceToDict(cid, &rr, rr.frames())
	return val{k: kDict, ref: cid}
}

// traceRecord reads kv as a trace entry's keys and values into r (see
// tryTrace), in place: the next record of the array, which the caller
// abandons when it says false. Built and returned, the 40-byte record was copied
// twice for each of a million entries.
func (d *decoder) traceRecord(r *rawTrace, kv []val) bool {
	roles := d.g.roles
	if kv[0].k != kStr || roles[kv[0].ref] != keyAction {
		return false
	}
	*r = rawTrace{action: noRef, fram: noRef}
	x := noExtra
	var has uint8
	for j := 0; j < len(kv); j += 2 {
		k, v := &kv[j], &kv[j+1]
		if k.k != kStr {
			return false
		}
		ok := true
		switch roles[k.ref] {
		case keyAction:
			switch {
			case v.k == kStr:
				r.action = v.ref
			case v.k == kRef && v.ref < actionRef-1 && d.noteActionRef(v.ref):
				r.action = actionRef | v.ref
			default:
				ok = false
			}
		case keyAddr:
			// A negative address is no address: the generic form keeps it
			// (and the binder says what is wrong) rather than wrap it.
			r.addr, ok = uint64(v.i), (v.k == kInt && v.i >= 0) || v.k == kUint
			has |= hasAddr
		case keyStream:
			x.stream, ok = uint64(v.i), (v.k == kInt && v.i >= 0) || v.k == kUint
			has |= hasStream
		case keySize:
			r.size, ok = v.i, v.k == kInt && v.i >= 0
			has |= hasSize
		case keyTimeUS:
			r.time, ok = v.i, v.k == kInt
			has |= hasTime
		case keyDeviceFree:
			x.devFree, ok = v.i, v.k == kInt
			has |= hasDevFree
		case keyCompileContext:
			x.cc, ok = v.ref, v.k == kStr
		case keyUserMetadata:
			x.um, ok = v.ref, v.k == kStr
		case keyFrames:
			r.fram, ok = v.ref, v.k == kList || v.k == kRef || v.k == kStack
			// A key met again replaces its value (CPython's dict): what
			// the first frames value was must not stay in has.
			has &^= hasFramesRef | hasFramesStack
			switch v.k {
			case kRef:
				has |= hasFramesRef
			case kStack:
				has |= hasFramesStack
			}
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
	id, ok := d.g.internExtra(x)
	if !ok {
		return false // a table of extras that is full: the generic form
	}
	r.setExtra(id)
	r.mark(has)
	return true
}

// stackList gives the frame list at stack[pos], a kStack, a container, for
// a pickle that adds items to it (op): allowed for the fresh list, whose
// memo slot then names the container (pickle.dump writes a list of more
// than 1000 items in batches); refused for a copy (a memo read, a DUP),
// whose other copies are values that could not see the change.
func (d *decoder) stackList(stack []val, pos, at int, op string) (val, error) {
	v := stack[pos]
	if v.i == 0 {
		return val{}, d.errf(at, "%s adds to a list of frames that was already used elsewhere; memscope reads such lists as values and does not support changing them (a limit of its reader; pickle.dump never writes this)", op)
	}
	cid := d.g.conts.push(container{vk: kList, kind: cStack, start: v.ref, n: uint32(len(d.g.stacks.get(v.ref)))})
	lv := val{k: kList, ref: cid}
	stack[pos] = lv
	d.bareLists--
	if slot := uint32(v.i - 1); int(slot) < d.memo.len() && *d.memo.at(slot) == memoStack|v.ref {
		if r, ok := d.memoRef(lv); ok {
			*d.memo.at(slot) = r
			if int(slot) < len(d.small) {
				d.small[slot] = lv
			}
		}
	}
	return lv, nil
}

// unfresh marks the value at the top of the stack, which is being copied
// (DUP, MEMOIZE, PUT), as no longer the only copy (see stackList).
func (d *decoder) unfresh(stack []val) {
	if n := len(stack); n > 0 && stack[n-1].k == kStack {
		stack[n-1].i = 0
	}
}

// tryStack interns a fresh list whose items are all recognised frames.
func (d *decoder) tryStack(cid uint32, items []val) bool {
	ids := d.scratch[:0]
	for _, it := range items {
		switch {
		case it.k == kFrame:
			ids = append(ids, it.ref)
		case it.k == kRef && it.ref&frameMemoRef == 0:
			// A helper's read of a frame made after its prefix, among
			// frames it made itself (see frameList).
			ids = append(ids, frameMemoRef|it.ref)
		case it.k == kDict:
			c := d.g.conts.at(it.ref)
			if c.kind != cFrame {
				return false
			}
			ids = append(ids, c.start)
		default:
			return false
		}
	}
	d.scratch = ids
	c := d.g.conts.at(cid)
	c.kind = cStack
	c.start = d.g.stacks.intern(ids)
	c.n = uint32(len(ids))
	return true
}

// tryFrame makes a freshly filled 3-key dict container a frame when its keys
// are exactly filename, line and name with the expected value types.
func (d *decoder) tryFrame(cid uint32, kv []val) bool {
	id, ok := d.frameID(kv)
	if !ok {
		return false
	}
	c := d.g.conts.at(cid)
	c.kind, c.start = cFrame, id
	return true
}

// frameID interns the frame a dict's 3 key, value pairs hold; false when
// they are not a frame or the frame table is full.
func (d *decoder) frameID(kv []val) (uint32, bool) {
	f, ok := d.frameOf(kv)
	if !ok {
		return 0, false
	}
	return d.g.frames.intern(f)
}

// frameOf reads a frame from a dict's 3 key, value pairs: its keys must be
// exactly filename, line and name, with the expected value types.
func (d *decoder) frameOf(kv []val) (rawFrame, bool) {
	// A writer puts the keys of every frame in the same order, as the same
	// memoized strings: when they match the last frame's, the values'
	// places are known.
	k := &d.frameKeys
	if kv[0].ref == k.ids[0] && kv[2].ref == k.ids[1] && kv[4].ref == k.ids[2] &&
		kv[0].k == kStr && kv[2].k == kStr && kv[4].k == kStr {
		file, name, line := kv[k.file], kv[k.name], kv[k.line]
		if file.k == kStr && name.k == kStr {
			switch line.k {
			case kInt:
				return rawFrame{file: file.ref, name: name.ref, line: line.i}, true
			case kUint, kHuge:
				return rawFrame{file: file.ref, name: name.ref, line: -1}, true
			}
		}
	}
	f, ok := d.frameBySwitch(kv)
	if ok {
		k.ids = [3]uint32{kv[0].ref, kv[2].ref, kv[4].ref}
		for j := 0; j < 6; j += 2 {
			switch d.g.roles[kv[j].ref] {
			case keyFilename:
				k.file = uint8(j + 1)
			case keyName:
				k.name = uint8(j + 1)
			case keyLine:
				k.line = uint8(j + 1)
			}
		}
	}
	return f, ok
}

// frameKeys is the key layout of the last frame dict read: the string ids
// of its keys in order, and where each value sits among the 6 items.
type frameKeys struct {
	ids              [3]uint32
	file, name, line uint8
}

// frameBySwitch is frameOf for any key layout.
func (d *decoder) frameBySwitch(kv []val) (rawFrame, bool) {
	var f rawFrame
	var got uint8
	for j := 0; j < 6; j += 2 {
		k, v := kv[j], kv[j+1]
		if k.k != kStr {
			return f, false
		}
		switch d.g.roles[k.ref] {
		case keyFilename:
			if v.k != kStr {
				return f, false
			}
			f.file = v.ref
			got |= 1
		case keyName:
			if v.k != kStr {
				return f, false
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
				return f, false
			}
			got |= 4
		default:
			return f, false
		}
	}
	return f, got == 7
}

// pendingBlock makes the pending dict, at the top of stack below kv, a
// block record with no container (a kBlock val) when kv is a block's (see
// blockRecord); false leaves it pending. A helper's records are renumbered
// at the join (copyBlocks).
func (d *decoder) pendingBlock(stack, kv []val) bool {
	if d.noBlocks || kv[0].k != kStr || d.g.roles[kv[0].ref] != keyAddress {
		return false
	}
	r := d.g.blocks.next()
	if !d.blockRecord(r, kv) {
		d.g.blocks.abandon()
		return false
	}
	d.settle(stack, val{k: kBlock, ref: d.g.blocks.commit()})
	return true
}

// blockRecord reads kv as a block's keys and values into r, in place (the
// caller abandons it on false): the address first (the key that tells a
// block from a segment, whose first key is the device), then any of size,
// requested_size, state and frames, each once, with the values the binder
// reads without a word to say: an int address, sizes that are ints of at
// least 0, a state it knows, frames that are None, an interned stack or a
// list. Any other key, type or a key met twice keeps the generic form,
// whose binding warns or fails as it always did.
func (d *decoder) blockRecord(r *rawBlock, kv []val) bool {
	g := d.g
	*r = rawBlock{cid: noRef}
	for j := 0; j < len(kv); j += 2 {
		k, v := &kv[j], &kv[j+1]
		if k.k != kStr {
			return false
		}
		var bit uint8
		key := 0 // its place in blockKeyRoles
		switch g.roles[k.ref] {
		case keyAddress:
			if j != 0 {
				return false // met twice
			}
			switch v.k {
			case kInt:
			case kUint:
				r.has |= blkUint
			default:
				return false
			}
			r.addr = uint64(v.i)
		case keySize:
			if v.k != kInt || v.i < 0 {
				return false
			}
			bit, key, r.size = blkSize, 1, v.i
		case keyRequestedSize:
			if v.k != kInt || v.i < 0 {
				return false
			}
			bit, key, r.req = blkReq, 2, v.i
		case keyState:
			if v.k != kStr {
				return false
			}
			st, ok := d.blockState(v.ref)
			if !ok {
				return false
			}
			bit, key, r.state, r.stateStr = blkState, 3, st, v.ref
		case keyFrames:
			switch v.k {
			case kNone, kStack, kList, kTuple:
			default:
				return false
			}
			bit, key, r.fk, r.fram = blkFrames, 4, v.k, v.ref
		default:
			return false
		}
		if r.has&bit != 0 {
			return false // met twice
		}
		r.has |= bit
		g.blockKeys[key] = k.ref // one string per role: the same every time
		g.blockKeysMet |= 1 << key
	}
	return true
}

// stateID is a block state's string id and the state it names.
type stateID struct {
	id    uint32
	state schema.BlockState
	known bool
}

// stateCacheMax bounds the states blockState remembers: a snapshot has
// four; past it (a hostile file's thousands) each is parsed again.
const stateCacheMax = 16

// blockState is the state string id names, from the few a snapshot has.
func (d *decoder) blockState(id uint32) (schema.BlockState, bool) {
	for _, s := range d.states {
		if s.id == id {
			return s.state, s.known
		}
	}
	st, ok := schema.ParseState(d.g.strs[id])
	if len(d.states) < stateCacheMax {
		d.states = append(d.states, stateID{id, st, ok})
	}
	return st, ok
}

// blockDict gives block record idx's dict a container, once, for a pickle
// that changes the block after filling it (SETITEM on a memo read of it):
// every list and memo entry holding the record then reads the container.
func (d *decoder) blockDict(idx uint32) val {
	r := d.g.blocks.at(idx)
	if r.has&blkGeneric == 0 {
		kv := d.g.blockPairs(r)
		r.cid = d.g.conts.push(container{vk: kDict})
		r.has |= blkGeneric
		d.extend(r.cid, kv)
	}
	return val{k: kDict, ref: r.cid}
}
