package pickle

import (
	"bytes"
	"strconv"
	"testing"
)

// TestWalkPuts: a walk gives each string or bytes value put right after
// it is written its memo entry, at the index MEMOIZE counts or a PUT
// names, and every other put a hole; it crosses frame headers, and fails
// at an opcode it cannot size and where it does not end at its target.
func TestWalkPuts(t *testing.T) {
	// 2 FRAME, 11 SHORT_BINUNICODE 'a', 14 MEMOIZE (0), 15 EMPTY_DICT, 16
	// MEMOIZE (1), 17 BINUNICODE 'bb', 24 BINPUT 5, 26 SHORT_BINBYTES 'c',
	// 29 LONG_BINPUT 7, 34 SHORT_BINUNICODE 'd', 37 BININT1 1, 39 MEMOIZE
	// (8: the int), 40 FRAME, 49 MARK, 50 SHORT_BINUNICODE 'e', 53 BINPUT 3
	// (a string again, over a hole), 55 STOP.
	body := []byte("\x8c\x01a\x94}\x94X\x02\x00\x00\x00bbq\x05C\x01cr\x07\x00\x00\x00\x8c\x01dK\x01\x94")
	data := append([]byte{opProto, 4, opFrame}, le64(len(body))...)
	data = append(data, body...)
	data = append(data, opFrame)
	data = append(data, le64(7)...)
	data = append(data, []byte("(\x8c\x01eq\x03.")...)
	d := newDecoder(data)
	d.pos = 2
	if !d.walkPuts(len(data) - 1) {
		t.Fatalf("the walk failed at %d", d.pos)
	}
	want := map[uint32]string{0: "a", 3: "e", 5: "bb", 7: "c"}
	if d.memo.len() != 9 {
		t.Fatalf("%d memo entries, want 9", d.memo.len())
	}
	for i := range uint32(9) {
		v, ok := d.memoVal(*d.memo.at(i))
		s, isStr := want[i]
		switch {
		case isStr && (!ok || v.k != kStr && v.k != kBytes || d.g.strs[v.ref] != s):
			t.Errorf("entry %d: %+v (%v), want %q", i, v, ok, s)
		case isStr && (i == 7) != (v.k == kBytes):
			t.Errorf("entry %d: kind %v", i, v.k)
		case !isStr && ok:
			t.Errorf("entry %d: %+v, want a hole", i, v)
		}
		if sv := d.small[i]; isStr != (sv.k != kUnset) {
			t.Errorf("entry %d: small %+v", i, sv)
		}
	}
	if _, ok := d.strIndex["e"]; !ok {
		t.Error("the string put over a hole is not interned")
	}
	for _, c := range []struct {
		name string
		data []byte
		to   int
	}{
		{"a PUT with a text index", []byte("\x80\x04\x8c\x01ap0\n."), 8},
		{"a GLOBAL", []byte("\x80\x04cos\nsystem\n."), 13},
		{"a target inside an opcode", []byte("\x80\x04\x8c\x01a\x94."), 4},
	} {
		d := newDecoder(c.data)
		d.pos = 2
		if d.walkPuts(c.to) {
			t.Errorf("%s: the walk succeeded", c.name)
		}
	}
}

func le64(n int) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(n >> (8 * i))
	}
	return b
}

// TestPrefixHead: a helper walks its prefix past the first 32nd of the
// input from walkPrefixMin 32nds on, not a byte before; the head ends at
// the first frame (or opcode) boundary past that 32nd.
func TestPrefixHead(t *testing.T) {
	const frame = 1000
	framed := []byte{opProto, 4}
	for len(framed) < 200_000 {
		framed = append(framed, opFrame)
		framed = append(framed, le64(frame)...)
		framed = append(framed, bytes.Repeat([]byte{opNone}, frame)...)
	}
	unframed := append([]byte{opProto, 2}, bytes.Repeat([]byte{opNone}, 200_000)...)
	for _, c := range []struct {
		name string
		data []byte
	}{{"framed", framed}, {"unframed", unframed}} {
		n := len(c.data)
		min := walkPrefixMin * (n / 32)
		if _, ok := prefixHead(c.data, min-1); ok {
			t.Errorf("%s: walked from a prefix of %d bytes, a byte short", c.name, min-1)
		}
		head, ok := prefixHead(c.data, min)
		if !ok {
			t.Fatalf("%s: no walk from a prefix of %d bytes", c.name, min)
		}
		if head < n/32 || head >= min || c.name == "framed" && (head-2)%(frame+9) != 0 || c.name == "unframed" && head != n/32 {
			t.Errorf("%s: head %d (a 32nd is %d)", c.name, head, n/32)
		}
	}
}

// TestHelpersReadLateActions: a helper that walked a snapshot's segments
// reads actions first written after its prefix as placeholders, and its
// entries stay records (none a generic dict), with one machine's value;
// an action that resolves to no string (a shared tuple) makes the join
// refuse, and the main machine runs the region.
func TestHelpersReadLateActions(t *testing.T) {
	needPython(t)
	for _, proto := range []int{4, 2} {
		for _, shape := range []string{"lateactions", "oddactions"} {
			// -race: one setting of each shape, a quarter of the time.
			if testing.Short() && (proto == 2) != (shape == "oddactions") {
				continue
			}
			const n = 30000
			data := genPickleProto(t, shape, n, proto)
			keys := traceKeyAt(data, actionKeyIn(data), len(data)/2, keySearchStep, nil)
			if keys < walkPrefixMin*(len(data)/32) {
				t.Fatalf("the keys are at %d of %d bytes: not the shape this test needs", keys, len(data))
			}
			for _, cores := range []int{2, 3} {
				if testing.Short() && cores != 2+proto/4 {
					continue
				}
				split := scaledSplit(cores, keys)
				_, targets := split(len(data))
				if len(targets) != cores-1 {
					t.Fatalf("%d cores: targets %v", cores, targets)
				}
				name := shape + "/protocol " + strconv.Itoa(proto) + "/" + strconv.Itoa(cores)
				d := decodeCompare(t, name, data, split)
				records := 0
				for i := range d.g.traces.len() {
					if d.g.traces.at(uint32(i)).has()&hasGeneric == 0 {
						records++
					}
				}
				switch shape {
				case "lateactions":
					if len(d.joined) != len(targets) {
						t.Errorf("%s: %d of %d helpers joined", name, len(d.joined), len(targets))
					}
					if records != n {
						t.Errorf("%s: %d of %d entries are records", name, records, n)
					}
				case "oddactions":
					if len(d.joined) != 0 {
						t.Errorf("%s: %d helpers joined", name, len(d.joined))
					}
				}
			}
		}
	}
}

// TestNoteActionRef: a helper reads up to actionRefsMax distinct actions
// as placeholders, each once however often it recurs, and no more.
func TestNoteActionRef(t *testing.T) {
	d := newDecoder(nil)
	for i := range uint32(actionRefsMax) {
		for _, idx := range []uint32{1000 + i, 1000 + i, 1000} { // new, then again, then the first
			if !d.noteActionRef(idx) {
				t.Fatalf("action %d of %d: entry %d refused", i+1, actionRefsMax, idx)
			}
		}
	}
	if len(d.actionRefs) != actionRefsMax {
		t.Errorf("%d actions recorded, want %d", len(d.actionRefs), actionRefsMax)
	}
	if d.noteActionRef(5) {
		t.Errorf("a distinct action past %d taken", actionRefsMax)
	}
	if !d.noteActionRef(1000 + actionRefsMax - 1) {
		t.Error("a recorded action refused once the table is full")
	}
}
