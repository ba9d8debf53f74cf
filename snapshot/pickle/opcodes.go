package pickle

// Pickle opcodes (see CPython's Lib/pickletools.py).
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opFloat          = 'F'
	opInt            = 'I'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opLong           = 'L'
	opBinInt2        = 'M'
	opNone           = 'N'
	opPersID         = 'P'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opString         = 'S'
	opBinString      = 'T'
	opShortBinString = 'U'
	opUnicode        = 'V'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opGet            = 'g'
	opBinGet         = 'h'
	opInst           = 'i'
	opLongBinGet     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opObj            = 'o'
	opPut            = 'p'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinFloat       = 'G'
	opBinBytes       = 'B'
	opShortBinBytes  = 'C'

	opProto          = 0x80
	opNewObj         = 0x81
	opExt1           = 0x82
	opExt2           = 0x83
	opExt4           = 0x84
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opLong4          = 0x8b
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opEmptySet       = 0x8f
	opAddItems       = 0x90
	opFrozenSet      = 0x91
	opNewObjEx       = 0x92
	opStackGlobal    = 0x93
	opMemoize        = 0x94
	opFrame          = 0x95
	opByteArray8     = 0x96
	opNextBuffer     = 0x97
	opReadonlyBuffer = 0x98
)

// refusedOps are opcodes that construct objects or call code. A snapshot is
// plain data, so a file that has them is not a snapshot and may be an attack.
var refusedOps = map[byte]string{
	opGlobal: "GLOBAL", opStackGlobal: "STACK_GLOBAL", opReduce: "REDUCE", opBuild: "BUILD",
	opInst: "INST", opObj: "OBJ", opNewObj: "NEWOBJ", opNewObjEx: "NEWOBJ_EX",
	opPersID: "PERSID", opBinPersID: "BINPERSID", opExt1: "EXT1", opExt2: "EXT2", opExt4: "EXT4",
	opNextBuffer: "NEXT_BUFFER", opReadonlyBuffer: "READONLY_BUFFER",
}

// textOps are protocol-0 opcodes; PyTorch never writes protocol 0.
var textOps = map[byte]string{
	opFloat: "FLOAT", opInt: "INT", opLong: "LONG", opString: "STRING", opUnicode: "UNICODE",
	opGet: "GET", opPut: "PUT", opBinString: "BINSTRING", opShortBinString: "SHORT_BINSTRING",
}
