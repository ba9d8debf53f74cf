package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// A minimal protocol-4 pickler for tests, so bad and odd inputs can be built
// in Go without Python.

type pkv struct {
	k string
	v any
}

// pdict is a dict with ordered keys.
type pdict []pkv

// ptuple is a tuple.
type ptuple []any

// pref refers to a value memoized earlier with pmemo.
type pref uint32

// pmemo memoizes its value (MEMOIZE) under the next memo index.
type pmemo struct{ v any }

type pickler struct {
	buf  bytes.Buffer
	memo uint32
}

func pickleOf(v any) []byte {
	p := &pickler{}
	p.buf.Write([]byte{opProto, 4})
	p.put(v)
	p.buf.WriteByte(opStop)
	return p.buf.Bytes()
}

func (p *pickler) op(b ...byte) { p.buf.Write(b) }

func (p *pickler) put(v any) {
	switch x := v.(type) {
	case nil:
		p.op(opNone)
	case bool:
		if x {
			p.op(opNewTrue)
		} else {
			p.op(opNewFalse)
		}
	case int:
		p.putInt(int64(x))
	case int64:
		p.putInt(x)
	case float64:
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], mathFloat64bits(x))
		p.op(opBinFloat)
		p.op(b[:]...)
	case string:
		if len(x) < 256 {
			p.op(opShortBinUni, byte(len(x)))
		} else {
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], uint32(len(x)))
			p.op(opBinUnicode)
			p.op(b[:]...)
		}
		p.buf.WriteString(x)
	case pdict:
		p.op(opEmptyDict)
		if len(x) > 0 {
			p.op(opMark)
			for _, kv := range x {
				p.put(kv.k)
				p.put(kv.v)
			}
			p.op(opSetItems)
		}
	case []any:
		p.op(opEmptyList)
		if len(x) > 0 {
			p.op(opMark)
			for _, e := range x {
				p.put(e)
			}
			p.op(opAppends)
		}
	case ptuple:
		p.op(opMark)
		for _, e := range x {
			p.put(e)
		}
		p.op(opTuple)
	case pmemo:
		p.put(x.v)
		p.op(opMemoize)
		p.memo++
	case pref:
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(x))
		p.op(opLongBinGet)
		p.op(b[:]...)
	case []byte: // raw opcodes
		p.op(x...)
	default:
		panic(fmt.Sprintf("pickler: %T", v))
	}
}

func (p *pickler) putInt(x int64) {
	switch {
	case x >= 0 && x < 256:
		p.op(opBinInt1, byte(x))
	case x >= -1<<31 && x < 1<<31:
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(int32(x)))
		p.op(opBinInt)
		p.op(b[:]...)
	default:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		p.op(opLong1, 8)
		p.op(b[:]...)
	}
}
