package pickle

import (
	"context"
	"testing"

	"memscope/internal/pickletest"
)

// TestFrameLines: a frame's line keeps every int64 value (around 2^32 too,
// where an earlier form held lines in 32 bits), and lines wider than int64
// read as -1. Each frame is also read again through the memo (GET), as
// shared frames are.
func TestFrameLines(t *testing.T) {
	const u32 = 1<<32 - 1
	huge := []byte{pickletest.OpLong1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x40} // 2^70
	for _, c := range []struct {
		line any
		want int64
	}{
		{0, 0}, {1, 1}, {u32 - 1, u32 - 1}, {u32, u32},
		{u32 + 1, u32 + 1}, {int64(1) << 62, int64(1) << 62}, {huge, -1}, {-1, -1}, {-7, -7},
	} {
		fr := pickletest.Dict{{"filename", "/m/a.py"}, {"line", c.line}, {"name", "f"}}
		data := pickletest.Of(pickletest.Dict{
			{"segments", []any{pickletest.SegmentDict(4096, 2048,
				pickletest.BlockDict(4096, 1024, 1000, "active_allocated", []any{pickletest.Memoize(fr)}),
				pickletest.BlockDict(5120, 1024, 1000, "active_allocated", []any{pickletest.Ref(0), pickletest.FrameDict("/m/b.py", 2, "g")}))}},
		})
		s, err := DecodeSnapshot(context.Background(), &data, nil)
		if err != nil {
			t.Fatalf("line %v: %v", c.line, err)
		}
		b := s.Segments[0].Blocks
		if got := s.BlockFrames(&b[0]).At(0).Line; got != c.want {
			t.Errorf("line %v read as %d, want %d", c.line, got, c.want)
		}
		if f := s.BlockFrames(&b[1]); f.At(0).Line != c.want || f.At(1).Name != "g" {
			t.Errorf("line %v through the memo: %+v", c.line, f)
		}
	}
}
