package pickle

import (
	"context"
	"os"
	"testing"
)

// BenchmarkDecodeFile decodes and binds MEMSCOPE_BENCH_FILE (a plain
// pickle), as a report does before its analysis, from memory:
//
//	MEMSCOPE_BENCH_FILE=/tmp/bigtrain.pickle go test ./snapshot/pickle -run '^$' -bench DecodeFile -benchtime 10x
func BenchmarkDecodeFile(b *testing.B) {
	path := os.Getenv("MEMSCOPE_BENCH_FILE")
	if path == "" {
		b.Skip("MEMSCOPE_BENCH_FILE names no snapshot")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in := data
		if _, err := DecodeSnapshot(context.Background(), &in, nil); err != nil {
			b.Fatal(err)
		}
	}
}
