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

// TestOpenJSONAroundMapMin: a JSON snapshot under mapMin is read, a larger
// one mapped (also after leading whitespace and a byte-order mark); each
// opens to what its bytes decode to from memory, and a copy cut short is
// refused with the file's name.
func TestOpenJSONAroundMapMin(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{mapMin - 4096, mapMin + 4096} {
		body, n := bigJSON(size)
		for _, lead := range []string{"", " \n\t\xef\xbb\xbf "} {
			data := append([]byte(lead), body...)
			path := filepath.Join(dir, fmt.Sprintf("s%d.json", len(data)))
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
			if len(got.Trace(0)) != n || !reflect.DeepEqual(got.Traces, want.Traces) || !reflect.DeepEqual(got.Segments, want.Segments) || got.Format != "json" {
				t.Errorf("%d bytes (lead %q): the file opens to another snapshot than its bytes decode to", len(data), lead)
			}
			if _, err, mapped := openMapped(context.Background(), path, nil); mapped != (len(data) >= mapMin) || err != nil {
				t.Errorf("%d bytes (lead %q): mapped %v (%v), want %v", len(data), lead, mapped, err, len(data) >= mapMin)
			}
		}
		trunc := filepath.Join(dir, "trunc.json")
		if err := os.WriteFile(trunc, body[:len(body)-100], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(context.Background(), trunc); err == nil || !strings.Contains(err.Error(), trunc) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%d bytes, truncated: %v", len(body), err)
		}
	}
}
