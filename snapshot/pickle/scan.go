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
