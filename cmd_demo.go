package main

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/charmbracelet/x/term"

	"memscope/internal/textsafe"
	"memscope/model"
	"memscope/nvml"
	"memscope/trace"
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
	// One modification time for every sample: they were bundled together,
	// so the explorer opens on the first listed, not on the one written
	// last (it shows the newest snapshot of a folder).
	now := time.Now()
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
		if err := os.WriteFile(target, b, 0o644); err != nil {
			return err
		}
		return os.Chtimes(target, now, now)
	})
	if err == nil {
		err = writeDemoErrors(filepath.Join(dir, "traces", "megatron_trace_memory"), filepath.Join(dir, "traces", "SYNTHETIC_estimate_errors"))
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// demoSimScale is how the synthetic comparison scales the real Megatron
// simulation per rank: the real samples' simulation matches its run almost
// exactly, so the Traces tab would never show an estimate that is off.
var demoSimScale = map[int]float64{0: 0.88, 2: 1.07}

// writeDemoErrors derives a SYNTHETIC comparison from the bundled Megatron
// run: the real traces as they are, and the simulated ones of ranks 0 and 2
// scaled so rank 0 is underestimated and rank 2 overestimated. The folder
// name says it is synthetic.
func writeDemoErrors(megatron, out string) error {
	ctx := context.Background()
	runs, err := model.Load(ctx, model.KindTraceCompare, []string{filepath.Join(megatron, "real"), filepath.Join(megatron, "sim")}, nil, nil)
	if err != nil {
		return err
	}
	real, sim := runs.Real, runs.Sim
	write := func(side string, r *trace.Rank, scale float64) error {
		its := slices.Clone(r.Iterations)
		for i := range its {
			its[i].Allocated = slices.Clone(its[i].Allocated)
			for j := range its[i].Allocated {
				its[i].Allocated[j] *= scale
			}
			if its[i].PeakAllocated != trace.Unset {
				its[i].PeakAllocated *= scale
			}
		}
		p := filepath.Join(out, side, filepath.Base(r.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return trace.WriteMegatron(p, its)
	}
	for _, r := range real.Ranks {
		if err := write("real", r, 1); err != nil {
			return err
		}
	}
	for _, r := range sim.Ranks {
		if f, ok := demoSimScale[r.Rank]; ok {
			if err := write("sim", r, f); err != nil {
				return err
			}
		}
	}
	return nil
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
			fmt.Fprintf(stdout, "  %-12s %-8s %s\n", s.Kind, s.State, textsafe.Safe(s.Name()))
		}
		return nil
	}
	return tui.Run(ctx, ws, tui.Options{Demo: true, Live: nvml.NewFake(8, nil), Interval: *interval})
}
