package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"memscope/internal/pickletest"
	"memscope/snapshot/pickle"
)

// bigPickle writes a snapshot pickle of about target bytes, as PyTorch
// would: one segment and a trace of alloc/free_completed pairs, each entry
// with its own frame dicts (distinct stacks, unshared frames: the shape of
// long real runs). It returns the bytes and the number of trace entries.
func bigPickle(target int) ([]byte, int) {
	var b bytes.Buffer
	str := func(s string) {
		if len(s) < 256 {
			b.Write([]byte{pickletest.OpShortBinUni, byte(len(s))})
		} else {
			b.WriteByte(pickletest.OpBinUnicode)
			binary.Write(&b, binary.LittleEndian, uint32(len(s)))
		}
		b.WriteString(s)
	}
	num := func(v int64) {
		if v >= 0 && v < 1<<31 {
			b.WriteByte(pickletest.OpBinInt)
			binary.Write(&b, binary.LittleEndian, int32(v))
			return
		}
		b.Write([]byte{pickletest.OpLong1, 8})
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.Write([]byte{pickletest.OpProto, 4, pickletest.OpEmptyDict, pickletest.OpMark})
	str("segments")
	b.Write([]byte{pickletest.OpEmptyList, pickletest.OpMark, pickletest.OpEmptyDict, pickletest.OpMark})
	const base = int64(0x7f0000000000)
	for _, kv := range []struct {
		k string
		v int64
	}{{"device", 0}, {"address", base}, {"total_size", 1 << 30}, {"allocated_size", 0}, {"active_size", 0},
		{"requested_size", 0}, {"stream", 0}} {
		str(kv.k)
		num(kv.v)
	}
	str("segment_type")
	str("large")
	str("blocks")
	b.Write([]byte{pickletest.OpEmptyList, pickletest.OpEmptyDict, pickletest.OpMark})
	str("address")
	num(base)
	str("size")
	num(1 << 30)
	str("requested_size")
	num(0)
	str("state")
	str("inactive")
	b.Write([]byte{pickletest.OpSetItems, pickletest.OpAppend})
	b.Write([]byte{pickletest.OpSetItems, pickletest.OpAppends})
	str("device_traces")
	b.Write([]byte{pickletest.OpEmptyList, pickletest.OpEmptyList, pickletest.OpMark})
	n := 0
	for b.Len() < target-64 || n%2 == 1 {
		action := "alloc"
		if n%2 == 1 {
			action = "free_completed"
		}
		b.Write([]byte{pickletest.OpEmptyDict, pickletest.OpMark})
		str("action")
		str(action)
		str("addr")
		num(base + int64(n/2%1000)*(1<<20))
		str("size")
		num(int64(512 * (1 + n%977)))
		str("stream")
		num(0)
		str("time_us")
		num(1_700_000_000_000_000 + int64(n))
		str("frames")
		b.Write([]byte{pickletest.OpEmptyList, pickletest.OpMark})
		for f := 0; f < 4; f++ {
			b.Write([]byte{pickletest.OpEmptyDict, pickletest.OpMark})
			str("filename")
			str(fmt.Sprintf("/workspace/model/layer_%d.py", (n+f)%97))
			str("line")
			num(int64(n%5000 + f))
			str("name")
			str(fmt.Sprintf("forward_%d", n%131))
			b.WriteByte(pickletest.OpSetItems)
		}
		b.Write([]byte{pickletest.OpAppends, pickletest.OpSetItems})
		n++
	}
	b.Write([]byte{pickletest.OpAppends, pickletest.OpAppend, pickletest.OpSetItems, pickletest.OpStop})
	return b.Bytes(), n
}

// TestSnapshotsAroundGCThreshold opens snapshots just under and just over
// pickle.GCThreshold (32 MiB), where decoding starts collecting between phases.
func TestSnapshotsAroundGCThreshold(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test writes two files of pickle.GCThreshold")
	}
	dir := t.TempDir()
	for _, size := range []int{pickle.GCThreshold - 4096, pickle.GCThreshold + 4096} {
		data, n := bigPickle(size)
		if (len(data) > pickle.GCThreshold) != (size > pickle.GCThreshold) {
			t.Fatalf("generator missed its side of the threshold: %d bytes for %d", len(data), size)
		}
		path := filepath.Join(dir, fmt.Sprintf("big_%d.pickle", len(data)))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatalf("%d bytes: %v", len(data), err)
		}
		if got := len(s.Trace(0)); got != n {
			t.Errorf("%d bytes: %d trace entries, want %d", len(data), got, n)
		}
		a := Analyze(s, nil)
		tl := a.Timeline(0)
		// Pairs alloc/free over 1000 addresses: at most one live each.
		if tl == nil || tl.EndActive != 0 || tl.Peak.Active <= 0 || !tl.Complete {
			t.Errorf("%d bytes: replay end %d peak %d complete %v", len(data), tl.EndActive, tl.Peak.Active, tl.Complete)
		}
		if s.Format != "pickle protocol 4" {
			t.Errorf("%d bytes: format %q", len(data), s.Format)
		}
	}
}

// bigJSON is a JSON snapshot of at least target bytes: one segment and a
// trace whose entries have three frames; n is its number of entries.
func bigJSON(target int) ([]byte, int) {
	var b strings.Builder
	b.WriteString(`{"segments": [{"device": 0, "address": 4096, "total_size": 1073741824, "stream": 0, "segment_type": "large", "blocks": []}], "device_traces": [[`)
	n := 0
	for b.Len() < target-2 {
		if n > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"action": "alloc", "addr": %d, "size": 512, "stream": 0, "time_us": %d, "frames": [{"filename": "/src/train.py", "line": %d, "name": "step"}, {"filename": "/src/model.py", "line": 7, "name": "forward"}, {"filename": "/src/nn.py", "line": %d, "name": "linear"}]}`,
			4096+512*n, 1000+n, 10+n%50, n%13)
		n++
	}
	b.WriteString("]]}")
	return []byte(b.String()), n
}
