package pickle

import "encoding/binary"

// Walking opcodes without running them, to find where a helper can start
// (helper.go).

// opArg is how many argument bytes follow each opcode a walk may cross;
// argLen1, argLen4 and argLen8 mark a length of that many bytes followed by
// that many bytes (argLong4 a signed one), and argStop an opcode that ends
// the walk: PUT (a text index), opcodes from protocols 0 and 1, refused and
// unknown ones.
var opArg = func() (t [256]int8) {
	for i := range t {
		t[i] = argStop
	}
	for _, op := range []byte{opMark, opPop, opPopMark, opDup, opNone, opAppend, opDict, opEmptyDict,
		opAppends, opList, opEmptyList, opSetItem, opTuple, opEmptyTuple, opSetItems, opTuple1, opTuple2,
		opTuple3, opNewTrue, opNewFalse, opEmptySet, opAddItems, opFrozenSet, opMemoize} {
		t[op] = 0
	}
	for op, n := range map[byte]int8{opBinInt: 4, opBinInt1: 1, opBinInt2: 2, opBinGet: 1, opLongBinGet: 4,
		opBinPut: 1, opLongBinPut: 4,
		opBinFloat: 8, opProto: 1, opFrame: 8} {
		t[op] = n
	}
	for op, n := range map[byte]int8{opLong1: argLen1, opShortBinUni: argLen1, opShortBinBytes: argLen1,
		opLong4: argLong4, opBinUnicode: argLen4, opBinBytes: argLen4,
		opBinUnicode8: argLen8, opBinBytes8: argLen8, opByteArray8: argLen8} {
		t[op] = n
	}
	return t
}()

const (
	argLen1 = -1 - iota
	argLen4
	argLong4
	argLen8
	argStop
)

// opSize is the size of the opcode at pos with its arguments; false for an
// opcode opArg stops at, or one whose arguments run past the end of data.
func opSize(data []byte, pos int) (int, bool) {
	n := int(opArg[data[pos]])
	switch a := opArg[data[pos]]; {
	case a >= 0:
	case a == argLen1:
		if pos+2 > len(data) {
			return 0, false
		}
		n = 1 + int(data[pos+1])
	case a == argLen4 || a == argLong4:
		if pos+5 > len(data) {
			return 0, false
		}
		m := binary.LittleEndian.Uint32(data[pos+1:])
		if a == argLong4 && int32(m) < 0 {
			return 0, false
		}
		n = 4 + int(m)
	case a == argLen8:
		if pos+9 > len(data) {
			return 0, false
		}
		m := binary.LittleEndian.Uint64(data[pos+1:])
		if m > uint64(len(data)) {
			return 0, false
		}
		n = 8 + int(m)
	default:
		return 0, false
	}
	if 1+n > len(data)-pos {
		return 0, false
	}
	return 1 + n, true
}

// walkPuts walks the opcodes of d.data from d.pos (a boundary) to to,
// running only their memo puts: a string or bytes value put right after it
// is written gets its entry, any other value a hole, which a helper's
// region reads as a placeholder (see getMemo). A helper walks a
// snapshot's segments this way, in a fifth of the time a decode of them
// takes, for the strings its region reads: the trace's keys are first
// written at the trace's start, past the segments (see runPrefix). false,
// with d.pos past the last put run, when an opcode cannot be sized, a put
// is refused, or the walk does not end at to.
func (d *decoder) walkPuts(to int) bool {
	data := d.data[:to]
	pos, str := d.pos, -1 // str: where the string just before starts
	defer func() { d.pos = pos }()
	for pos < len(data) {
		op := data[pos]
		n, ok := opSize(data, pos)
		if !ok {
			return false
		}
		switch op {
		case opShortBinUni, opShortBinBytes, opBinUnicode, opBinBytes, opBinUnicode8, opBinBytes8, opByteArray8:
			str = pos
			pos += n
			continue
		case opFrame:
			// A frame's header: its opcodes follow.
			pos += n
			continue
		case opMemoize, opBinPut, opLongBinPut:
			idx := uint32(d.memo.len())
			switch op {
			case opBinPut:
				idx = uint32(data[pos+1])
			case opLongBinPut:
				idx = binary.LittleEndian.Uint32(data[pos+1:])
			}
			if !d.walkPut(idx, data, str) {
				return false
			}
		}
		str = -1
		pos += n
	}
	return pos == to
}

// walkPut runs the put of memo index idx for walkPuts: str is where the
// string opcode just before it starts in data, or -1 (a hole).
func (d *decoder) walkPut(idx uint32, data []byte, str int) bool {
	if str >= 0 {
		op := data[str]
		var b []byte
		switch op {
		case opShortBinUni, opShortBinBytes:
			b = data[str+2 : str+2+int(data[str+1])]
		case opBinUnicode, opBinBytes:
			b = data[str+5 : str+5+int(binary.LittleEndian.Uint32(data[str+1:]))]
		default:
			b = data[str+9 : str+9+int(binary.LittleEndian.Uint64(data[str+1:]))]
		}
		k := kStr
		if op != opShortBinUni && op != opBinUnicode && op != opBinUnicode8 {
			k = kBytes
		}
		return d.setMemo(idx, val{k: k, ref: d.str(b)}, str) == nil
	}
	d.puts++
	n := d.memo.len()
	switch {
	case int(idx) < n:
		d.spans.reset()
		d.memo.own(idx)
		*d.memo.at(idx) = 0
	case int(idx) < n+denseMemoGap && int(idx) < 2*d.puts+denseMemoGap:
		for d.memo.len() <= int(idx) {
			d.memo.push(0)
		}
	}
	if d.memoSparse != nil {
		delete(d.memoSparse, idx)
	}
	if idx < uint32(len(d.small)) {
		d.small[idx] = val{k: kUnset}
	}
	return true
}
