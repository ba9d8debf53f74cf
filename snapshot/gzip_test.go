package snapshot

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGunzipCeiling: the absolute ceiling (--max-inflate) on both sides,
// the ratio ceiling, a lying trailer, and cancellation.
func TestGunzipCeiling(t *testing.T) {
	data := bytes.Repeat([]byte("memscope "), 100_000) // 900 kB, compresses ~300x
	z := gz(t, data)
	n := int64(len(data))
	ctx := context.Background()
	if out, err := gunzip(WithInflateMax(ctx, n), z); err != nil || !bytes.Equal(out, data) {
		t.Errorf("at the ceiling: %v", err)
	}
	if _, err := gunzip(WithInflateMax(ctx, n-1), z); err == nil || !strings.Contains(err.Error(), "--max-inflate") {
		t.Errorf("one byte over the ceiling: %v", err)
	}
	// Without a flag the ratio ceiling (200x + 1 MiB) still refuses a
	// member that expands far more than snapshots do.
	bomb := gz(t, make([]byte, 64<<20))
	if _, err := gunzip(ctx, bomb); err == nil || !strings.Contains(err.Error(), "expands more than") {
		t.Errorf("64 MiB of zeros from %d bytes: %v", len(bomb), err)
	}
	// The trailer's size is a hint, never trusted.
	for _, claim := range []uint32{1, 1 << 31} {
		lie := append([]byte(nil), z...)
		binary.LittleEndian.PutUint32(lie[len(lie)-4:], claim)
		if _, err := gunzip(WithInflateMax(ctx, n-1), lie); err == nil {
			t.Errorf("a trailer claiming %d bytes let %d through", claim, n)
		}
		// gzip checks ISIZE at the end: a lying trailer is a corrupt file.
		if _, err := gunzip(ctx, lie); err == nil {
			t.Errorf("a trailer claiming %d bytes: no error", claim)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := gunzip(cctx, z); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if got := InflateMax(ctx); got <= 0 || got > DefaultInflateMax {
		t.Errorf("default ceiling %d", got)
	}
	if got := InflateMax(WithInflateMax(ctx, 0)); got != InflateMax(ctx) {
		t.Errorf("0 keeps the default: %d", got)
	}
}

// TestUnknownForm: what a .gz may hold is judged from its first bytes only
// when they can begin no form decode reads.
func TestUnknownForm(t *testing.T) {
	for head, want := range map[string]bool{
		"\x80\x04\x95": false, "\x80\x02}": false, "\x1f\x8b\x08": false, // pickles, a gzip inside
		"{\"segments\"": false, "  \n[": false, "\xef\xbb\xbf{": false, "\t<html>": false, // JSON, HTML
		"     ":        false, // all whitespace: it may begin any of them later
		"\x00\x00\x00": true, "I1\n.": true, "hello": true, " x": true,
	} {
		if got := unknownForm([]byte(head)); got != want {
			t.Errorf("%q: unknown %v, want %v", head, got, want)
		}
	}
}
