package pickle

import "encoding/binary"

// The trace entry's fast path: a trace entry's dict, with its frame list
// (fastpath.go), taken at once from the bytes.

// traceEntry runs, at once, the opcodes of a trace entry's dict as
// pickle.dump writes one, from just past its EMPTY_DICT (whose
// materialize has run): MEMOIZE MARK, then keys and values that are memo
// gets, small ints, LONG1s of up to 8 bytes, strings (memoized or not)
// and a frame list (frameList), and SETITEMS, which makes the dict a trace
// record (pendingTrace). Through run's dispatch, sixteen opcodes an entry
// were a sixth of a trace's decode.
//
// Each opcode does exactly what run does with it, so the loop may stop
// before any opcode it does not take (another opcode, a memo get of the
// pending dict or of a placeholder, one that crosses end, a list that is
// not frames, a dict that is not a trace entry, traceItemsMax items
// pushed): run goes on from next with the machine as the opcodes so far
// left it. ok is false, with nothing done, unless the dict's first key is
// a memo get of "action", so that other dicts (segments, blocks) take
// run's way from their EMPTY_DICT.
func (d *decoder) traceEntry(data []byte, pos, end int, stack []val) (next int, out []val, ok bool) {
	if d.noFast || pos >= end || d.pendPos >= 0 {
		return 0, nil, false
	}
	p := d.appendPut(data, pos, end)
	if p == 0 || pos+p+1 >= end || data[pos+p] != opMark {
		return 0, nil, false
	}
	j := pos + p + 1
	first, n, ok := d.traceGet(data, j, end)
	if !ok || first.k != kStr || int(first.ref) >= len(d.g.roles) || d.g.roles[first.ref] != keyAction {
		return 0, nil, false
	}
	// EMPTY_DICT: the pending dict; its put (as MEMOIZE, see run); MARK.
	d.pendPos = len(stack)
	stack = append(stack, val{k: kDict, ref: noRef})
	d.pendMemo = d.memo.len()
	if d.pendMemo < len(d.small) {
		d.small[d.pendMemo] = val{k: kUnset}
	}
	d.puts++
	d.memo.push(0)
	m := len(stack)
	d.marks = append(d.marks, m)
	stack = append(stack, first)
	j += n
	for j < end {
		op := data[j]
		if len(stack)-m >= traceItemsMax && op != opSetItems {
			return j, stack, true
		}
		switch op {
		case opBinGet:
			// traceGet's cases, written out here: with a call per
			// item (traceGet does not inline) BenchmarkDecodeFile was
			// 7-10% slower (bigtrain, the 166 MiB pool).
			if j+2 > end {
				return j, stack, true
			}
			v := d.small[data[j+1]]
			if v.k == kUnset {
				return j, stack, true
			}
			stack = append(stack, v)
			j += 2
		case opLongBinGet:
			if j+5 > end {
				return j, stack, true
			}
			idx := binary.LittleEndian.Uint32(data[j+1:])
			var v val
			switch {
			case int64(idx) >= d.refFrom:
				return j, stack, true
			case idx < smallMemo:
				v = d.small[idx]
			case int64(idx) == int64(d.pendMemo) || int(idx) >= d.memo.len():
				return j, stack, true
			default:
				var ok bool
				if v, ok = d.memoVal(*d.memo.at(idx)); !ok {
					return j, stack, true
				}
			}
			if v.k == kUnset {
				return j, stack, true
			}
			stack = append(stack, v)
			j += 5
		case opBinInt1:
			if j+2 > end {
				return j, stack, true
			}
			stack = append(stack, val{k: kInt, i: int64(data[j+1])})
			j += 2
		case opBinInt2:
			if j+3 > end {
				return j, stack, true
			}
			stack = append(stack, val{k: kInt, i: int64(binary.LittleEndian.Uint16(data[j+1:]))})
			j += 3
		case opBinInt:
			if j+5 > end {
				return j, stack, true
			}
			stack = append(stack, val{k: kInt, i: int64(int32(binary.LittleEndian.Uint32(data[j+1:])))})
			j += 5
		case opLong1:
			if j+2 > end || data[j+1] > 8 || j+2+int(data[j+1]) > end {
				return j, stack, true
			}
			n := int(data[j+1])
			var i int64
			if j+10 <= len(data) {
				shift := uint(64 - 8*n) // long1At, written out as the gets are
				i = int64(binary.LittleEndian.Uint64(data[j+2:])<<shift) >> shift
			} else {
				i = long8(data[j+2 : j+2+n])
			}
			stack = append(stack, val{k: kInt, i: i})
			j += 2 + n
		case opShortBinUni:
			if j+2 > end || j+2+int(data[j+1]) > end {
				return j, stack, true
			}
			n := int(data[j+1])
			stack = append(stack, val{k: kStr, ref: d.str(data[j+2 : j+2+n])})
			j += 2 + n
		case opMemoize, opBinPut, opLongBinPut:
			// A put of the value before, the memo's next entry (a new
			// compile_context string).
			n := d.appendPut(data, j, end)
			if n == 0 || len(stack) <= m {
				return j, stack, true
			}
			d.unfresh(stack)
			r, ok := d.memoRef(stack[len(stack)-1])
			if !ok {
				return j, stack, true // run reports the full memo
			}
			if k := d.memo.len(); k < len(d.small) {
				d.small[k] = stack[len(stack)-1]
			}
			d.puts++
			d.memo.push(r)
			j += n
		case opEmptyList:
			next, list, ok := d.frameList(data, j+1, end)
			if !ok {
				return j, stack, true
			}
			stack = append(stack, list)
			j = next
		case opSetItems:
			kv := stack[m:]
			if len(kv)%2 != 0 || len(kv) < 4 || !d.pendingTrace(stack, kv) {
				return j, stack, true
			}
			d.marks = d.marks[:len(d.marks)-1]
			d.fastTraces++
			return j + 1, stack[:m], true
		default:
			return j, stack, true
		}
	}
	return j, stack, true
}

// traceItemsMax is the most items traceEntry pushes: a trace entry has
// at most 18 (9 keys), and a dict of more, which is no trace entry, goes
// on in run, where the decoder's budget and cancellation are checked.
const traceItemsMax = 32

// traceGet is the value of the memo get (BINGET or LONG_BINGET) at
// data[j] and its size, when run would push it as it is: not a hole, the
// pending dict or a helper's placeholder. traceEntry's loop has the same
// cases written out; a change here belongs there too.
func (d *decoder) traceGet(data []byte, j, end int) (val, int, bool) {
	switch data[j] {
	case opBinGet:
		if j+2 > end {
			return val{}, 0, false
		}
		v := d.small[data[j+1]]
		return v, 2, v.k != kUnset
	case opLongBinGet:
		if j+5 > end {
			return val{}, 0, false
		}
		idx := binary.LittleEndian.Uint32(data[j+1:])
		switch {
		case int64(idx) >= d.refFrom:
			return val{}, 0, false
		case idx < smallMemo:
			v := d.small[idx]
			return v, 5, v.k != kUnset
		case int64(idx) == int64(d.pendMemo) || int(idx) >= d.memo.len():
			return val{}, 0, false
		}
		v, ok := d.memoVal(*d.memo.at(idx))
		return v, 5, ok
	}
	return val{}, 0, false
}

// long1At reads a LONG1's n (at most 8) bytes at data[p:]: with one load,
// its bytes past the number shifted out, where 8 bytes are there to load.
func long1At(data []byte, p, n int) int64 {
	if p+8 <= len(data) {
		shift := uint(64 - 8*n)
		return int64(binary.LittleEndian.Uint64(data[p:])<<shift) >> shift
	}
	return decodeLong(data[p : p+n]).i
}
