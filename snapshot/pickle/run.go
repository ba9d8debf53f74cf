package pickle

import "encoding/binary"

// run executes the pickle. The opcodes that make up nearly all of a
// snapshot (memo gets, dicts, small ints, SETITEMS/APPENDS) are handled
// inline with the stack and position in locals; everything else goes
// through slowOp.
func (d *decoder) run() (val, error) {
	data := d.data
	pos := d.pos
	stack := d.stack
	end := d.end
	g := d.g
	left := 1 // opcodes until the next cancellation check
	for {
		if left--; left == 0 {
			left = cancelEvery
			if err := d.report(pos); err != nil {
				return val{}, err
			}
			if err := d.checkBudget(pos, len(stack)); err != nil {
				return val{}, err
			}
			if cap(stack) > stackOffHeapMin && !d.stackMoved {
				stack = d.moveStack(stack)
			}
		}
		if pos >= end {
			d.pos, d.stack = pos, stack
			if err := d.atEnd(); err != nil {
				return val{}, err
			}
			data, pos, stack, end = d.data, d.pos, d.stack, d.end
			continue
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
				if int(data[pos-1]) == d.pendMemo {
					d.materialize(stack)
					v = d.small[data[pos-1]]
				} else {
					var err error
					if v, err = d.getMemo(uint32(data[pos-1]), at); err != nil {
						return val{}, err
					}
				}
			}
			stack = append(stack, v)
		case opLongBinGet:
			if pos+4 > len(data) {
				return val{}, d.errf(at, "LONG_BINGET needs 4 bytes but the data ends")
			}
			idx := binary.LittleEndian.Uint32(data[pos:])
			pos += 4
			if int64(idx) >= d.refFrom {
				stack = append(stack, val{k: kRef, ref: idx})
				d.refGap = max(d.refGap, int64(idx)-int64(d.memo.len()))
				break
			}
			if idx < smallMemo {
				if v := d.small[idx]; v.k != kUnset {
					stack = append(stack, v)
					break
				}
			}
			if int64(idx) == int64(d.pendMemo) {
				d.materialize(stack)
			}
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
		case opMemoize, opBinPut, opLongBinPut:
			if op != opMemoize {
				n := 0
				if len(stack) > 0 && len(stack) > d.lastMark() {
					if d.region && d.regionBase < 0 {
						d.learnBase(data, at, end)
					}
					n = d.appendPut(data, at, end)
				}
				if n == 0 {
					// An index other than the next (or nothing to
					// memoize): the general form.
					if d.pendPos >= 0 {
						d.materialize(stack)
					}
					d.pos, d.stack = pos, stack
					if _, _, err := d.slowOp(op, at); err != nil {
						return val{}, err
					}
					pos, stack = d.pos, d.stack
					break
				}
				pos = at + n
			}
			if len(stack) == 0 || len(stack) <= d.lastMark() {
				return val{}, d.errf(at, "MEMOIZE on an empty stack")
			}
			if d.pendPos == len(stack)-1 {
				if d.pendMemo < 0 {
					// The slot stays a hole until the dict is a frame or
					// gets a container.
					d.pendMemo = d.memo.len()
					if d.pendMemo < len(d.small) {
						d.small[d.pendMemo] = val{k: kUnset}
					}
					d.puts++
					d.memo.push(0)
					break
				}
				d.materialize(stack)
			}
			d.unfresh(stack)
			v := stack[len(stack)-1]
			r, ok := d.memoRef(v)
			if !ok {
				return val{}, d.errMemoFull(at)
			}
			if n := d.memo.len(); n < len(d.small) {
				d.small[n] = v
			}
			d.puts++
			d.memo.push(r)
		case opMark:
			d.marks = append(d.marks, len(stack))
		case opEmptyDict:
			d.materialize(stack)
			if v, next, ok := d.frameDict(data, pos, end); ok {
				stack = append(stack, v)
				pos = next
				break
			}
			if next, st, ok := d.traceEntry(data, pos, end, stack); ok {
				pos, stack = next, st
				break
			}
			d.pendPos = len(stack)
			stack = append(stack, val{k: kDict, ref: noRef})
		case opEmptyList:
			if next, list, ok := d.frameList(data, pos, end); ok {
				stack = append(stack, list)
				pos = next
				break
			}
			stack = append(stack, val{k: kList, ref: g.conts.push(container{vk: kList})})
		case opShortBinUni:
			// The strings of a trace entry's values, in the main loop (see
			// slowOp for the others).
			if pos >= len(data) || pos+1+int(data[pos]) > len(data) {
				d.pos, d.stack = at+1, stack
				_, _, err := d.slowOp(op, at) // reports the short read
				return val{}, err
			}
			n := int(data[pos])
			stack = append(stack, val{k: kStr, ref: d.str(data[pos+1 : pos+1+n])})
			pos += 1 + n
		case opLong1:
			// A trace entry's address and time, in the main loop: through
			// slowOp they were 4% of the decode (two an entry).
			if pos >= len(data) || data[pos] > 8 || pos+1+int(data[pos]) > len(data) {
				d.pos, d.stack = pos, stack
				if _, _, err := d.slowOp(op, at); err != nil {
					return val{}, err
				}
				pos, stack = d.pos, d.stack
				break
			}
			n := int(data[pos])
			stack = append(stack, val{k: kInt, i: long1At(data, pos+1, n)})
			pos += 1 + n
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
			if len(d.marks) <= d.floor {
				return val{}, d.errf(at, "SETITEMS without a preceding MARK")
			}
			m := d.marks[len(d.marks)-1]
			d.marks = d.marks[:len(d.marks)-1]
			if m == 0 {
				return val{}, d.errf(at, "SETITEMS with no dict before the MARK")
			}
			kv := stack[m:]
			if len(kv)%2 != 0 {
				return val{}, d.errf(at, "SETITEMS with an odd number of items (%d)", len(kv))
			}
			if d.pendPos >= m-1 {
				if d.pendPos == m-1 && (len(kv) == 6 && d.pendingFrame(stack, kv) || len(kv) >= 4 && d.pendingTrace(stack, kv) || len(kv) >= 2 && d.pendingBlock(stack, kv)) {
					stack = stack[:m]
					break
				}
				d.materialize(stack)
			}
			t := stack[m-1]
			switch t.k {
			case kTrace:
				t = d.traceDict(t.ref)
				stack[m-1] = t
			case kBlock:
				t = d.blockDict(t.ref)
				stack[m-1] = t
			}
			if t.k == kFrame {
				if len(kv) == 0 {
					stack = stack[:m]
					break
				}
				return val{}, d.errFrameChanged(at, "SETITEMS")
			}
			if t.k != kDict {
				return val{}, d.errf(at, "SETITEMS on a %s, not a dict", t.k)
			}
			c := g.conts.at(t.ref)
			if d.giveUpOnDict(c, kv) {
				return val{}, errHelperStop
			}
			if !(c.n == 0 && c.kind == cGeneric && (len(kv) == 6 && d.tryFrame(t.ref, kv) || len(kv) >= 4 && d.tryTrace(t.ref, kv))) && len(kv) > 0 {
				d.extend(t.ref, kv)
			}
			stack = stack[:m]
		case opAppends:
			if len(d.marks) <= d.floor {
				if !d.openBatch || len(d.marks) != d.floor {
					return val{}, d.errf(at, "APPENDS without a preceding MARK")
				}
				// The end of the batch a helper's region started in: its
				// MARK is the one popped, and its items go to kTop.
				d.floor, d.openBatch = 1, false
			}
			m := d.marks[len(d.marks)-1]
			d.marks = d.marks[:len(d.marks)-1]
			if m == 0 {
				return val{}, d.errf(at, "APPENDS with nothing to add to")
			}
			if d.pendPos >= m-1 {
				d.materialize(stack)
			}
			t := stack[m-1]
			if t.k == kStack {
				var err error
				if t, err = d.stackList(stack, m-1, at, "APPENDS"); err != nil {
					return val{}, err
				}
			}
			if t.k == kTop {
				d.pos, d.stack = pos, stack[:m]
				if err := d.appendBelow(stack[m:]); err != nil {
					return val{}, err
				}
				stack = d.stack
				break
			}
			if t.k != kList {
				return val{}, d.errf(at, "APPENDS to a %s, not a list", t.k)
			}
			if items := stack[m:]; len(items) > 0 {
				d.appendItems(t.ref, items)
			}
			stack = stack[:m]
		default:
			if d.pendPos >= 0 && !pushOnly[op] {
				d.materialize(stack)
			}
			d.pos, d.stack = pos, stack
			stop, v, err := d.slowOp(op, at)
			if err != nil || stop {
				return v, err
			}
			pos, stack = d.pos, d.stack
		}
	}
}
