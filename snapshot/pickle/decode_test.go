package pickle

import "testing"

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
