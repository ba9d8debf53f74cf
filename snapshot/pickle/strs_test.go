package pickle

import (
	"context"
	"strings"
	"testing"
)

// TestStrRecent: the last-string-of-its-length check gives the id the map
// would, for repeats, for strings of one length that alternate (one slot)
// and for lengths that share a slot.
func TestStrRecent(t *testing.T) {
	d := newDecoder(nil)
	want := map[string]uint32{}
	for _, s := range []string{"N/A", "N/B", "N/A", "N/A", "", "", "abcdefghi", "x", "abcdefghi", "x", "N/B",
		strings.Repeat("y", 255), "N/A"} {
		id := d.str([]byte(s))
		if w, ok := want[s]; ok && id != w {
			t.Fatalf("%q: id %d, first given %d", s, id, w)
		}
		want[s] = id
		if d.g.strs[id] != s {
			t.Fatalf("%q: id %d holds %q", s, id, d.g.strs[id])
		}
	}
	if len(d.g.strs) != len(want) {
		t.Errorf("%d strings interned for %d distinct", len(d.g.strs), len(want))
	}
}

// TestShortStringCut: a SHORT_BINUNICODE cut short, in its length byte or
// its text, is the error it always was.
func TestShortStringCut(t *testing.T) {
	for _, tc := range []struct {
		data, want string
	}{
		{"\x80\x04\x8c", "SHORT_BINUNICODE needs 1 byte"},
		{"\x80\x04\x8c\x05abc", "SHORT_BINUNICODE needs 5 bytes"},
	} {
		_, _, err := decodeWith(context.Background(), []byte(tc.data), nil, nil, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("% x: %v, want %q", tc.data, err, tc.want)
		}
	}
}
