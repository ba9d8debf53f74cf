package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"

	"memscope/model"
	"memscope/nvml"
	"memscope/snapshot"
	"memscope/trace"
	"memscope/tui"
)

// cmdExplore opens the explorer (or prints the text reports when stdout is
// not a terminal).
func cmdExplore(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("memscope", "memscope [--replay DIR] [--live|--no-live] [--interval D] [--categories FILE] [PATH...]", stderr)
	replay := fs.String("replay", "", "drive the Live tab from recorded traces in DIR")
	live := fs.Bool("live", false, "sample GPUs through NVML (the default when no PATH is given)")
	noLive := fs.Bool("no-live", false, "never initialise NVML")
	interval := fs.Duration("interval", time.Second, "live sampling interval (min 50ms)")
	catFile := fs.String("categories", "", "category rules file")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	if *interval < 50*time.Millisecond {
		fmt.Fprintln(stderr, "memscope: --interval must be at least 50ms")
		return false, errUsage
	}
	var rules []snapshot.Rule
	if *catFile != "" {
		if rules, err = snapshot.LoadRules(*catFile); err != nil {
			return false, fmt.Errorf("--categories: %w", err)
		}
	}
	wantLive := (*live || len(paths) == 0) && !*noLive
	if len(paths) == 0 {
		paths = []string{"."}
	}
	if f, ok := stdout.(*os.File); !ok || !term.IsTerminal(f.Fd()) {
		return printReports(ctx, paths, rules, stdout)
	}
	ws := model.New(ctx, rules)
	ws.Open(paths...)
	opts := tui.Options{Interval: *interval}
	switch {
	case *replay != "":
		r, err := nvml.NewReplay(ctx, *replay, nil)
		if err != nil {
			return false, fmt.Errorf("--replay: %w", err)
		}
		opts.Live = r
	case wantLive:
		n, err := nvml.Open()
		if err != nil {
			opts.LiveErr = err
		} else {
			defer n.Close()
			opts.Live = n
		}
	default:
		opts.LiveErr = errors.New("live GPUs are sampled when memscope runs without PATH, or with --live")
	}
	stopWatch := watchSources(ctx, ws)
	defer stopWatch()
	return false, tui.Run(ctx, ws, opts)
}

// printReports is the non-interactive form of `memscope PATH`: the text
// report of every snapshot and the comparison of every trace set.
func printReports(ctx context.Context, paths []string, rules []snapshot.Rule, w io.Writer) (bool, error) {
	ws := model.New(ctx, rules)
	ws.Open(paths...)
	ws.Wait()
	failed := false
	var reports []snapshot.FileReport
	for _, s := range ws.Sources() {
		switch {
		case s.Kind.IsSnapshot():
			r := snapshot.FileReport{Path: s.Path, Label: snapshot.ParseLabel(s.Path), Err: s.Err, Analysis: s.Analysis, Estimate: s.Estimate}
			if s.Estimate != nil {
				r.Kind = snapshot.KindEstimated
			}
			reports = append(reports, r)
		case s.Kind == model.KindTraceCompare && s.Comparison != nil:
			fmt.Fprintf(w, "━━ %s\n", s.Name())
			s.Comparison.WriteText(w)
			fmt.Fprintln(w)
		case s.Kind == model.KindTraceRun && s.Real != nil:
			fmt.Fprintf(w, "━━ %s (one run)\n", s.Name())
			c := trace.Compare(s.Real, &trace.Set{}, -1, nil)
			c.WriteText(w)
			fmt.Fprintln(w)
		}
		if s.State == model.Failed || s.ErrorCount() > 0 {
			failed = true
			if !s.Kind.IsSnapshot() {
				for _, p := range s.Problems() {
					fmt.Fprintf(w, "error: %s\n", p)
				}
			}
		}
	}
	if len(reports) > 0 {
		return failed, snapshot.WriteText(w, reports, snapshot.ReportOptions{TopN: 10})
	}
	return failed, nil
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

// cmdDiff implements `memscope diff`.
func cmdDiff(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("diff", "memscope diff [--json] [--top N] A B", stderr)
	asJSON := fs.Bool("json", false, "write JSON (schema in the README)")
	top := fs.Int("top", 25, "call sites to list")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	if len(paths) != 2 {
		fmt.Fprintln(stderr, "memscope diff: give two snapshots, A and B")
		fs.Usage()
		return false, errUsage
	}
	cat := snapshot.NewCategorizer(nil)
	var sides [2]snapshot.Side
	for i, p := range paths {
		r := snapshot.FileReport{Path: p}
		r.Kind, _ = snapshot.SniffFile(p)
		analyseReport(ctx, &r, cat)
		switch {
		case r.Err != nil:
			return true, r.Err
		case r.Estimate != nil:
			sides[i] = snapshot.SideOfEstimate(p, r.Estimate)
		default:
			sides[i] = snapshot.SideOf(p, r.Analysis)
		}
	}
	d := snapshot.Compare(sides[0], sides[1])
	if *asJSON {
		return false, d.WriteJSON(stdout)
	}
	return false, d.WriteText(stdout, *top)
}

// cmdRecord implements `memscope record`.
func cmdRecord(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("record", "memscope record --out DIR [--interval D] [--duration D] [--devices LIST] [--pid PID] [--source nvml|fake]", stderr)
	out := fs.String("out", "", "directory for memory_trace_rank{i}.json (required)")
	interval := fs.Duration("interval", time.Second, "sampling interval (min 50ms)")
	duration := fs.Duration("duration", 0, "stop after this long (default: until Ctrl-C)")
	devices := fs.String("devices", "", "comma-separated GPU indices (default: all)")
	pids := fs.String("pid", "", "comma-separated PIDs whose memory counts as allocated (default: all compute processes)")
	source := fs.String("source", "nvml", "nvml, or fake (simulated GPUs)")
	flush := fs.Duration("flush", nvml.DefaultFlush, "how often the files are rewritten")
	if _, err := parseFlags(fs, args); err != nil {
		return false, err
	}
	if *out == "" {
		fmt.Fprintln(stderr, "memscope record: --out DIR is required")
		fs.Usage()
		return false, errUsage
	}
	if *interval < 50*time.Millisecond {
		fmt.Fprintln(stderr, "memscope record: --interval must be at least 50ms")
		return false, errUsage
	}
	devList, err := intList(*devices)
	if err != nil {
		fmt.Fprintf(stderr, "memscope record: --devices: %v\n", err)
		return false, errUsage
	}
	pidList, err := intList(*pids)
	if err != nil {
		fmt.Fprintf(stderr, "memscope record: --pid: %v\n", err)
		return false, errUsage
	}
	var src nvml.Source
	switch *source {
	case "nvml":
		n, err := nvml.Open()
		if err != nil {
			return false, err
		}
		defer n.Close()
		src = n
	case "fake":
		src = nvml.NewFake(8, nil)
	default:
		fmt.Fprintf(stderr, "memscope record: --source must be nvml or fake, not %q\n", *source)
		return false, errUsage
	}
	err = nvml.Record(ctx, src, nvml.RecordOptions{OutDir: *out, Interval: *interval, Duration: *duration,
		Devices: devList, PIDs: pidList, FlushEvery: *flush, Log: stderr})
	return false, err
}

func intList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
