package pickle

import "encoding/binary"

// The fast paths: runs of opcodes that pickle.dump writes for every frame
// dict and frame list of a trace, recognised in the bytes and taken at
// once (each with the same result as running its opcodes one by one,
// which it leaves to the machine whenever anything differs).

// fastList does what EMPTY_LIST, MEMOIZE (see run), then APPENDS's
// tryStack do for a list of n frames interned at start, and returns the
// list: a kStack, fresh (see kStack), or a container for a stack id past
// the memo's range. A helper's stack of placeholders is a kStack too,
// marked (markValue): its join resolves the placeholders to frames, or
// gives up (see internStacks). As containers, these lists were 6 MB of a
// helper's and 6 MB of the main machine's, and a fifth of the join, on a
// frame pool whose frames are first written all along the trace.
func (d *decoder) fastList(start, n uint32) val {
	m := d.memo.len()
	d.memo.push(0)
	return d.fillList(start, n, m)
}

// fillList is fastList for a list whose memo entry m was reserved (a hole)
// before the dicts it holds took theirs.
func (d *decoder) fillList(start, n uint32, m int) val {
	d.puts++
	if start < 1<<29 {
		if d.region && d.g.stacks.isNamed(start) {
			d.g.stacks.markValue(start)
		}
		v := val{k: kStack, ref: start}
		if m < len(d.small) {
			d.small[m] = v
		}
		*d.memo.at(uint32(m)) = memoStack | start
		d.fastLists++
		d.bareLists++
		v.i = int64(m) + 1
		return v
	}
	cid := d.g.conts.push(container{vk: kList})
	v := val{k: kList, ref: cid}
	r, _ := d.memoRef(v) // a list's reference always fits (checked by frameList)
	if m < len(d.small) {
		d.small[m] = v
	}
	*d.memo.at(uint32(m)) = r
	c := d.g.conts.at(cid)
	c.kind, c.start, c.n = cStack, start, n
	d.fastLists++
	return v
}

// hasPlaceholders reports whether a helper's stack holds a frame it could
// name only by memo index (frameMemoRef).
func hasPlaceholders(ids []uint32) bool {
	for _, id := range ids {
		if id&frameMemoRef != 0 {
			return true
		}
	}
	return false
}

// scanSpan finds the end of a run of memo gets closed by APPENDS that
// starts at pos (past the APPENDS), hashing the indices it reads; -1 when
// the run is empty or anything else comes first.
func scanSpan(data []byte, pos, end int) (int, uint64) {
	data = data[:end]
	h := uint64(spanSeed)
	for j := pos; j < len(data); {
		switch data[j] {
		case opLongBinGet:
			if j+5 > len(data) {
				return -1, 0
			}
			h = spanHash(h, binary.LittleEndian.Uint32(data[j+1:j+5]), true)
			j += 5
		case opBinGet:
			if j+2 > len(data) {
				return -1, 0
			}
			h = spanHash(h, uint32(data[j+1]), false)
			j += 2
		case opAppends:
			if j == pos {
				return -1, 0
			}
			return j + 1, h
		default:
			return -1, 0
		}
	}
	return -1, 0
}

// appendPut is the size of the memo put at data[pos] (before end) when it
// adds the memo's next entry: MEMOIZE, or BINPUT or LONG_BINPUT naming the
// next index, as protocols 2 and 3 (and PyTorch's C++ pickler) write what
// protocol 4 writes as MEMOIZE; 0 for any other opcode or index.
func (d *decoder) appendPut(data []byte, pos, end int) int {
	return d.putAt(data, pos, end, d.memo.len())
}

// putAt is appendPut for a put that adds entry next.
func (d *decoder) putAt(data []byte, pos, end, next int) int {
	switch data[pos] {
	case opMemoize:
		return 1
	case opBinPut:
		if pos+2 <= end && int64(data[pos+1]) == d.inputIndex(next) {
			return 2
		}
	case opLongBinPut:
		if pos+5 <= end && int64(binary.LittleEndian.Uint32(data[pos+1:])) == d.inputIndex(next) {
			return 5
		}
	}
	return 0
}

// inputIndex is the index the input gives this machine's memo entry next:
// the same, except in a helper's region, whose entries the machine numbers
// from its prefix's end (refFrom) while the input numbers them from the
// main machine's memo size at the boundary, regionBase (-1, matching no
// put, until learnBase has read it).
func (d *decoder) inputIndex(next int) int64 {
	if !d.region {
		return int64(next)
	}
	if d.regionBase < 0 {
		return -1
	}
	return d.regionBase + int64(next) - d.refFrom
}

// learnBase reads regionBase from a helper's first region put of an
// index, a LONG_BINPUT at data[pos]: it names the region's entry
// memo.len()-refFrom. An index that cannot be one of the region's (below
// refFrom, as every BINPUT's is: see enterRegion) leaves it unknown, and
// the put to the slow path, which stops the helper.
func (d *decoder) learnBase(data []byte, pos, end int) {
	if !d.region || d.regionBase >= 0 || data[pos] != opLongBinPut || pos+5 > end {
		return
	}
	if base := int64(binary.LittleEndian.Uint32(data[pos+1:])) - (int64(d.memo.len()) - d.refFrom); base >= d.refFrom {
		d.regionBase = base
	}
}

// frameDict runs, at once, what follows an EMPTY_DICT when it is a frame
// dict as pickle.dump writes one whose strings were all seen before:
// MEMOIZE MARK, three keys and values that are memo gets or small ints,
// SETITEMS. The dict becomes an interned frame, memoized, exactly as the
// opcodes one by one leave it (see pendingFrame), without pushing its six
// items and reading them back: a trace whose frames are written out in
// full has 30 of them an entry (4.5M in a 79 MiB file, 10 opcodes each).
// pos is just past the EMPTY_DICT, whose materialize has run; ok is false,
// with nothing done, for any other sequence, one that crosses end, or a
// memo get this machine cannot read without side effects (a hole, a
// placeholder, the dict itself), so that the opcodes run one by one.
func (d *decoder) frameDict(data []byte, pos, end int) (v val, next int, ok bool) {
	f, next, ok := d.parseFrameDict(data, pos, end, d.memo.len(), d.memo.len())
	if !ok {
		return val{}, 0, false
	}
	id, ok := d.g.frames.intern(f)
	if !ok {
		return val{}, 0, false
	}
	return d.putFrame(id), next, true
}

// putFrame does what MEMOIZE then pendingFrame's settle leave of a frame
// dict interned as id: the memo entry the dict took, the frame.
func (d *decoder) putFrame(id uint32) val {
	v := val{k: kFrame, ref: id}
	r, _ := d.memoRef(v) // a frame's always fits
	if m := d.memo.len(); m < len(d.small) {
		d.small[m] = v
	}
	d.puts++
	d.memo.push(r)
	d.fastDicts++
	return v
}

// parseFrameDict reads the frame dict frameDict takes at pos, changing
// nothing: its memo gets read only the first memoLen entries, and its put
// adds entry put.
func (d *decoder) parseFrameDict(data []byte, pos, end, memoLen, put int) (f rawFrame, next int, ok bool) {
	if d.noFast || pos >= end {
		return f, 0, false
	}
	p := d.putAt(data, pos, end, put)
	if p == 0 || pos+p >= end || data[pos+p] != opMark {
		return f, 0, false
	}
	var kv [6]val
	j := pos + p + 1
	for k := range kv {
		if j >= end {
			return f, 0, false
		}
		switch data[j] {
		case opBinGet:
			if j+2 > end || int(data[j+1]) >= memoLen {
				return f, 0, false
			}
			kv[k] = d.small[data[j+1]]
			j += 2
		case opLongBinGet:
			if j+5 > end {
				return f, 0, false
			}
			idx := binary.LittleEndian.Uint32(data[j+1 : j+5])
			if int64(idx) >= d.refFrom || int(idx) >= memoLen {
				return f, 0, false
			}
			if idx < smallMemo {
				kv[k] = d.small[idx]
			} else if kv[k], ok = d.memoVal(*d.memo.at(idx)); !ok {
				return f, 0, false
			}
			j += 5
		case opBinInt1:
			if j+2 > end {
				return f, 0, false
			}
			kv[k] = val{k: kInt, i: int64(data[j+1])}
			j += 2
		case opBinInt2:
			if j+3 > end {
				return f, 0, false
			}
			kv[k] = val{k: kInt, i: int64(binary.LittleEndian.Uint16(data[j+1:]))}
			j += 3
		case opBinInt:
			if j+5 > end {
				return f, 0, false
			}
			kv[k] = val{k: kInt, i: int64(int32(binary.LittleEndian.Uint32(data[j+1:])))}
			j += 5
		default:
			return f, 0, false
		}
		if kv[k].k == kUnset {
			return f, 0, false
		}
		if k == 0 && !frameKey(d.g.roles, kv[0]) {
			// Not a frame (a trace entry, a block): left at its first key
			// rather than after reading six items.
			return f, 0, false
		}
	}
	if j >= end || data[j] != opSetItems {
		return f, 0, false
	}
	if f, ok = d.frameOf(kv[:]); !ok {
		return f, 0, false
	}
	return f, j + 1, true
}

// frameKey says whether v is one of a frame dict's keys.
func frameKey(roles []keyRole, v val) bool {
	if v.k != kStr || int(v.ref) >= len(roles) {
		return false
	}
	r := roles[v.ref]
	return r == keyFilename || r == keyLine || r == keyName
}

// stackItem is the value a stack's id stands for: a frame, or in a helper
// a placeholder for one (frameMemoRef).
func stackItem(id uint32) val {
	if id&frameMemoRef != 0 {
		return val{k: kRef, ref: id &^ frameMemoRef}
	}
	return val{k: kFrame, ref: id}
}

// frameList runs, at once, what follows an EMPTY_LIST when it is a frame
// list as pickle.dump writes one: MEMOIZE MARK, then memo gets of frames
// (BINGET or LONG_BINGET) or frame dicts written out as frameDict takes
// them (see listWithFrames), and APPENDS. The list becomes an interned stack,
// exactly as the opcodes one by one would leave it (container, memo entry,
// stack id), without pushing a value per frame and reading them back: a
// real trace has a list of 22 frames for most of its million entries.
// pos is just past the EMPTY_LIST; ok is false, with nothing done, for any
// other sequence, or one that crosses end, reads a memo entry that is not
// a frame yet or that this machine cannot read (the pending dict's), so
// that the opcodes run one by one.
//
// A helper reads a frame made after its prefix (its own too: it does not
// know their indices) as a placeholder; in a stack it keeps the memo index
// (frameMemoRef), which the join resolves. A real snapshot's segments come
// first, and their blocks' frames are most of those the trace reads: with
// many live blocks they reach past the prefix, and without this a
// helper's entries became generic dicts (3x the memory, slower than one
// machine).
func (d *decoder) frameList(data []byte, pos, end int) (next int, list val, ok bool) {
	if d.noFast || pos >= end || d.g.conts.len() >= memoIDMask-2 {
		return 0, val{}, false
	}
	p := d.appendPut(data, pos, end)
	if p == 0 || pos+p >= end || data[pos+p] != opMark {
		return 0, val{}, false
	}
	pos += p - 1 // as if the put were MEMOIZE: the list's items start at pos+2
	from := pos + 2
	if l, ok := d.spans.again(data, from, end); ok {
		// The same bytes as the list before (see spanCache.last).
		d.spans.read(from, from+l.to-l.from, l.start, l.n)
		return from + l.to - l.from, d.fastList(l.start, l.n), true
	}
	var h, key uint64
	spanEnd := -1 // past the APPENDS, when the cache is on and the list is all memo gets
	if !d.spans.off {
		rest := data[pos+2 : end]
		if len(rest) >= spanPrefix {
			// The list most recently read with these first bytes, if its
			// bytes follow in full: the same bytes parse the same way, so
			// no opcode needs reading.
			key = prefixKey(rest)
			if s := d.spans.recent(key, rest); s != nil {
				d.spans.hits++
				d.spans.quick++
				d.spans.read(from, from+len(s.span), s.start, s.n)
				return pos + 2 + len(s.span), d.fastList(s.start, s.n), true
			}
		}
		if spanEnd, h = scanSpan(data, pos+2, end); spanEnd > 0 {
			if s := d.spans.get(h, data[pos+2:spanEnd]); s != nil {
				d.spans.remember(key, *s, len(rest) >= spanPrefix)
				d.spans.read(from, spanEnd, s.start, s.n)
				return spanEnd, d.fastList(s.start, s.n), true
			}
		}
	}
	ids := d.scratch[:0]
	inline, inlineAt := d.inline[:0], d.inlineAt[:0]
	// Read once: nothing below changes them before the APPENDS, and
	// appending to ids keeps the compiler from assuming so (the frame
	// pool's 900k distinct lists are 27M memo reads).
	pend, refFrom, memoLen, memo := int64(d.pendMemo), d.refFrom, int64(d.memo.len()), d.memo.chunks
	// below is where a LONG_BINGET's index needs no other check than the
	// pending dict's: a placeholder (refFrom) or past the memo is rarer.
	below := uint32(min(memoLen, refFrom, 1<<32-1))
	for j := pos + 2; j < end; {
		op := data[j]
		if op == opLongBinGet && j+5 <= end {
			if idx := binary.LittleEndian.Uint32(data[j+1 : j+5]); idx < below && int64(idx) != pend {
				r := memo[idx>>chunkBits][idx&chunkMask]
				if r&^memoIDFrame != memoFrame {
					return 0, val{}, false // not a frame (a stack is 111 in the tag)
				}
				ids = append(ids, r&^memoFrame)
				j += 5
				continue
			}
		}
		switch op {
		case opBinGet:
			if j+2 > end || int64(data[j+1]) == pend {
				return 0, val{}, false
			}
			v := d.small[data[j+1]]
			if v.k != kFrame {
				return 0, val{}, false
			}
			ids = append(ids, v.ref)
			j += 2
		case opLongBinGet:
			if j+5 > end {
				return 0, val{}, false
			}
			idx := binary.LittleEndian.Uint32(data[j+1 : j+5])
			if int64(idx) < refFrom {
				return 0, val{}, false // past the memo, or the pending dict
			}
			if idx&frameMemoRef != 0 {
				return 0, val{}, false
			}
			// Made when the get runs: the memo's entries, the list's,
			// and those of the dicts written out before it in the list
			// (a frame a stack holds twice, the second time a get).
			d.refGap = max(d.refGap, int64(idx)-(memoLen+1+int64(len(inline))))
			ids = append(ids, frameMemoRef|idx)
			j += 5
		case opEmptyDict:
			// A frame dict written out: its first use (read, not
			// done: the list's memo entry comes before its own).
			// The list's entry is memoLen, the dicts' follow it.
			f, next, ok := d.parseFrameDict(data, j+1, end, int(memoLen), int(memoLen)+1+len(inline))
			if !ok {
				return 0, val{}, false
			}
			inline, inlineAt = append(inline, f), append(inlineAt, len(ids))
			ids = append(ids, 0)
			j = next
		case opAppends:
			if len(ids) == 0 {
				return 0, val{}, false
			}
			d.scratch, d.inline, d.inlineAt = ids, inline, inlineAt
			if len(inline) > 0 {
				return d.listWithFrames(ids, inline, inlineAt, j+1)
			}
			start := d.internList(ids)
			if spanEnd == j+1 {
				if s, ok := d.spans.put(h, data[pos+2:spanEnd], start, uint32(len(ids))); ok {
					d.spans.remember(key, s, end-(pos+2) >= spanPrefix)
				}
			}
			d.spans.read(from, j+1, start, uint32(len(ids)))
			return j + 1, d.fastList(start, uint32(len(ids))), true
		default:
			return 0, val{}, false
		}
	}
	return 0, val{}, false
}

// listWithFrames does what the opcodes of a frame list whose frames
// inline were written out in it (at inlineAt among ids) leave, once
// frameList has read them all: the list's memo entry, then each frame's,
// then the interned stack. A frame pool's frames are written where a
// stack first holds them: with 200k frames over 600k entries, a fifth of
// the entries held one and went through run, their dict and list given
// containers. Its spans are not cached: their bytes put to the memo.
func (d *decoder) listWithFrames(ids []uint32, inline []rawFrame, inlineAt []int, next int) (int, val, bool) {
	limit := d.g.frames.limit
	if limit == 0 {
		limit = maxFrameID
	}
	if d.g.frames.len()+len(inline) > limit {
		return 0, val{}, false // the table's error, from run
	}
	m := d.memo.len()
	d.memo.push(0)
	for k, f := range inline {
		id, _ := d.g.frames.intern(f) // room was checked
		d.putFrame(id)
		ids[inlineAt[k]] = id
	}
	return next, d.fillList(d.internList(ids), uint32(len(ids)), m), true
}

// internList interns a frame list's ids: compared with the table's
// (intern) after a wrong claim, else claimed (see claim).
func (d *decoder) internList(ids []uint32) uint32 {
	t := &d.g.stacks
	if d.exact {
		return t.intern(ids)
	}
	t.ready()
	return t.claim(t.hash(ids), ids)
}
