package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestOpenAroundMapMin: files under mapMin are read, larger ones mapped;
// both give what decoding the same bytes from memory gives.
func TestOpenAroundMapMin(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{mapMin - 4096, mapMin + 4096} {
		data, n := bigPickle(size)
		if (len(data) >= mapMin) != (size >= mapMin) {
			t.Fatalf("generator missed its side of the threshold: %d bytes for %d", len(data), size)
		}
		path := filepath.Join(dir, fmt.Sprintf("s%d.pickle", len(data)))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want, err := Decode(context.Background(), append([]byte(nil), data...))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Open(context.Background(), path)
		if err != nil {
			t.Fatalf("%d bytes: %v", len(data), err)
		}
		if len(got.Trace(0)) != n || !reflect.DeepEqual(got.Traces, want.Traces) || !reflect.DeepEqual(got.Segments, want.Segments) {
			t.Errorf("%d bytes: the file opens to another snapshot than its bytes decode to", len(data))
		}
		// A copy cut short is refused with the file's name either way.
		trunc := filepath.Join(dir, "trunc.pickle")
		if err := os.WriteFile(trunc, data[:len(data)-100], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(context.Background(), trunc); err == nil || !strings.Contains(err.Error(), trunc) || !strings.Contains(err.Error(), "data ends") {
			t.Errorf("%d bytes, truncated: %v", len(data), err)
		}
	}
}

// TestMappedFileTruncatedWhileDecoding: a file cut short by another
// program while it is mapped makes reads past its new end fault (SIGBUS);
// the decoder reports that as an error instead of dying.
func TestMappedFileTruncatedWhileDecoding(t *testing.T) {
	data, _ := bigPickle(mapMin + 4096)
	path := filepath.Join(t.TempDir(), "s.pickle")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapped, unmap, err := mapFile(f, len(data))
	if err != nil {
		t.Skipf("memory-mapping is not available on this system (the reader falls back to reading the file): %v", err)
	}
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	s, err := decodeMapped(context.Background(), mapped, unmap, nil)
	if err == nil || !strings.Contains(err.Error(), "changed while it was read") {
		t.Fatalf("got %v, %v; want an error saying the file changed", s, err)
	}
}
