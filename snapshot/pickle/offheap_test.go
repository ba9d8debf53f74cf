package pickle

import (
	"bytes"
	"context"
	"reflect"
	"runtime"
	"testing"
)

// TestOffHeapAgrees: decoding with the trace records off the heap, and
// binding that frees each chunk of records once read, gives exactly the
// snapshot that on-heap decoding and binding give: one device whose trace
// crosses a chunk of records, and three devices where the last one's
// records share a chunk with the others'.
func TestOffHeapAgrees(t *testing.T) {
	needPython(t)
	if testing.Short() {
		t.Skip("-short: writes two 70,000-entry pickles with python3")
	}
	for _, shape := range []string{"distinct", "multi"} {
		data := genPickle(t, shape, chunkLen+4464)
		g, root, err := decodePickle(data)
		if err != nil {
			t.Fatal(err)
		}
		want, err := newBinder(g, len(data)).bindRoot(root)
		if err != nil {
			t.Fatal(err)
		}
		in := bytes.Clone(data)
		got, err := DecodeSnapshot(context.Background(), &in, nil)
		if err != nil {
			t.Fatal(err)
		}
		want.Format = got.Format
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the snapshots differ", shape)
		}
		if n := len(got.Traces[len(got.Traces)-1]); shape == "distinct" && n <= chunkLen {
			t.Errorf("%s: %d entries do not cross a chunk", shape, n)
		}
	}
}

// TestOffHeapFreed: the records held off the heap are given back on every
// path: bound and freed, a decoding error, a helper that gives up or is not
// joined, a cancelled decode. The pool that counts them ends at zero.
func TestOffHeapFreed(t *testing.T) {
	needPython(t)
	data := genPickle(t, "distinct", 5000)
	n := len(data)
	late, early := batchAfter(t, data, n*3/4), batchAfter(t, data, n/4)
	insert := func(at int, ops ...byte) []byte { return insertOps(data, at, ops...) }
	// The APPENDS before the helper's region read as BININT1, whose
	// argument is the region's first byte: the main machine passes the
	// boundary without stopping there, decodes the rest itself and drops
	// the helper's finished work.
	plan, ok := planSplit(data, n/32, n/2)
	if !ok || data[plan.at-1] != opAppends {
		t.Fatal("no plan for the test input")
	}
	skipped := bytes.Clone(data)
	skipped[plan.at-1] = opBinInt1
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	inputs := []struct {
		name string
		ctx  context.Context
		data []byte
	}{
		{"whole", context.Background(), data},
		{"truncated in the region", context.Background(), data[:n*7/8]},
		{"STOP in the region", context.Background(), insert(late+1, opNone, opStop)},
		{"POP below the region", context.Background(), insert(late+1, opPop, opPop)},
		{"cancelled", cancelled, data},
		// The helper finishes; the join is refused (a read ahead of the
		// memo), or the main machine fails before it.
		{"read ahead in the region", context.Background(), insert(late, append(longGet(1<<31-5), opPopMark)...)},
		{"bad opcode before the region", context.Background(), insert(early, 0xff)},
		{"boundary passed", context.Background(), skipped},
	}
	for _, in := range inputs {
		pool := &offHeapPool{}
		d, root, err := decodeWith(in.ctx, in.data, nil, splitAt(1.0/32, 0.5), nil, pool)
		if err == nil {
			if runtime.GOOS == "linux" && (pool.live.Load() == 0 || !d.g.traces.mapped[0]) {
				t.Fatalf("%s: records on the heap", in.name)
			}
			_, _ = bindGraph(d.g, root, len(in.data)) // an error frees too
		}
		if live := pool.live.Load(); live != 0 {
			t.Errorf("%s: %d chunks not given back", in.name, live)
		}
	}
}
