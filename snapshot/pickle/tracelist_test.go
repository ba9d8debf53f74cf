package pickle

import (
	"context"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	pt "memscope/internal/pickletest"
	"memscope/snapshot/schema"
)

func traceDict(i int, extra ...pt.KV) pt.Dict {
	d := pt.Dict{{"action", "alloc"}, {"addr", 4096 * (i + 1)}, {"size", 512 + i}, {"stream", 0}, {"time_us", 1000 + i}}
	d = append(d, extra...)
	return append(d, pt.KV{"frames", []any{pt.FrameDict("/src/train.py", 10+i, "step")}})
}

// TestTraceLists: a device's list of trace entries is kept as a run of
// records only while its items are consecutive records; every other shape
// (an item that is no entry, an entry twice, entries out of order, an entry
// changed after it was added, one entry in two lists) binds as the generic
// form does, and CPython reads the same values. Entries whose frames are
// memo reads (as PyTorch writes them) become records with no container
// (kTrace); entries that hold a new frame dict get one first.
func TestTraceLists(t *testing.T) {
	e := func(i int) pt.Dict { return traceDict(i) }
	wrap := func(lists ...any) []byte {
		return pt.Of(pt.Dict{{"segments", []any{}}, {"device_traces", lists}})
	}
	// ek is e with its frame a memo read of memo entry 0, which wrapK
	// makes the frame dict.
	ek := func(i int) pt.Dict {
		d := traceDict(i)
		d[len(d)-1] = pt.KV{"frames", []any{pt.Ref(0)}}
		return d
	}
	wrapK := func(lists ...any) []byte {
		return pt.Of(pt.Dict{{"x", pt.Memoize(pt.FrameDict("/src/train.py", 10, "step"))}, {"segments", []any{}}, {"device_traces", lists}})
	}
	changedK := func(setItem bool) []byte {
		w := &pt.Writer{}
		w.Op(pt.OpEmptyList, pt.OpMark)
		w.Put(pt.Memoize(ek(0))) // memo entry 1
		w.Put(ek(1))
		w.Op(pt.OpAppends)
		w.Put(pt.Ref(1))
		if setItem {
			w.Put("mystery")
			w.Put(1)
			w.Op(pt.OpSetItem, pt.OpPop)
		} else {
			w.Op(pt.OpMark)
			w.Put("mystery")
			w.Put(1)
			w.Op(pt.OpSetItems, pt.OpPop)
		}
		return w.Bytes()
	}
	changed := func() []byte {
		w := &pt.Writer{}
		w.Op(pt.OpEmptyList, pt.OpMark)
		w.Put(pt.Memoize(e(0)))
		w.Put(e(1))
		w.Op(pt.OpAppends)
		w.Put(pt.Ref(0))
		w.Op(pt.OpMark)
		w.Put("mystery")
		w.Put(1)
		w.Op(pt.OpSetItems, pt.OpPop)
		return w.Bytes()
	}
	twoBatches := func(last any) []byte {
		w := &pt.Writer{}
		w.Op(pt.OpEmptyList, pt.OpMark)
		w.Put(e(0))
		w.Put(e(1))
		w.Op(pt.OpAppends)
		w.Put(last)
		w.Op(pt.OpAppend)
		return w.Bytes()
	}
	addrs := func(ids ...int) []uint64 {
		var out []uint64
		for _, i := range ids {
			out = append(out, uint64(4096*(i+1)))
		}
		return out
	}
	cases := []struct {
		name  string
		data  []byte
		run   bool       // device 0's list stays a run of records
		bare  bool       // no entry got a container (kTrace)
		addrs [][]uint64 // per device
		err   string     // a binding error containing this
		warn  string
	}{
		{name: "plain", data: wrap([]any{e(0), e(1), e(2)}), run: true, addrs: [][]uint64{addrs(0, 1, 2)}},
		{name: "second batch continues", data: wrap(twoBatches(e(2))), run: true, addrs: [][]uint64{addrs(0, 1, 2)}},
		{name: "an item that is no entry", data: wrap([]any{e(0), nil, e(2)}), err: "device_traces[0][1]"},
		{name: "no entry in a second batch", data: wrap(twoBatches(nil)), err: "device_traces[0][2]"},
		{name: "an entry twice", data: wrap([]any{pt.Memoize(e(0)), e(1), pt.Ref(0)}), addrs: [][]uint64{addrs(0, 1, 0)}},
		{name: "out of order", data: pt.Of(pt.Dict{{"x", []any{pt.Memoize(e(0)), pt.Memoize(e(1))}},
			{"device_traces", []any{[]any{pt.Ref(1), pt.Ref(0)}}}}), addrs: [][]uint64{addrs(1, 0)}},
		{name: "changed after it was added", data: wrap(changed()), run: true, addrs: [][]uint64{addrs(0, 1)},
			warn: `unknown trace entry key "mystery"`},
		{name: "one entry in two lists", data: wrap([]any{pt.Memoize(e(0)), e(1)}, []any{pt.Ref(0)}), run: true,
			addrs: [][]uint64{addrs(0, 1), addrs(0)}},
		{name: "records with no container", data: wrapK([]any{ek(0), ek(1), ek(2)}), run: true, bare: true, addrs: [][]uint64{addrs(0, 1, 2)}},
		{name: "a record twice", data: wrapK([]any{pt.Memoize(ek(0)), ek(1), pt.Ref(1)}), bare: true, addrs: [][]uint64{addrs(0, 1, 0)}},
		{name: "a record in two lists", data: wrapK([]any{pt.Memoize(ek(0)), ek(1)}, []any{pt.Ref(1)}), run: true, bare: true,
			addrs: [][]uint64{addrs(0, 1), addrs(0)}},
		{name: "a record changed after it was added (SETITEMS)", data: wrapK(changedK(false)), run: true, addrs: [][]uint64{addrs(0, 1)},
			warn: `unknown trace entry key "mystery"`},
		{name: "a record changed after it was added (SETITEM)", data: wrapK(changedK(true)), run: true, addrs: [][]uint64{addrs(0, 1)},
			warn: `unknown trace entry key "mystery"`},
		{name: "a record for a device's list", data: wrapK(ek(0)), err: "device_traces[0]"},
		{name: "a record for a segment", data: pt.Of(pt.Dict{{"x", pt.Memoize(pt.FrameDict("/src/train.py", 10, "step"))},
			{"segments", []any{ek(0)}}, {"device_traces", []any{}}}), err: "segments[0]: expected a record, found a trace entry"},
	}
	inputs := map[string][]byte{}
	for _, c := range cases {
		inputs[c.name] = c.data
		g, root, err := decodePickle(c.data)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var dev0 val
		for i, kv := 0, g.seq(root); i < len(kv); i += 2 {
			if g.strs[kv[i].ref] == "device_traces" {
				if devs := g.seq(kv[i+1]); len(devs) > 0 {
					dev0 = devs[0]
				}
			}
		}
		if dev0.k == kList {
			if run := g.cont(dev0.ref).kind == cTraceList; run != c.run {
				t.Errorf("%s: kept as a run %v, want %v", c.name, run, c.run)
			}
		}
		if c.bare {
			for i := range g.conts.len() {
				if g.conts.at(uint32(i)).kind == cTrace {
					t.Errorf("%s: an entry got a container", c.name)
					break
				}
			}
		}
		data := append([]byte(nil), c.data...)
		s, err := DecodeSnapshot(context.Background(), &data, nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one naming %s", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var got [][]uint64
		for _, tr := range s.Traces {
			var a []uint64
			for _, en := range tr {
				a = append(a, en.Addr)
			}
			got = append(got, a)
		}
		if !reflect.DeepEqual(got, c.addrs) {
			t.Errorf("%s: addresses %v, want %v", c.name, got, c.addrs)
		}
		if tr := s.Traces[0]; len(tr) > 0 && tr[0].Addr == 4096 && (tr[0].Size != 512 || tr[0].TimeUS != 1000 || s.FramesOf(&tr[0]).Len() != 1 ||
			*s.FramesOf(&tr[0]).At(0) != (schema.Frame{Filename: "/src/train.py", Name: "step", Line: 10})) {
			t.Errorf("%s: first entry %+v", c.name, tr[0])
		}
		if w := strings.Join(s.Warnings, "\n"); c.warn != "" && !strings.Contains(w, c.warn) {
			t.Errorf("%s: warnings lack %q: %s", c.name, c.warn, w)
		}
	}
	if _, err := exec.LookPath("python3"); err == nil {
		if n := compareWithPython(t, inputs); n != len(inputs) {
			t.Errorf("CPython agreed on %d of %d", n, len(inputs))
		}
	}
}
