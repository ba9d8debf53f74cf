// Command memscope is a terminal UI and command-line tool for the GPU memory
// of large-model training: live GPUs, per-rank traces, allocator snapshots
// and estimates. Run `memscope help` for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"memscope/internal/textsafe"
	"memscope/plot"
	"memscope/snapshot"
	"memscope/trace"
)

const usage = `memscope: GPU memory of large-model training, in the terminal.

Usage:
  memscope [PATH...]        open the explorer over files and directories
                            (no PATH: the current directory plus live GPUs);
                            prints the text report when stdout is not a terminal
  memscope demo             open the explorer over bundled sample data
  memscope report [--json] [--top N] [--categories FILE] PATH...
                            analyse allocator snapshots and memory estimates
  memscope compare [--json] [--iteration N] [--pair R:S,...] [--sort rank|error] REAL SIM
  memscope compare [--json] DIR
                            compare per-rank real and simulated memory traces
  memscope diff [--json] A B
                            compare two snapshots by category and call site
  memscope record --out DIR [--interval D] [--duration D] [--devices LIST]
                  [--pid PID] [--source nvml|fake]
                            record live GPU memory as per-rank traces
  memscope help             this text

Explorer flags: --replay DIR (drive the Live tab from recorded traces),
  --live / --no-live (sample GPUs through NVML; default: only without PATH),
  --interval D (live sampling, default 1s, min 50ms), --categories FILE.

Exit status: 0 when every input was read, 1 when any failed (the others are
still reported), 2 for usage errors.
`

// errUsage marks command-line mistakes (exit status 2).
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// MEMSCOPE_CPUPROFILE=FILE profiles a whole command (for performance
	// work: go tool pprof memscope FILE).
	if p := os.Getenv("MEMSCOPE_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer f.Close()
				defer pprof.StopCPUProfile()
			}
		}
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	pprof.StopCPUProfile()
	os.Exit(code)
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		// Last line of defence: a bug must not dump a goroutine trace on a
		// user; say what happened and exit non-zero.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "memscope: internal error: %v\n(please report this with the command line and input)\n", r)
			code = 3
		}
	}()
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	var err error
	var failed bool
	switch cmd {
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	case "report":
		failed, err = cmdReport(ctx, args[1:], stdout, stderr)
	case "compare":
		failed, err = cmdCompare(ctx, args[1:], stdout, stderr)
	case "diff":
		failed, err = cmdDiff(ctx, args[1:], stdout, stderr)
	case "record":
		failed, err = cmdRecord(ctx, args[1:], stdout, stderr)
	case "demo":
		err = cmdDemo(ctx, args[1:], stdout, stderr)
	default:
		if cmd != "" && !strings.HasPrefix(cmd, "-") {
			if _, statErr := os.Stat(cmd); statErr != nil && !strings.ContainsAny(cmd, "/.") {
				fmt.Fprintf(stderr, "memscope: unknown command or missing path %q\n\n%s", cmd, usage)
				return 2
			}
		}
		failed, err = cmdExplore(ctx, args, stdout, stderr)
	}
	switch {
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "memscope: %v\n", err)
		return 1
	case failed:
		return 1
	}
	return 0
}

// parseFlags parses flags that may appear before, between or after the
// positional arguments ("memscope report F --json" works), and returns the
// positionals.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// cmdReport implements `memscope report`.
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("report", "memscope report [--json] [--top N] [--categories FILE] [--plot DIR] [--out DIR [--name NAME]] [--format png|svg] PATH...", stderr)
	asJSON := fs.Bool("json", false, "write JSON (schema in the README)")
	top := fs.Int("top", 10, "allocations to list per device")
	catFile := fs.String("categories", "", "category rules file (\"Name: keyword, keyword\" per line)")
	plotDir := fs.String("plot", "", "write pictures (overview, top consumers, categories, sizes, efficiency, timeline) into DIR")
	outDir := fs.String("out", "", "save text, JSON, pictures and a findings README into DIR/YYYYMMDD_HHMMSS_NAME/ (and a latest link)")
	name := fs.String("name", "", "name of the --out folder (default: from the input path)")
	format := fs.String("format", "png", "picture format: png or svg")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "memscope report: no PATH given")
		fs.Usage()
		return false, errUsage
	}
	if *top < 0 {
		fmt.Fprintln(stderr, "memscope report: --top must be >= 0")
		return false, errUsage
	}
	ext, ok := pictureExt(*format)
	if !ok {
		fmt.Fprintf(stderr, "memscope report: --format must be png or svg, not %q\n", *format)
		return false, errUsage
	}
	var rules []snapshot.Rule
	if *catFile != "" {
		if rules, err = snapshot.LoadRules(*catFile); err != nil {
			return false, fmt.Errorf("--categories: %w", err)
		}
	}
	reports := loadReports(ctx, paths, snapshot.NewCategorizer(rules))
	failed := false
	for _, r := range reports {
		if r.Err != nil {
			failed = true
		}
	}
	opt := snapshot.ReportOptions{TopN: *top}
	if *asJSON {
		for _, r := range reports {
			if r.Analysis != nil {
				for _, w := range r.Analysis.Snapshot.Warnings {
					fmt.Fprintf(stderr, "memscope: %s: note: %s\n", r.Path, w)
				}
			}
		}
		err = snapshot.WriteJSON(stdout, reports, opt)
	} else {
		err = snapshot.WriteText(stdout, reports, opt)
	}
	if err != nil {
		return failed, err
	}
	if *plotDir != "" {
		pics, err := reportPlots(*plotDir, ext, reports)
		if err != nil {
			return true, err
		}
		fmt.Fprintf(stderr, "memscope: wrote %d pictures into %s\n", len(pics), *plotDir)
	}
	if *outDir != "" {
		dir, err := saveReportFolder(*outDir, *name, paths, ext, reports, opt)
		if err != nil {
			return true, err
		}
		fmt.Fprintf(stderr, "memscope: saved the report in %s\n", dir)
	}
	return failed, nil
}

// loadReports expands directories into the snapshots they hold and analyses
// every file, two at a time; a failing file becomes an error entry and never
// stops the others.
func loadReports(ctx context.Context, paths []string, cat *snapshot.Categorizer) []snapshot.FileReport {
	var reports []snapshot.FileReport
	for _, p := range paths {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			reports = append(reports, snapshot.FileReport{Path: p, Err: err})
		case st.IsDir():
			found, err := snapshot.Discover(p)
			if err != nil {
				reports = append(reports, snapshot.FileReport{Path: p, Err: err})
				continue
			}
			if len(found) == 0 {
				reports = append(reports, snapshot.FileReport{Path: p, Err: fmt.Errorf(
					"no snapshots found (looked for *.pickle, *.pkl, *.pickle.gz, memory_viz *.html and snapshot *.json, up to 4 levels deep)")})
			}
			for _, f := range found {
				reports = append(reports, snapshot.FileReport{Path: f.Path, Kind: f.Kind, Label: f.Label})
			}
		default:
			k, _ := snapshot.SniffFile(p)
			reports = append(reports, snapshot.FileReport{Path: p, Kind: k, Label: snapshot.ParseLabel(p)})
		}
	}
	work := make(chan int)
	done := make(chan struct{})
	workers := 2
	for w := 0; w < workers; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			// Categorizers cache per stack and are not safe for concurrent
			// use: one per worker.
			local := snapshot.NewCategorizer(cat.Rules())
			for i := range work {
				analyseReport(ctx, &reports[i], local)
			}
		}()
	}
	for i := range reports {
		if reports[i].Err == nil {
			work <- i
		}
	}
	close(work)
	for w := 0; w < workers; w++ {
		<-done
	}
	return reports
}

func analyseReport(ctx context.Context, r *snapshot.FileReport, cat *snapshot.Categorizer) {
	defer func() {
		if v := recover(); v != nil {
			r.Err = fmt.Errorf("%s: internal error while analysing: %v", r.Path, v)
		}
	}()
	switch r.Kind {
	case snapshot.KindEstimated:
		est, err := snapshot.OpenEstimate(ctx, r.Path)
		if err != nil {
			r.Err = err
			return
		}
		r.Estimate = snapshot.AnalyzeEstimate(est, cat)
	default:
		r.Kind = snapshot.KindTorch
		s, err := snapshot.Open(ctx, r.Path)
		if err != nil {
			r.Err = err
			return
		}
		r.Analysis = snapshot.Analyze(s, cat)
	}
}

// cmdCompare implements `memscope compare`.
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("compare", "memscope compare [--json] [--iteration N] [--pair R:S,...] [--sort rank|error] [--plot DIR [--show-theoretical]] [--out DIR [--name NAME]] [--format png|svg] REAL SIM | DIR", stderr)
	asJSON := fs.Bool("json", false, "write JSON (schema in the README)")
	iteration := fs.Int("iteration", -1, "iteration to compare (default: each side's last)")
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
		fmt.Fprintf(stderr, "memscope compare: %v\n", err)
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
	real, err := trace.LoadPath(ctx, realPath)
	if err != nil {
		return false, fmt.Errorf("real run: %w", err)
	}
	sim, err := trace.LoadPath(ctx, simPath)
	if err != nil {
		return false, fmt.Errorf("simulated run: %w", err)
	}
	c := trace.Compare(real, sim, *iteration, pairs)
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
			fmt.Fprintf(stderr, "memscope: note: %s\n", n)
		}
		err = c.WriteJSON(stdout)
	} else {
		fmt.Fprintf(stdout, "real: %s\nsim:  %s\n\n", realPath, simPath)
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
		fmt.Fprintf(stderr, "memscope: wrote %d pictures into %s\n", len(pics), *plotDir)
	}
	if *outDir != "" {
		dir, err := saveCompareFolder(*outDir, *name, paths, ext, c, popt, realPath, simPath)
		if err != nil {
			return true, err
		}
		fmt.Fprintf(stderr, "memscope: saved the comparison in %s\n", dir)
	}
	return len(c.Errors) > 0, nil
}
