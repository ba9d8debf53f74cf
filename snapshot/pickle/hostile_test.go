package pickle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hostile builds pickles that attack the decoder's memo and stack. Each
// must end with an error that names the file and a byte offset, without
// building anything proportional to the attack.
func hostileInputs() map[string][]byte {
	out := map[string][]byte{}
	le32 := func(b *bytes.Buffer, v uint32) {
		var x [4]byte
		binary.LittleEndian.PutUint32(x[:], v)
		b.Write(x[:])
	}
	{
		// LONG_BINPUT indices 4095 apart: dense storage would need 10^9
		// slots for this 1.3 MB file.
		var b bytes.Buffer
		b.Write([]byte{opProto, 4, opNone})
		for i := uint32(1); b.Len() < 1300<<10; i++ {
			b.WriteByte(opLongBinPut)
			le32(&b, i*4095)
		}
		out["sparse_memo"] = b.Bytes()
	}
	{
		var b bytes.Buffer
		b.Write([]byte{opProto, 4, opNone, opLongBinPut})
		le32(&b, 1<<32-2)
		b.WriteByte(opLongBinGet)
		le32(&b, 1<<32-2)
		b.WriteByte(opLongBinGet)
		le32(&b, 1<<32-3) // never written
		out["memo_near_2^32"] = b.Bytes()
	}
	{
		var b bytes.Buffer
		b.Write([]byte{opProto, 4, opEmptyDict})
		b.Write(bytes.Repeat([]byte{opMemoize}, 1_000_000))
		out["million_memoize"] = b.Bytes() // no STOP
	}
	{
		// {"segments": L} where L = [L]: a list that appends to itself.
		var b bytes.Buffer
		b.Write([]byte{opProto, 4, opEmptyDict, opShortBinUni, 8})
		b.WriteString("segments")
		b.Write([]byte{opEmptyList, opBinPut, 0, opBinGet, 0, opAppend, opSetItem, opStop})
		out["self_appending_list"] = b.Bytes()
	}
	{
		// A string whose declared length is one byte past the end.
		var b bytes.Buffer
		b.Write([]byte{opProto, 4, opBinUnicode})
		le32(&b, 11)
		b.WriteString("0123456789")
		out["length_past_end"] = b.Bytes()
	}
	return out
}

func TestHostilePickles(t *testing.T) {
	for name, data := range hostileInputs() {
		t.Run(name, func(t *testing.T) {
			// A guard against hangs, not a timing: these take milliseconds.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			in := append([]byte(nil), data...)
			_, err := DecodeSnapshot(ctx, &in, nil)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("decoded without an error")
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatal("still running after 20 s")
			}
			// The decoder names the byte offset; the self-referencing list
			// decodes (Python allows it) and the binder names where in the
			// snapshot it sits.
			where := "pickle byte "
			if name == "self_appending_list" {
				where = "segments[0]"
			}
			msg := err.Error()
			if !strings.Contains(msg, where) {
				t.Errorf("error does not name %q: %v", where, err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 200<<20 {
				t.Errorf("allocated %d MiB", grew>>20)
			}
		})
	}
}

// TestMemoDenseSparseBoundary stores indices on both sides of the dense
// table's limits and reads each back.
func TestMemoDenseSparseBoundary(t *testing.T) {
	d := newDecoder(nil)
	v := func(i int64) val { return val{k: kInt, i: i} }
	idx := []uint32{0, 1, denseMemoGap - 1, denseMemoGap, 2 * denseMemoGap, 1 << 31, 1<<32 - 1}
	for i, x := range idx {
		if err := d.setMemo(x, v(int64(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	for i, x := range idx {
		got, err := d.getMemo(x, 0)
		if err != nil || got.i != int64(i) {
			t.Errorf("memo %d: %v %v", x, got, err)
		}
	}
	// Dense up to 2*puts+gap: the far indices went to the map.
	if d.memo.len() > 2*len(idx)+denseMemoGap {
		t.Errorf("dense table grew to %d slots for %d puts", d.memo.len(), len(idx))
	}
	if len(d.memoSparse) == 0 {
		t.Error("far indices were not stored sparsely")
	}
}

// TestCancelStopsDecoding cancels a decode of a large input mid-way.
func TestCancelStopsDecoding(t *testing.T) {
	var b bytes.Buffer
	b.Write([]byte{opProto, 4, opEmptyList, opMark})
	for b.Len() < 64<<20 {
		b.Write([]byte{opNone, opNone, opNone, opNone, opNone, opNone, opNone, opNone})
	}
	data := b.Bytes()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		_, _, err := decodePickleCtx(ctx, data, nil, nil, nil)
		done <- err
	}()
	<-started
	time.Sleep(5 * time.Millisecond)
	t0 := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			// It may have finished (with a truncation error) first.
			t.Logf("decode ended before the cancel: %v", err)
		}
		t.Logf("stopped %v after cancel", time.Since(t0))
	case <-time.After(10 * time.Second):
		t.Fatal("decode ignored the cancellation")
	}
}
