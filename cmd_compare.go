package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"memscope/internal/textsafe"
	"memscope/internal/units"
	"memscope/model"
	"memscope/plot"
	"memscope/snapshot/report"
	"memscope/trace"
)

// cmdCompare implements `memscope compare`.
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("compare", "memscope compare [--json] [--iteration N] [--pair R:S,...] [--sort rank|error] [--plot DIR [--show-theoretical]] [--out DIR [--name NAME]] [--format png|svg] REAL SIM | DIR", stderr)
	asJSON := fs.Bool("json", false, "write JSON (schema in the README)")
	iteration := fs.Int("iteration", -1, "iteration to compare; -1 is each side's last")
	sortBy := fs.String("sort", "rank", "row order: rank, or error (largest |peak error| first)")
	pairFlag := fs.String("pair", "", "compare real rank R with simulated rank S (R:S, comma-separated); ranks otherwise pair only by equal numbers")
	plotDir := fs.String("plot", "", "write memory_comparison_rank_{R} pictures and an overview into DIR")
	showTheo := fs.Bool("show-theoretical", false, "draw the theoretical memory line (red) in the pictures")
	outDir := fs.String("out", "", "save text, JSON, pictures and a findings README into DIR/YYYYMMDD_HHMMSS_NAME/ (and a latest link)")
	name := fs.String("name", "", "name of the --out folder (default: from the input path)")
	format := fs.String("format", "png", "picture format: png or svg")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	if *sortBy != "rank" && *sortBy != "error" {
		fmt.Fprintf(stderr, "memscope compare: --sort must be rank or error, not %q\n", *sortBy)
		return false, errUsage
	}
	ext, ok := pictureExt(*format)
	if !ok {
		fmt.Fprintf(stderr, "memscope compare: --format must be png or svg, not %q\n", *format)
		return false, errUsage
	}
	pairs, err := trace.ParsePairing(*pairFlag)
	if err != nil {
		fmt.Fprintf(stderr, "memscope compare: %s\n", textsafe.Safe(err.Error()))
		return false, errUsage
	}
	var realPath, simPath, note string
	switch len(paths) {
	case 1:
		if realPath, simPath, note, err = trace.SplitRuns(paths[0]); err != nil {
			return false, err
		}
	case 2:
		realPath, simPath = paths[0], paths[1]
	default:
		fmt.Fprintln(stderr, "memscope compare: give REAL and SIM, or one directory holding both runs")
		fs.Usage()
		return false, errUsage
	}
	for _, p := range []string{realPath, simPath} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			if d, err := model.Detect(p); err == nil && d.Kind != model.KindTraceRun {
				return true, d.NotFor(p, "compare")
			}
		}
	}
	runs, err := model.Load(ctx, model.KindTraceCompare, []string{realPath, simPath}, nil, nil)
	if err != nil {
		return false, err
	}
	// Load compares each side's last iteration, ranks paired by number;
	// the flags may ask for another.
	c := runs.Comparison
	if *iteration >= 0 || len(pairs) > 0 {
		c = trace.Compare(runs.Real, runs.Sim, *iteration, pairs)
	}
	if note != "" {
		c.Notes = append(c.Notes, note)
	}
	// Each file's warnings once, on stderr, whatever the output format.
	seen := map[string]bool{}
	for _, rc := range c.Ranks {
		for _, sd := range []*trace.SideStats{rc.Real, rc.Sim} {
			if sd == nil || seen[sd.Path] {
				continue
			}
			seen[sd.Path] = true
			for _, w := range sd.Warnings {
				fmt.Fprintf(stderr, "memscope: warning: %s: %s\n", textsafe.Safe(sd.Path), textsafe.Safe(w))
			}
		}
	}
	if *sortBy == "error" {
		c.SortByError()
	}
	if *asJSON {
		for _, n := range c.Notes {
			fmt.Fprintf(stderr, "memscope: note: %s\n", textsafe.Safe(n))
		}
		err = c.WriteJSON(stdout)
	} else {
		fmt.Fprintf(stdout, "real: %s\nsim:  %s\n\n", textsafe.Safe(realPath), textsafe.Safe(simPath))
		err = c.WriteText(stdout)
	}
	if err != nil {
		return true, err
	}
	popt := plot.Options{ShowTheoretical: *showTheo}
	if *plotDir != "" {
		pics, err := plot.CompareDir(*plotDir, ext, c, popt)
		if err != nil {
			return true, err
		}
		fmt.Fprintf(stderr, "memscope: wrote %d pictures into %s\n", len(pics), textsafe.Safe(*plotDir))
	}
	if *outDir != "" {
		dir, err := saveCompareFolder(*outDir, *name, paths, ext, c, popt, realPath, simPath)
		if err != nil {
			return true, err
		}
		fmt.Fprintf(stderr, "memscope: saved the comparison in %s\n", textsafe.Safe(dir))
	}
	return len(c.Errors) > 0, nil
}

func saveCompareFolder(root, name string, paths []string, ext string, c *trace.Comparison, opt plot.Options, realPath, simPath string) (string, error) {
	dir, err := newRunFolder(root, name, paths)
	if err != nil {
		return dir, err
	}
	var text, js bytes.Buffer
	fmt.Fprintf(&text, "real: %s\nsim:  %s\n\n", realPath, simPath)
	if err := c.WriteText(&text); err != nil {
		return dir, err
	}
	if err := c.WriteJSON(&js); err != nil {
		return dir, err
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.txt"), text.Bytes(), 0o644); err != nil {
		return dir, err
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.json"), js.Bytes(), 0o644); err != nil {
		return dir, err
	}
	pics, err := plot.CompareDir(filepath.Join(dir, "plots"), ext, c, opt)
	if err != nil {
		return dir, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Real vs simulated memory\n\nReal run: `%s`  \nSimulation: `%s`  \nMade by `memscope compare` on %s.\n\n",
		realPath, simPath, time.Now().Format("2006-01-02 15:04"))
	s := c.Summary
	fmt.Fprintf(&b, "%d ranks, %d paired.", s.Ranks, s.Paired)
	if s.WorstRank >= 0 {
		fmt.Fprintf(&b, " Worst rank: %d. Mean |peak error|: %.2f%%.", s.WorstRank, s.MeanAbsPeakErrorPct)
	}
	b.WriteString("\n\n")
	if len(s.Underestimated) > 0 {
		fmt.Fprintf(&b, "**The simulation underestimates ranks %v**: a plan sized on it would run out of memory there.\n\n", s.Underestimated)
	}
	b.WriteString("| rank | real peak | sim peak | peak error | curve error |\n|---:|---:|---:|---:|---:|\n")
	for _, rc := range c.Ranks {
		rp, sp := "—", "—"
		if rc.Real != nil {
			rp = units.BytesF(rc.Real.Peak * units.MiB)
		}
		if rc.Sim != nil {
			sp = units.BytesF(rc.Sim.Peak * units.MiB)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", rc.Rank, rp, sp, pctOrDash(rc.PeakErrorPct, true), pctOrDash(rc.CurveErrorPct, false))
	}
	b.WriteString("\n")
	for _, e := range c.Errors {
		fmt.Fprintf(&b, "- error: %v\n", e.Err)
	}
	report.PictureLinks(&b, dir, pics)
	return dir, os.WriteFile(filepath.Join(dir, "README.md"), []byte(b.String()), 0o644)
}

func pctOrDash(v float64, signed bool) string {
	if v != v {
		return "—"
	}
	if signed {
		return fmt.Sprintf("%+.2f%%", v)
	}
	return fmt.Sprintf("%.2f%%", v)
}
