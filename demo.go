package main

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"
)

// demoData is the bundled sample data of `memscope demo`: real allocator
// snapshots, a real Megatron run with its simulation, generated traces of
// the newer format, and estimates (see testdata/README.md for sources).
//
//go:embed testdata/snapshots/*.pickle testdata/traces/megatron_trace_memory testdata/estimates/SYNTHETIC_peak_snapshot.json
var demoData embed.FS

// extractDemo writes the demo data into a new temporary directory and
// returns it; the caller removes it.
func extractDemo() (string, error) {
	dir, err := os.MkdirTemp("", "memscope-demo-")
	if err != nil {
		return "", err
	}
	err = fs.WalkDir(demoData, "testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata", p)
		target := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := demoData.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
