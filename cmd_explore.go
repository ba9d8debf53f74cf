package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/charmbracelet/x/term"

	"memscope/fleet"
	"memscope/format"
	"memscope/internal/textsafe"
	"memscope/model"
	"memscope/nvml"
	"memscope/snapshot"
	"memscope/snapshot/report"
	"memscope/trace"
	"memscope/tui"
)

// cmdExplore opens the explorer (or prints the text reports when stdout is
// not a terminal).
func cmdExplore(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("memscope", "memscope [--replay DIR] [--live|--no-live] [--interval D] [--history D] [--categories FILE] [--keep SIZE] [PATH...]", stderr)
	replay := fs.String("replay", "", "drive the Live tab from recorded traces in DIR (only DIR is opened)")
	speed := fs.Float64("speed", 1, "--replay: playback speed (1: the recorded pace)")
	live := fs.Bool("live", false, "sample GPUs through NVML (the default when no PATH is given)")
	noLive := fs.Bool("no-live", false, "never initialise NVML")
	interval := fs.Duration("interval", time.Second, "live sampling interval (min 50ms)")
	history := fs.Duration("history", 30*time.Minute, "live history kept for the charts (1m to 24h)")
	maxInflate := maxInflateFlag(fs)
	keep := byteSizeVar(fs, "keep", model.DefaultKeep, "memory kept in snapshot analyses beside those shown (estimated); past it the least recently used are let go and load again when shown")
	catFile := fs.String("categories", "", "category and role rules file (\"Name: keyword, keyword\" or \"role Parameter: keyword\" per line)")
	pf := addPromFlags(fs)
	paths, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	ctx = snapshot.WithInflateMax(ctx, int64(*maxInflate))
	if *interval < 50*time.Millisecond {
		fmt.Fprintln(stderr, "memscope: --interval must be at least 50ms")
		return false, errUsage
	}
	if err := checkHistory(*history, *interval); err != nil {
		fmt.Fprintf(stderr, "memscope: %s\n", textsafe.Safe(err.Error()))
		return false, errUsage
	}
	var rules []snapshot.Rule
	if *catFile != "" {
		if rules, err = snapshot.LoadRules(*catFile); err != nil {
			return false, fmt.Errorf("--categories: %w", err)
		}
	}
	if !(*speed > 0) {
		fmt.Fprintln(stderr, "memscope: --speed must be above 0")
		return false, errUsage
	}
	var fleetSrc *fleet.Client
	if *pf.url != "" {
		if fleetSrc, err = pf.client(); err != nil {
			return false, err
		}
	}
	wantLive := (*live || len(paths) == 0) && !*noLive
	implicit := len(paths) == 0 && *replay == "" && fleetSrc == nil
	if implicit {
		paths = []string{"."} // a replay or the cluster opens only what it is given
	}
	if f, ok := stdout.(*os.File); !ok || !term.IsTerminal(f.Fd()) {
		if *replay != "" && len(paths) == 0 {
			// Without a terminal there is nothing to play: report the
			// recording itself (its traces, as compare reads them).
			paths, implicit = []string{*replay}, false
		}
		if fleetSrc != nil {
			fl, err := fleetSrc.Fetch(ctx, time.Time{})
			if err != nil {
				return false, err
			}
			fleet.WriteText(stdout, *pf.url, fl)
			fmt.Fprintln(stdout)
		}
		return printReports(ctx, paths, implicit, rules, stdout)
	}
	ws := model.New(ctx, rules)
	ws.SetKeep(int64(*keep))
	discovered := openInBackground(ws, paths, implicit)
	opts := tui.Options{Interval: *interval, History: *history}
	if fleetSrc != nil {
		opts.Fleet = fleetSrc
	}
	switch {
	case *replay != "":
		rec, err := model.Load(ctx, model.KindTraceRun, []string{*replay}, nil, nil)
		if err != nil {
			return false, fmt.Errorf("--replay: %w", err)
		}
		r, err := nvml.NewPlayback(rec.Real, *replay, nil, *speed)
		if err != nil {
			return false, fmt.Errorf("--replay: %w", err)
		}
		opts.Live = r
		// Sample as often as the recording did, so no sample is skipped.
		opts.Interval = r.Interval()
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
	stopWatch := watchSources(ctx, ws, discovered)
	defer stopWatch()
	return false, tui.Run(ctx, ws, opts)
}

// openInBackground opens paths in ws: the files at once (each is sniffed
// alone), the folders on another goroutine, since discovery walks them and
// sniffs every file: started in /tmp (970 entries, 417 sources), the
// explorer drew its first frame after 2.8 s. The sources appear as they are
// found. The channel closes when every path is open. implicit is for the
// current folder opened without a PATH (see Workspace.OpenQuiet).
func openInBackground(ws *model.Workspace, paths []string, implicit bool) <-chan struct{} {
	var dirs []string
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			dirs = append(dirs, p)
			continue
		}
		ws.Open(p) // a missing PATH fails here, at once
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if implicit {
			ws.OpenQuiet(dirs...)
		} else {
			ws.Open(dirs...)
		}
	}()
	return done
}

// printReports is the non-interactive form of `memscope PATH`: the text
// report of every snapshot and the comparison of every trace set.
func printReports(ctx context.Context, paths []string, implicit bool, rules []snapshot.Rule, w io.Writer) (bool, error) {
	ws := model.New(ctx, rules)
	ws.SetKeep(model.KeepAll) // every analysis is printed below: none may be let go
	if implicit {
		ws.OpenQuiet(paths...)
	} else {
		ws.Open(paths...)
	}
	ws.Wait()
	if len(ws.Sources()) == 0 {
		fmt.Fprintln(w, "memscope: no traces or snapshots in the current directory (memscope help lists the commands; memscope demo shows bundled samples)")
		return false, nil
	}
	failed := false
	var reports []report.FileReport
	var ranks []report.RankSet
	for _, s := range ws.Sources() {
		switch {
		case s.Kind == model.KindRanks:
			if s.Err != nil {
				fmt.Fprintf(w, "error: %s\n", s.Err)
			} else {
				ranks = append(ranks, report.RankSet{Path: s.Path, Rows: s.Ranks})
			}
		case s.Kind.IsSnapshot():
			r := report.FileReport{Path: s.Path, Label: snapshot.ParseLabel(s.Path), Err: s.Err, Analysis: s.Analysis, Estimate: s.Estimate}
			if s.Estimate != nil {
				r.Kind = format.Estimate
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
			if !s.Kind.IsSnapshot() || s.Kind == model.KindRanks {
				for _, p := range s.Problems() {
					fmt.Fprintf(w, "error: %s\n", p)
				}
			}
		}
	}
	if len(reports) > 0 || len(ranks) > 0 {
		return failed, report.WriteText(w, reports, report.Options{TopN: 10, Ranks: ranks})
	}
	return failed, nil
}

// watchSources starts watching the workspace's files for changes (see
// model.Watch) and returns a function that stops it.
func watchSources(ctx context.Context, ws *model.Workspace, after <-chan struct{}) func() {
	ctx, cancel := context.WithCancel(ctx)
	// The watcher starts once the folders are open: before, it could add a
	// file that the discovery then added again.
	started := make(chan *model.Watcher, 1)
	go func() {
		select {
		case <-after:
		case <-ctx.Done():
			started <- nil
			return
		}
		w, err := model.Watch(ctx, ws)
		if err != nil {
			w = nil
		}
		started <- w
	}()
	return func() {
		cancel()
		if w := <-started; w != nil {
			w.Wait()
		}
	}
}

// History bounds: a chart needs a minute to say anything, and a day at the
// fastest interval is the most samples a ring should hold.
const (
	minHistory        = time.Minute
	maxHistory        = 24 * time.Hour
	maxHistorySamples = 200_000
)

// checkHistory validates --history against --interval.
func checkHistory(h, interval time.Duration) error {
	switch {
	case h < minHistory || h > maxHistory:
		return fmt.Errorf("--history must be between %v and %v, not %v", minHistory, maxHistory, h)
	case nvml.HistoryFor(h, interval) > maxHistorySamples:
		return fmt.Errorf("--history %v at --interval %v is %d samples per GPU; keep it at most %d (a longer interval, or a shorter history)",
			h, interval, nvml.HistoryFor(h, interval), maxHistorySamples)
	}
	return nil
}
