package trace

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Benchmarks on generated traces: 256 rank files, about 2 GB of JSON, made
// once by scripts/gen_traces.py into $MEMSCOPE_BENCH_DIR (default: the
// system temp dir). The Python baseline json.loads the same files in the
// same command:
//
//	go test ./trace -run '^$' -bench Load256 -benchtime 3x

func benchTraceDir(b *testing.B) string {
	b.Helper()
	dir := os.Getenv("MEMSCOPE_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "memscope-bench")
	}
	out := filepath.Join(dir, "traces256")
	real := filepath.Join(out, "memory_traces")
	if files, _ := filepath.Glob(filepath.Join(real, "*.json")); len(files) == 256 {
		return real
	}
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is needed to generate the benchmark traces")
	}
	cmd := exec.Command("python3", "../scripts/gen_traces.py", "--compact", "--ranks", "256", "--iterations", "10",
		"--samples", "9000", out)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	return real
}

func BenchmarkLoad256Ranks(b *testing.B) {
	dir := benchTraceDir(b)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var total int64
	for _, f := range files {
		st, _ := os.Stat(f)
		total += st.Size()
	}
	b.Run("memscope", func(b *testing.B) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			s := LoadFiles(context.Background(), files)
			if len(s.Ranks) != 256 || len(s.Errors) > 0 {
				b.Fatalf("loaded %d ranks, errors %v", len(s.Ranks), s.Errors)
			}
		}
	})
	b.Run("python-json.load", func(b *testing.B) {
		if _, err := exec.LookPath("python3"); err != nil {
			b.Skip("python3 not found")
		}
		b.SetBytes(total)
		script := "import json,sys\nfor p in sys.argv[1:]:\n    json.load(open(p))"
		for i := 0; i < b.N; i++ {
			if out, err := exec.Command("python3", append([]string{"-c", script}, files...)...).CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, strings.TrimSpace(string(out)))
			}
		}
	})
}

func BenchmarkMinMax1M(b *testing.B) {
	ys := make([]float64, 1_000_000)
	for i := range ys {
		ys[i] = math.Sin(float64(i) / 1000)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if idx := MinMax(ys, 100); len(idx) != 200 {
			b.Fatalf("%d points", len(idx))
		}
	}
}
