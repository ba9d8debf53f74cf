package estimate

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkEstimate200k opens a generated 200k-tensor, 8-device peak
// snapshot (scripts/gen_estimate.py) and analyses it.
func BenchmarkEstimate200k(b *testing.B) {
	dir := os.Getenv("MEMSCOPE_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "memscope-bench")
	}
	path := filepath.Join(dir, "estimate200k.json")
	if _, err := os.Stat(path); err != nil {
		if _, err := exec.LookPath("python3"); err != nil {
			b.Skip("python3 is needed to generate the benchmark estimate")
		}
		_ = os.MkdirAll(dir, 0o755)
		if out, err := exec.Command("python3", "../../scripts/gen_estimate.py", "--tensors", "200000", "--devices", "8", path).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	for i := 0; i < b.N; i++ {
		e, err := Open(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		if a := Analyze(e, nil); len(a.Devices) != 8 {
			b.Fatal("devices")
		}
	}
}
