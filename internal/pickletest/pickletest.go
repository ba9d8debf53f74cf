// Package pickletest writes small protocol-4 pickles for tests, so bad and
// odd snapshot inputs can be built in Go without Python.
package pickletest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// KV is one entry of a Dict: a key (a string) and a value.
type KV [2]any

// Dict is a dict with ordered keys.
type Dict []KV

// Tuple is a tuple.
type Tuple []any

// Ref refers to a value memoized earlier with Memo.
type Ref uint32

// Memo memoizes its value (MEMOIZE) under the next memo index.
type Memo struct{ v any }

// Memoize wraps v so it is memoized where it is written.
func Memoize(v any) Memo { return Memo{v} }

// Writer writes a pickle piece by piece, for inputs Of cannot express
// (opcodes between values, streams of references).
type Writer struct {
	buf  bytes.Buffer
	memo uint32
}

// Of pickles v: nil, bool, int, int64, float64, string, Dict, []any,
// Tuple, Memo, Ref, and []byte (raw opcodes, written as they are).
func Of(v any) []byte {
	p := &Writer{}
	p.buf.Write([]byte{OpProto, 4})
	p.Put(v)
	p.buf.WriteByte(OpStop)
	return p.buf.Bytes()
}

// Op writes raw opcodes and arguments.
func (p *Writer) Op(b ...byte) { p.buf.Write(b) }

// Bytes returns what was written.
func (p *Writer) Bytes() []byte { return p.buf.Bytes() }

// Put writes one value (the types Of takes).
func (p *Writer) Put(v any) {
	switch x := v.(type) {
	case nil:
		p.Op(OpNone)
	case bool:
		if x {
			p.Op(OpNewTrue)
		} else {
			p.Op(OpNewFalse)
		}
	case int:
		p.putInt(int64(x))
	case int64:
		p.putInt(x)
	case float64:
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], math.Float64bits(x))
		p.Op(OpBinFloat)
		p.Op(b[:]...)
	case string:
		if len(x) < 256 {
			p.Op(OpShortBinUni, byte(len(x)))
		} else {
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], uint32(len(x)))
			p.Op(OpBinUnicode)
			p.Op(b[:]...)
		}
		p.buf.WriteString(x)
	case Dict:
		p.Op(OpEmptyDict)
		if len(x) > 0 {
			p.Op(OpMark)
			for _, kv := range x {
				p.Put(kv[0])
				p.Put(kv[1])
			}
			p.Op(OpSetItems)
		}
	case []any:
		p.Op(OpEmptyList)
		if len(x) > 0 {
			p.Op(OpMark)
			for _, e := range x {
				p.Put(e)
			}
			p.Op(OpAppends)
		}
	case Tuple:
		p.Op(OpMark)
		for _, e := range x {
			p.Put(e)
		}
		p.Op(OpTuple)
	case Memo:
		p.Put(x.v)
		p.Op(OpMemoize)
		p.memo++
	case Ref:
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(x))
		p.Op(OpLongBinGet)
		p.Op(b[:]...)
	case []byte: // raw opcodes
		p.Op(x...)
	default:
		panic(fmt.Sprintf("pickletest: cannot pickle %T", v))
	}
}

func (p *Writer) putInt(x int64) {
	switch {
	case x >= 0 && x < 256:
		p.Op(OpBinInt1, byte(x))
	case x >= -1<<31 && x < 1<<31:
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(int32(x)))
		p.Op(OpBinInt)
		p.Op(b[:]...)
	default:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		p.Op(OpLong1, 8)
		p.Op(b[:]...)
	}
}

// FrameDict is a frame as PyTorch writes one.
func FrameDict(file string, line int, name string) Dict {
	return Dict{{"filename", file}, {"line", line}, {"name", name}}
}

// BlockDict is a block of a segment.
func BlockDict(addr, size, req int, state string, frames []any) Dict {
	return Dict{{"address", addr}, {"size", size}, {"requested_size", req}, {"state", state}, {"frames", frames}}
}

// SegmentDict is a device-0 segment of the default pool holding blocks.
func SegmentDict(addr, total int, blocks ...any) Dict {
	return Dict{{"device", 0}, {"address", addr}, {"total_size", total}, {"allocated_size", 0},
		{"active_size", 0}, {"requested_size", 0}, {"stream", 0}, {"segment_type", "large"},
		{"segment_pool_id", Tuple{0, 0}}, {"is_expandable", false}, {"frames", []any{}}, {"blocks", blocks}}
}

// Pickle opcodes (see CPython's Lib/pickletools.py), for tests that
// write raw pickles.
const (
	OpMark           = '('
	OpStop           = '.'
	OpPop            = '0'
	OpPopMark        = '1'
	OpDup            = '2'
	OpFloat          = 'F'
	OpInt            = 'I'
	OpBinInt         = 'J'
	OpBinInt1        = 'K'
	OpLong           = 'L'
	OpBinInt2        = 'M'
	OpNone           = 'N'
	OpPersID         = 'P'
	OpBinPersID      = 'Q'
	OpReduce         = 'R'
	OpString         = 'S'
	OpBinString      = 'T'
	OpShortBinString = 'U'
	OpUnicode        = 'V'
	OpBinUnicode     = 'X'
	OpAppend         = 'a'
	OpBuild          = 'b'
	OpGlobal         = 'c'
	OpDict           = 'd'
	OpEmptyDict      = '}'
	OpAppends        = 'e'
	OpGet            = 'g'
	OpBinGet         = 'h'
	OpInst           = 'i'
	OpLongBinGet     = 'j'
	OpList           = 'l'
	OpEmptyList      = ']'
	OpObj            = 'o'
	OpPut            = 'p'
	OpBinPut         = 'q'
	OpLongBinPut     = 'r'
	OpSetItem        = 's'
	OpTuple          = 't'
	OpEmptyTuple     = ')'
	OpSetItems       = 'u'
	OpBinFloat       = 'G'
	OpBinBytes       = 'B'
	OpShortBinBytes  = 'C'

	OpProto          = 0x80
	OpNewObj         = 0x81
	OpExt1           = 0x82
	OpExt2           = 0x83
	OpExt4           = 0x84
	OpTuple1         = 0x85
	OpTuple2         = 0x86
	OpTuple3         = 0x87
	OpNewTrue        = 0x88
	OpNewFalse       = 0x89
	OpLong1          = 0x8a
	OpLong4          = 0x8b
	OpShortBinUni    = 0x8c
	OpBinUnicode8    = 0x8d
	OpBinBytes8      = 0x8e
	OpEmptySet       = 0x8f
	OpAddItems       = 0x90
	OpFrozenSet      = 0x91
	OpNewObjEx       = 0x92
	OpStackGlobal    = 0x93
	OpMemoize        = 0x94
	OpFrame          = 0x95
	OpByteArray8     = 0x96
	OpNextBuffer     = 0x97
	OpReadonlyBuffer = 0x98
)
