package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"memscope/format"
	"memscope/internal/textsafe"
	"memscope/model"
	"memscope/plot"
	"memscope/snapshot"
	"memscope/snapshot/pickle"
	"memscope/snapshot/report"
)

// cmdReport implements `memscope report`.
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("report", "memscope report [--json [--allocations]] [--top N] [--categories FILE] [--plot DIR] [--out DIR [--name NAME]] [--format png|svg] PATH...", stderr)
	asJSON := fs.Bool("json", false, "write JSON (schema in the README)")
	top := fs.Int("top", 10, "allocations to list per device")
	maxInflate := maxInflateFlag(fs)
	allocs := fs.Bool("allocations", false, "with --json: list every active block (addr, size, role, category, site, op)")
	catFile := fs.String("categories", "", "category and role rules file (\"Name: keyword, keyword\" or \"role Parameter: keyword\" per line)")
	plotDir := fs.String("plot", "", "write pictures (overview, top consumers, categories, sizes, efficiency, timeline) into DIR")
	outDir := fs.String("out", "", "save text, JSON, pictures and a findings README into DIR/YYYYMMDD_HHMMSS_NAME/ (and a latest link)")
	name := fs.String("name", "", "name of the --out folder (default: from the input path)")
	format := fs.String("format", "png", "picture format: png or svg")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	ctx = snapshot.WithInflateMax(ctx, int64(*maxInflate))
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
	opt := report.Options{TopN: *top, Allocations: *allocs}
	var prepare func(*report.FileReport)
	if *plotDir == "" && *outDir == "" {
		// The pictures and the saved folder read the analyses; the
		// writers alone need only each file rendered (a folder of
		// hundreds of rank snapshots held every analysis until the end).
		ranks := rankFilesIn(paths)
		prepare = func(r *report.FileReport) { report.Prepare(r, opt, *asJSON, ranks[r.Path]) }
	}
	reports := loadReports(ctx, paths, snapshot.NewCategorizer(rules), stderr, prepare)
	failed := false
	for _, r := range reports {
		if r.Err != nil {
			failed = true
			// On stderr too: `report missing.pickle > out.txt` must not
			// hide the error in the file.
			fmt.Fprintf(stderr, "memscope: %s\n", textsafe.Safe(r.Err.Error()))
		}
	}
	opt.Ranks = rankSets(paths, reports)
	if *asJSON {
		for _, r := range reports {
			for _, w := range r.Warnings() {
				fmt.Fprintf(stderr, "memscope: %s: note: %s\n", textsafe.Safe(r.Path), textsafe.Safe(w))
			}
		}
		err = report.WriteJSON(stdout, reports, opt)
	} else {
		err = report.WriteText(stdout, reports, opt)
	}
	if err != nil {
		return failed, err
	}
	if *plotDir != "" {
		pics, err := reportPlots(*plotDir, ext, reports)
		if err != nil {
			return true, err
		}
		fmt.Fprintf(stderr, "memscope: wrote %d pictures into %s\n", len(pics), textsafe.Safe(*plotDir))
	}
	if *outDir != "" {
		dir, err := saveReportFolder(*outDir, *name, paths, ext, reports, opt)
		if err != nil {
			return true, err
		}
		fmt.Fprintf(stderr, "memscope: saved the report in %s\n", textsafe.Safe(dir))
	}
	return failed, nil
}

// rankFilesIn is the set of files rankSets puts in rank tables.
func rankFilesIn(paths []string) map[string]bool {
	in := map[string]bool{}
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			continue
		}
		for _, f := range model.RankFiles(p) {
			in[f] = true
		}
	}
	return in
}

// rankSets finds the folders among paths that hold per-rank snapshots of
// one run, and reduces their reports to rank tables.
func rankSets(paths []string, reports []report.FileReport) []report.RankSet {
	var out []report.RankSet
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			continue
		}
		if files := model.RankFiles(p); files != nil {
			out = append(out, report.RankSetOf(p, reports, files))
		}
	}
	return out
}

// loadReports expands directories into the snapshots they hold and analyses
// every file, two at a time; a failing file becomes an error entry and never
// stops the others.
//
// When progress is a terminal, a bar there shows the bytes decoded and what
// is being done, once loading has taken longer than progressDelay.
//
// It sets the collector's pace for the rest of the process from the input
// size (reportGCPercent): report exits once it has written what it loaded.
//
// prepare, when not nil, is called on each file as it is loaded, when there
// are several (report.Prepare: the writers then need no analysis).
func loadReports(ctx context.Context, paths []string, cat *snapshot.Categorizer, progress io.Writer, prepare func(*report.FileReport)) []report.FileReport {
	var reports []report.FileReport
	for _, in := range model.SnapshotInputs(paths, "report") {
		reports = append(reports, report.FileReport{Path: in.Path, Kind: in.Format, Label: in.Label, Err: in.Err})
	}
	var total int64
	sizes := make([]int64, len(reports))
	for i := range reports {
		if st, err := os.Stat(reports[i].Path); err == nil && reports[i].Err == nil {
			sizes[i] = st.Size()
			total += sizes[i]
		}
	}
	if pct := reportGCPercent(total); pct > 0 {
		// For the rest of the process, not only the load: restoring
		// the default here would start a collection of the whole heap
		// while the report is written, just before the command exits.
		debug.SetGCPercent(pct)
		// A soft limit brings the default pace back before the garbage
		// that 5x growth leaves could matter: a hostile file that the
		// decoder refuses at its budget peaked at 1.3 GB without it.
		debug.SetMemoryLimit(reportMemoryLimit(total))
	}
	bar := newLoadProgress(progress, isTerminal(progress), total, progressDelay, time.Now)
	defer bar.finish()
	var jobs []model.Job
	var of []int // the report of each job
	for i := range reports {
		if reports[i].Err != nil {
			continue
		}
		kind := model.KindSnapshot
		if reports[i].Kind == format.Estimate {
			kind = model.KindEstimate
		}
		jobs = append(jobs, model.Job{Kind: kind, Paths: []string{reports[i].Path}})
		of = append(of, i)
	}
	var analysing sync.Once
	model.LoadAll(ctx, jobs, model.LoadOptions{Workers: 2, Rules: cat.Rules(),
		Progress: func(j int, phase string, frac float64) {
			if phase == "analysing" && len(jobs) == 1 && reportGCPercent(total) > 0 {
				// The slow pace is for the decode, whose heap is
				// nearly all live. The analysis makes temporaries
				// by distinct frame and stack: on a trace of 1.6M
				// distinct frames they filled the heap to the soft
				// limit (615 MiB; 398 at the default pace, in the
				// same time). On the usual shapes it collects no
				// more often: what it allocates is less than what
				// the decode left live.
				analysing.Do(func() { debug.SetGCPercent(analysisGCPercent) })
			}
			i := of[j]
			bar.update(i, int64(frac*float64(sizes[i])), phase+" "+filepath.Base(reports[i].Path))
		},
		Done: func(j int, res *model.Result) {
			r := &reports[of[j]]
			r.Analysis, r.Estimate, r.Err = res.Analysis, res.Estimate, res.Err
			if prepare != nil && len(jobs) > 1 {
				// Only the rendered file is kept (see report.Prepare).
				prepare(r)
				*res = model.Result{}
			}
		}})
	if reportGCPercent(total) > 0 && total > pickle.GCThreshold {
		// At report's slow pace the analysis' garbage is still held:
		// collected now, its pages take the report's buffers (a JSON
		// report of the frame-pool shape builds 17 MB of them) instead
		// of fresh ones at the end of the run, where the peak of a
		// trace of distinct stacks is. A millisecond or two.
		runtime.GC()
	}
	return reports
}

// analysisGCPercent is the GOGC of a one-file report's analysis (see
// loadReports).
const analysisGCPercent = 100

// reportGCMax is the most input for which a report collects garbage less
// often (reportGCPercent).
const reportGCMax = 256 << 20

// reportMemoryLimit is the soft memory limit of a report that collects
// garbage less often: well above what real snapshots of total bytes need
// (bigtrain, 181 MiB: 0.63 GB), so it only acts on runaway input.
func reportMemoryLimit(total int64) int64 { return 3*total + 512<<20 }

// reportGCPercent is the GOGC a report loading total bytes runs with, or 0
// to keep the default. A report keeps what it loads until it exits, so its
// heap is nearly all live data, and each collection at the default (every
// doubling) marks it all again while two machines decode and the binder
// fills fresh pages: on an 80 MB snapshot one collection costs 30-40 ms of
// 250. Collecting at 5x growth skips it; the garbage that then stays is
// bounded by the decoder's value graph (the peak went from 176 to 217 MiB,
// 0.2x of pickle.load's). Above reportGCMax the default keeps a 1 GB
// snapshot's peak well under its 2.5 GB budget.
func reportGCPercent(total int64) int {
	if total > reportGCMax {
		return 0
	}
	return 400
}

// reportPlots writes the pictures of every report into dir (one
// subdirectory per input when there are several).
func reportPlots(dir, ext string, reports []report.FileReport) ([]string, error) {
	var out []string
	ok := 0
	for _, r := range reports {
		if r.Err == nil {
			ok++
		}
	}
	for _, r := range reports {
		if r.Err != nil {
			continue
		}
		d := dir
		if ok > 1 {
			d = filepath.Join(dir, folderName(r.Path))
		}
		pics, err := plot.ReportDir(d, ext, r.Analysis, r.Estimate)
		out = append(out, pics...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func saveReportFolder(root, name string, paths []string, ext string, reports []report.FileReport, opt report.Options) (string, error) {
	dir, err := newRunFolder(root, name, paths)
	if err != nil {
		return dir, err
	}
	var text, js bytes.Buffer
	if err := report.WriteText(&text, reports, opt); err != nil {
		return dir, err
	}
	if err := report.WriteJSON(&js, reports, opt); err != nil {
		return dir, err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), text.Bytes(), 0o644); err != nil {
		return dir, err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), js.Bytes(), 0o644); err != nil {
		return dir, err
	}
	pics, err := reportPlots(filepath.Join(dir, "plots"), ext, reports)
	if err != nil {
		return dir, err
	}
	return dir, os.WriteFile(filepath.Join(dir, "README.md"), []byte(report.Findings(paths, reports, dir, pics)), 0o644)
}
