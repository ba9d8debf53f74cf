package snapshot_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"memscope/format"
	"memscope/snapshot"
	"memscope/snapshot/report"
)

// Benchmarks on generated snapshots. The files are made once by
// scripts/gen_snapshot.py (stdlib Python) into $MEMSCOPE_BENCH_DIR (default:
// the system temp dir) and reused. Each size also runs Python's
// pickle.load on the same file as the baseline, in the same command:
//
//	go test ./snapshot -run '^$' -bench snapshot.Snapshot -benchtime 5x
//
// The ratio of the two ns/op figures is the speed claim; peak RSS is
// measured on the binary by scripts/bench_snapshot.sh (medians of runs of
// both, in the same command).

var benchFiles = []struct {
	name string
	args []string
}{
	{"80MB-unshared-frames", []string{"--entries", "100000", "--frames", "unshared", "--depth", "46"}},
	{"1M-entries", []string{"--entries", "1000000", "--frames", "shared", "--depth", "40"}},
	// The shape of long real runs: about 110k distinct call stacks of up
	// to 30 frames, frame dicts not shared by the pickle memo (200 MB).
	{"200MB-distinct-stacks", []string{"--entries", "400000", "--frames", "unshared", "--stacks", "400000", "--depth", "30"}},
}

func benchFile(b *testing.B, name string, args []string) string {
	b.Helper()
	dir := os.Getenv("MEMSCOPE_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "memscope-bench")
	}
	path := filepath.Join(dir, name+".pickle")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is needed to generate the benchmark snapshot")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("python3", append([]string{"../scripts/gen_snapshot.py"}, append(args, path+".tmp")...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("generating %s: %v", name, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
	return path
}

func BenchmarkSnapshot(b *testing.B) {
	for _, f := range benchFiles {
		path := benchFile(b, f.name, f.args)
		st, _ := os.Stat(path)
		b.Run(f.name+"/memscope-report-json", func(b *testing.B) {
			b.SetBytes(st.Size())
			for i := 0; i < b.N; i++ {
				s, err := snapshot.Open(context.Background(), path)
				if err != nil {
					b.Fatal(err)
				}
				a := snapshot.Analyze(s, nil)
				if err := report.WriteJSON(io.Discard, []report.FileReport{{Path: path, Kind: format.Snapshot, Analysis: a}}, report.Options{TopN: 10}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(f.name+"/python-pickle.load", func(b *testing.B) {
			if _, err := exec.LookPath("python3"); err != nil {
				b.Skip("python3 not found")
			}
			b.SetBytes(st.Size())
			for i := 0; i < b.N; i++ {
				out, err := exec.Command("python3", "-c", "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))", path).CombinedOutput()
				if err != nil {
					b.Fatalf("python: %v: %s", err, out)
				}
			}
		})
	}
}

func BenchmarkReplay1M(b *testing.B) {
	path := benchFile(b, benchFiles[1].name, benchFiles[1].args) // 1M-entries
	s, err := snapshot.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tl := snapshot.Replay(s, 0, nil)
		if tl == nil || len(tl.Active) < 1000000 {
			b.Fatal(fmt.Sprint("short replay: ", tl))
		}
	}
}

// BenchmarkStateAt is the allocator state at the peak (the report's, and the
// Timeline's at its cursor) of MEMSCOPE_BENCH_FILE, or of the generated
// 1M-entry trace: it undoes every event after the peak.
//
//	MEMSCOPE_BENCH_FILE=/tmp/bigtrain.pickle go test ./snapshot -run '^$' -bench StateAt -benchtime 20x
func BenchmarkStateAt(b *testing.B) {
	s := benchSnapshot(b)
	tl := snapshot.Replay(s, s.Devices()[0], nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st := tl.StateAt(s, tl.Peak.EventIndex); st.Reserved == 0 {
			b.Fatal("an empty state at the peak")
		}
	}
}

// BenchmarkAnalyze is the analysis of a decoded snapshot (replay, roles,
// stages, leaks, the peak's state) of MEMSCOPE_BENCH_FILE, or of the
// generated 1M-entry trace:
//
//	MEMSCOPE_BENCH_FILE=/tmp/bigtrain.pickle go test ./snapshot -run '^$' -bench Analyze -benchtime 20x
func BenchmarkAnalyze(b *testing.B) {
	s := benchSnapshot(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if a := snapshot.Analyze(s, nil); len(a.Devices) == 0 {
			b.Fatal("no device analysed")
		}
	}
}

// benchSnapshot opens MEMSCOPE_BENCH_FILE, or the generated 1M-entry trace.
func benchSnapshot(b *testing.B) *snapshot.Snapshot {
	b.Helper()
	path := os.Getenv("MEMSCOPE_BENCH_FILE")
	if path == "" {
		path = benchFile(b, benchFiles[1].name, benchFiles[1].args)
	}
	s, err := snapshot.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
