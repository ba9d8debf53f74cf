package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"memscope/model"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
)

// cmdDiff implements `memscope diff`.
func cmdDiff(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("diff", "memscope diff [--json] [--top N] A B", stderr)
	asJSON := fs.Bool("json", false, "write JSON (schema in the README)")
	maxInflate := maxInflateFlag(fs)
	top := fs.Int("top", 25, "call sites to list")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	ctx = snapshot.WithInflateMax(ctx, int64(*maxInflate))
	if len(paths) != 2 {
		fmt.Fprintln(stderr, "memscope diff: give two snapshots, A and B")
		fs.Usage()
		return false, errUsage
	}
	cat := snapshot.NewCategorizer(nil)
	var sides [2]snapshot.Side
	var sizes [2]int64
	for i, p := range paths {
		if st, err := os.Stat(p); err == nil {
			sizes[i] = st.Size()
		}
	}
	bar := newLoadProgress(stderr, isTerminal(stderr), sizes[0]+sizes[1], progressDelay, time.Now)
	defer bar.finish()
	for i, p := range paths {
		d, err := model.Detect(p)
		if err != nil {
			return true, err
		}
		if d.Kind != model.KindSnapshot && d.Kind != model.KindEstimate {
			return true, d.NotFor(p, "diff")
		}
		res, err := model.Load(ctx, d.Kind, []string{p}, cat, func(phase string, frac float64) {
			bar.update(i, int64(frac*float64(sizes[i])), phase+" "+filepath.Base(p))
		})
		switch {
		case err != nil:
			return true, err
		case res.Estimate != nil:
			sides[i] = estimate.SideOf(p, res.Estimate)
		default:
			sides[i] = snapshot.SideOf(p, res.Analysis)
		}
	}
	d := snapshot.Compare(sides[0], sides[1])
	if *asJSON {
		return false, d.WriteJSON(stdout)
	}
	return false, d.WriteText(stdout, *top)
}
