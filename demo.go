package main

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/charmbracelet/x/term"

	"memscope/model"
	"memscope/nvml"
	"memscope/tui"
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

// cmdDemo opens the explorer over the bundled samples and eight simulated
// GPUs.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "memscope demo [--interval D]", stderr)
	interval := fs.Duration("interval", 500*time.Millisecond, "simulated sampling interval")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	dir, err := extractDemo()
	if err != nil {
		return fmt.Errorf("demo data: %w", err)
	}
	defer os.RemoveAll(dir)
	ws := model.New(ctx, nil)
	ws.Open(dir)
	ws.MarkDemo()
	if f, ok := stdout.(*os.File); !ok || !term.IsTerminal(f.Fd()) {
		ws.Wait()
		fmt.Fprintln(stdout, "memscope demo needs a terminal; the bundled data:")
		for _, s := range ws.Sources() {
			fmt.Fprintf(stdout, "  %-12s %-8s %s\n", s.Kind, s.State, s.Name())
		}
		return nil
	}
	return tui.Run(ctx, ws, tui.Options{Demo: true, Live: nvml.NewFake(8, nil), Interval: *interval})
}
