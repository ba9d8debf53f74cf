package pickle

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
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
		t.Skip("writes 70,000-entry pickles")
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
// joined, a cancelled decode. The process's mappings do not grow.
func TestOffHeapFreed(t *testing.T) {
	needPython(t)
	if runtime.GOOS != "linux" {
		t.Skip("off-heap chunks are Linux's")
	}
	data := genPickle(t, "distinct", 5000)
	n := len(data)
	late, early := batchAfter(t, data, n*3/4), batchAfter(t, data, n/4)
	insert := func(at int, ops ...byte) []byte {
		return append(append(append([]byte{}, data[:at]...), ops...), data[at:]...)
	}
	longGet := func(idx uint32) []byte {
		return binary.LittleEndian.AppendUint32([]byte{opMark, opLongBinGet}, idx)
	}
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
		// The helper finishes; the join is refused (an explicit memo
		// index), or the main machine fails before it.
		{"BINPUT after the prefix", context.Background(), insert(early, opNone, opBinPut, 3, opPop)},
		{"bad opcode before the region", context.Background(), insert(early, 0xff)},
		{"read ahead in the region", context.Background(), insert(late, append(longGet(1<<31-5), opPopMark)...)},
	}
	// Each chunk is 4 MiB of address space, mapped until it is freed.
	vmSize := func() int64 {
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Skip(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				return kb << 10
			}
		}
		t.Skip("no VmSize")
		return 0
	}
	run := func() {
		for _, in := range inputs {
			d, root, err := decodeWith(in.ctx, in.data, nil, splitAt(1.0/32, 0.5), nil, true)
			if err == nil {
				if d.g.traces.len() > 0 && !d.g.traces.mapped[0] {
					t.Fatalf("%s: records on the heap", in.name)
				}
				_, _ = bindGraph(d.g, root, len(in.data)) // an error frees too
			}
		}
	}
	run()
	before := vmSize()
	for range 20 {
		run()
	}
	// A leak of one chunk per run would add 80 MiB; the heap's own
	// reservations grow by far less for these small inputs.
	if after := vmSize(); after > before+40<<20 {
		t.Errorf("address space grew from %d to %d MiB over 20 runs", before>>20, after>>20)
	}
}
