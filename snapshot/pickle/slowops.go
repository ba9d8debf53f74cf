package pickle

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
)

// The opcodes outside the hot loop of run: rarer ones, and every
// protocol-2 form PyTorch could have written.

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
		if d.region {
			return false, val{}, errHelperStop
		}
		if len(d.stack) == 0 {
			return false, val{}, d.errf(at, "STOP with an empty stack")
		}
		return true, d.stack[len(d.stack)-1], nil
	case opPop:
		if len(d.stack) > d.lastMark() {
			d.stack = d.stack[:len(d.stack)-1]
		} else if len(d.marks) > d.floor {
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
		d.unfresh(d.stack)
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
		if d.region && len(d.stack) == 1 && len(d.marks) == d.floor && !d.openBatch {
			// An item for the list below a helper's region.
			return false, val{}, d.appendBelow([]val{v})
		}
		t, err := d.top(at, "APPEND")
		if err != nil {
			return false, val{}, err
		}
		if t.k == kStack {
			if t, err = d.stackList(d.stack, len(d.stack)-1, at, "APPEND"); err != nil {
				return false, val{}, err
			}
		}
		if t.k != kList {
			return false, val{}, d.errf(at, "APPEND to a %s, not a list", t.k)
		}
		one := [1]val{v}
		d.appendItems(t.ref, one[:])
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
		if t.k == kFrame {
			return false, val{}, d.errFrameChanged(at, "SETITEM")
		}
		switch t.k {
		case kTrace:
			t = d.traceDict(t.ref)
		case kBlock:
			t = d.blockDict(t.ref)
		}
		if t.k != kDict {
			return false, val{}, d.errf(at, "SETITEM on a %s, not a dict", t.k)
		}
		d.extend(t.ref, d.stack[n-2:])
		d.stack = d.stack[:n-2]
	case opBinPut, opLongBinPut:
		if d.region {
			// An index other than the next one's (the run loop took
			// those, see learnBase): it may replace an entry of the
			// part of the input the helper skipped.
			return false, val{}, errHelperStop
		}
		if op == opLongBinPut {
			return false, val{}, d.longBinPut(at)
		}
		b, err := d.need(1, "BINPUT", at)
		if err != nil {
			return false, val{}, err
		}
		d.unfresh(d.stack)
		v, err := d.top(at, "BINPUT")
		if err != nil {
			return false, val{}, err
		}
		if err := d.setMemo(uint32(b[0]), v, at); err != nil {
			return false, val{}, err
		}
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

func (d *decoder) longBinPut(at int) error {
	b, err := d.need(4, "LONG_BINPUT", at)
	if err != nil {
		return err
	}
	d.unfresh(d.stack)
	v, err := d.top(at, "LONG_BINPUT")
	if err != nil {
		return err
	}
	return d.setMemo(binary.LittleEndian.Uint32(b), v, at)
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

// long8 decodes a little-endian two's complement integer of at most 8
// bytes (none is 0).
func long8(b []byte) int64 {
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	shift := uint(64 - 8*len(b))
	return int64(u<<shift) >> shift
}

// decodeLong decodes a little-endian two's complement integer of any width.
func decodeLong(b []byte) val {
	n := len(b)
	switch {
	case n <= 8:
		return val{k: kInt, i: long8(b)}
	case n == 9 && b[8] == 0:
		u := binary.LittleEndian.Uint64(b)
		if u>>63 == 0 {
			return val{k: kInt, i: int64(u)}
		}
		return val{k: kUint, i: int64(u)}
	case n == 9 && b[8] == 0xff && b[7]&0x80 != 0:
		// A negative int64 with a sign byte to spare (pickle.dump writes
		// the fewest bytes, but the format allows more).
		return val{k: kInt, i: int64(binary.LittleEndian.Uint64(b))}
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
