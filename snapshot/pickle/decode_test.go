package pickle

import (
	"math/big"
	"strings"
	"testing"
)

func TestDecodeIntegers(t *testing.T) {
	cases := []struct {
		name string
		ops  []byte
		want val
	}{
		{"BININT negative", []byte{opBinInt, 0xff, 0xff, 0xff, 0xff}, val{k: kInt, i: -1}},
		{"BININT2", []byte{opBinInt2, 0x34, 0x12}, val{k: kInt, i: 0x1234}},
		{"LONG1 empty", []byte{opLong1, 0}, val{k: kInt}},
		{"LONG1 negative", []byte{opLong1, 1, 0xff}, val{k: kInt, i: -1}},
		{"LONG1 5 bytes", []byte{opLong1, 5, 0, 0, 0, 0, 1}, val{k: kInt, i: 1 << 32}},
		// 2^64-1 needs 9 bytes (a frame line in a real file).
		{"LONG1 9 bytes 2^64-1", []byte{opLong1, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}, val{k: kUint, i: -1}},
		{"LONG1 9 bytes small", []byte{opLong1, 9, 5, 0, 0, 0, 0, 0, 0, 0, 0}, val{k: kInt, i: 5}},
		{"LONG4", []byte{opLong4, 2, 0, 0, 0, 0x00, 0x01}, val{k: kInt, i: 256}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := append([]byte{opProto, 4}, c.ops...)
			data = append(data, opStop)
			_, v, err := decodePickle(data)
			if err != nil {
				t.Fatal(err)
			}
			if v != c.want {
				t.Errorf("got %+v want %+v", v, c.want)
			}
		})
	}
}

// TestDecodeLong1Widths: the main loop (run) reads a LONG1 of up to 8
// bytes with one load when eight more bytes follow it, and byte by byte
// near the end of the data; both must read what math/big does, for bytes
// of every sign and width. Nine bytes go through slowOp (kUint past
// int64, an approximation past uint64).
func TestDecodeLong1Widths(t *testing.T) {
	patterns := [][]byte{
		{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x00},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00},
		{0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x00},
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80},
		{0x00, 0x10, 0xa0, 0x3c, 0x1f, 0x7f, 0x00, 0x00, 0x00}, // an address
	}
	// After the number: nothing but STOP (the byte-by-byte read), or more
	// than eight bytes of other opcodes (the one load).
	tails := map[string][]byte{
		"at the end": {opStop},
		"followed":   {opBinInt, 1, 2, 3, 4, opPop, opBinInt, 5, 6, 7, 8, opPop, opStop},
	}
	for n := 0; n <= 9; n++ {
		for _, p := range patterns {
			b := p[:n]
			// The reference: two's complement of n little-endian bytes.
			be := make([]byte, n)
			for i := range b {
				be[n-1-i] = b[i]
			}
			ref := new(big.Int).SetBytes(be)
			if n > 0 && b[n-1]&0x80 != 0 {
				ref.Sub(ref, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
			}
			want := val{k: kInt, i: ref.Int64()}
			if !ref.IsInt64() {
				want = val{k: kUint, i: int64(ref.Uint64())}
			}
			for name, tail := range tails {
				data := append([]byte{opProto, 4, opLong1, byte(n)}, b...)
				data = append(data, tail...)
				_, v, err := decodePickle(data)
				if err != nil {
					t.Fatalf("%d bytes %x %s: %v", n, b, name, err)
				}
				if ref.BitLen() > 64 {
					if v.k != kHuge {
						t.Errorf("%d bytes %x %s: got %+v, want a huge value", n, b, name, v)
					}
					continue
				}
				if v != want {
					t.Errorf("%d bytes %x %s: got %+v want %+v (%s)", n, b, name, v, want, ref)
				}
			}
		}
	}
	// A LONG1 whose bytes run past the data is an error, however many
	// bytes it claims.
	for _, n := range []byte{3, 8, 9, 200} {
		data := []byte{opProto, 4, opLong1, n, 1, 2}
		if _, _, err := decodePickle(data); err == nil || !strings.Contains(err.Error(), "LONG1") {
			t.Errorf("LONG1 of %d bytes with 2 present: %v", n, err)
		}
	}
}

func TestDecodeStackOps(t *testing.T) {
	// [1, 1] via DUP; POP drops; POP_MARK drops to the mark; EMPTY_SET +
	// ADDITEMS; DICT and LIST from a mark.
	data := []byte{opProto, 4, opEmptyList, opMark, opBinInt1, 1, opDup, opBinInt1, 9, opPop, opAppends,
		opMark, opBinInt1, 7, opPopMark,
		opStop}
	g, v, err := decodePickle(data)
	if err != nil {
		t.Fatal(err)
	}
	if items := g.seq(v); len(items) != 2 || items[0].i != 1 || items[1].i != 1 {
		t.Errorf("list: %+v", items)
	}
	data = []byte{opProto, 4, opMark, opShortBinUni, 1, 'a', opEmptySet, opMark, opBinInt1, 3, opAddItems, opDict, opStop}
	g, v, err = decodePickle(data)
	if err != nil {
		t.Fatal(err)
	}
	kv := g.seq(v)
	if v.k != kDict || len(kv) != 2 || kv[1].k != kSet || len(g.seq(kv[1])) != 1 {
		t.Errorf("dict: %+v", kv)
	}
}
