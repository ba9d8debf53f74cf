package pickle

import (
	"reflect"
	"testing"
	"unsafe"

	pt "memscope/internal/pickletest"
	"memscope/snapshot/schema"
)

// TestReserveTyped: the last join reserves one typed entry per record, the
// main machine's and the helper's, for input over GCThreshold with at least
// typedReserveMin records (each side of both bounds), and nothing
// otherwise.
func TestReserveTyped(t *testing.T) {
	big := make([]byte, GCThreshold+1) // never written: no pages
	for _, c := range []struct {
		name      string
		size      int
		main, hlp int
		want      bool
	}{
		{"small input", GCThreshold, typedReserveMin, 10, false},
		{"few records", GCThreshold + 1, typedReserveMin - 11, 10, false},
		{"enough records", GCThreshold + 1, typedReserveMin - 10, 10, true},
		{"enough, most the helper's", GCThreshold + 1, 3, typedReserveMin + 5, true},
	} {
		pool := &offHeapPool{}
		d, h := &decoder{data: big[:c.size], g: &graph{}}, &decoder{g: &graph{}}
		d.g.traces.pool, h.g.traces.pool = pool, pool
		for range c.main {
			d.g.traces.push(rawTrace{})
		}
		for range c.hlp {
			h.g.traces.push(rawTrace{})
		}
		d.reserveTyped(h)
		switch got := len(d.g.typed); {
		case c.want && got != c.main+c.hlp:
			t.Errorf("%s: %d entries reserved, want %d", c.name, got, c.main+c.hlp)
		case !c.want && d.g.typed != nil:
			t.Errorf("%s: %d entries reserved, want none", c.name, got)
		}
		d.g.free()
		h.g.free()
	}
}

// TestTracesFromReserve: traceArrays hands each device's trace, in order,
// the next part of the reserved room while it holds the whole trace (a
// room one entry short of a trace gives it a new array), no two traces
// overlap, and the snapshot bound into them is the one bound without a
// reserve.
func TestTracesFromReserve(t *testing.T) {
	const a, b = 7, 5
	list := func(n, base int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = traceDict(base + i)
		}
		return out
	}
	data := pt.Of(pt.Dict{{"segments", []any{}}, {"device_traces", []any{list(a, 0), list(b, 100)}}})
	bind := func(reserve int) (*schema.Snapshot, []schema.TraceEntry, map[uint32][]schema.TraceEntry) {
		g, root, err := decodePickle(data)
		if err != nil {
			t.Fatal(err)
		}
		var room []schema.TraceEntry
		if reserve >= 0 {
			room = make([]schema.TraceEntry, reserve)
			g.typed = room
		}
		typed := traceArrays(g, root)
		// The binder takes the arrays out of the map: a copy says where
		// each was.
		seen := map[uint32][]schema.TraceEntry{}
		for k, v := range typed {
			seen[k] = v
		}
		s, err := bindGraphInto(g, root, len(data), typed)
		if err != nil {
			t.Fatal(err)
		}
		return s, room, seen
	}
	want, _, _ := bind(-1)
	if len(want.Traces) != 2 || len(want.Traces[0]) != a || len(want.Traces[1]) != b {
		t.Fatalf("the traces bound without a reserve are %d long", len(want.Traces))
	}
	inRoom := func(room, tr []schema.TraceEntry) int {
		if len(room) == 0 || len(tr) == 0 {
			return -1
		}
		off := (uintptr(unsafe.Pointer(&tr[0])) - uintptr(unsafe.Pointer(&room[0]))) / unsafe.Sizeof(tr[0])
		if uintptr(unsafe.Pointer(&tr[0])) < uintptr(unsafe.Pointer(&room[0])) || off >= uintptr(len(room)) {
			return -1
		}
		return int(off)
	}
	for _, c := range []struct {
		reserve int
		at      [2]int // where each trace starts in the room; -1 outside it
	}{
		{a + b + 3, [2]int{0, a}},
		{a + b, [2]int{0, a}},
		{a + b - 1, [2]int{0, -1}},
		{a, [2]int{0, -1}},
		{a - 1, [2]int{-1, 0}}, // the first gets a new array, the second fits
		{b - 1, [2]int{-1, -1}},
		{0, [2]int{-1, -1}},
	} {
		s, room, seen := bind(c.reserve)
		if !reflect.DeepEqual(s.Traces, want.Traces) {
			t.Errorf("reserve %d: the bound traces differ from those bound without one", c.reserve)
		}
		for _, tr := range seen {
			if cap(tr) != len(tr) {
				t.Errorf("reserve %d: a trace of %d has room for %d", c.reserve, len(tr), cap(tr))
			}
		}
		// By length: the map has no order.
		got := [2]int{-2, -2}
		for _, tr := range seen {
			k := 0
			if len(tr) == b {
				k = 1
			}
			got[k] = inRoom(room, tr)
		}
		if got != c.at {
			t.Errorf("reserve %d: the traces start at %v of the room, want %v", c.reserve, got, c.at)
		}
	}
}
