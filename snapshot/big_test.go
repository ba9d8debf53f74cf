package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// bigPickle writes a snapshot pickle of about target bytes, as PyTorch
// would: one segment and a trace of alloc/free_completed pairs, each entry
// with its own frame dicts (distinct stacks, unshared frames: the shape of
// long real runs). It returns the bytes and the number of trace entries.
func bigPickle(target int) ([]byte, int) {
	var b bytes.Buffer
	str := func(s string) {
		if len(s) < 256 {
			b.Write([]byte{opShortBinUni, byte(len(s))})
		} else {
			b.WriteByte(opBinUnicode)
			binary.Write(&b, binary.LittleEndian, uint32(len(s)))
		}
		b.WriteString(s)
	}
	num := func(v int64) {
		if v >= 0 && v < 1<<31 {
			b.WriteByte(opBinInt)
			binary.Write(&b, binary.LittleEndian, int32(v))
			return
		}
		b.Write([]byte{opLong1, 8})
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.Write([]byte{opProto, 4, opEmptyDict, opMark})
	str("segments")
	b.Write([]byte{opEmptyList, opMark, opEmptyDict, opMark})
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
	b.Write([]byte{opEmptyList, opEmptyDict, opMark})
	str("address")
	num(base)
	str("size")
	num(1 << 30)
	str("requested_size")
	num(0)
	str("state")
	str("inactive")
	b.Write([]byte{opSetItems, opAppend})
	b.Write([]byte{opSetItems, opAppends})
	str("device_traces")
	b.Write([]byte{opEmptyList, opEmptyList, opMark})
	n := 0
	for b.Len() < target-64 || n%2 == 1 {
		action := "alloc"
		if n%2 == 1 {
			action = "free_completed"
		}
		b.Write([]byte{opEmptyDict, opMark})
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
		b.Write([]byte{opEmptyList, opMark})
		for f := 0; f < 4; f++ {
			b.Write([]byte{opEmptyDict, opMark})
			str("filename")
			str(fmt.Sprintf("/workspace/model/layer_%d.py", (n+f)%97))
			str("line")
			num(int64(n%5000 + f))
			str("name")
			str(fmt.Sprintf("forward_%d", n%131))
			b.WriteByte(opSetItems)
		}
		b.Write([]byte{opAppends, opSetItems})
		n++
	}
	b.Write([]byte{opAppends, opAppend, opSetItems, opStop})
	return b.Bytes(), n
}

// TestSnapshotsAroundGCThreshold opens snapshots just under and just over
// gcThreshold (64 MiB), where decoding starts collecting between phases.
func TestSnapshotsAroundGCThreshold(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test writes two 64 MiB files")
	}
	dir := t.TempDir()
	for _, size := range []int{gcThreshold - 4096, gcThreshold + 4096} {
		data, n := bigPickle(size)
		if (len(data) > gcThreshold) != (size > gcThreshold) {
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
