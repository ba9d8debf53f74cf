package report

import (
	"fmt"

	"memscope/internal/units"
	"memscope/snapshot"
)

// RankSet is a folder of per-rank snapshots reported as one table.
type RankSet struct {
	Path string
	Rows []snapshot.RankSummary
}

// RankSetOf gathers the reports of one folder's ranks into a rank set:
// each analysed file reduced to its row, each failed one with its error.
func RankSetOf(dir string, reports []FileReport, paths []string) RankSet {
	in := map[string]bool{}
	for _, p := range paths {
		in[p] = true
	}
	rs := RankSet{Path: dir}
	for _, r := range reports {
		if !in[r.Path] {
			continue
		}
		row := snapshot.RankSummary{Path: r.Path, Label: snapshot.ParseLabel(r.Path), Device: -1, Err: r.Err}
		switch {
		case r.prepared != nil && r.prepared.summary != nil:
			row = *r.prepared.summary
		case r.Analysis != nil:
			row = snapshot.Summarize(r.Path, r.Analysis)
		}
		rs.Rows = append(rs.Rows, row)
	}
	snapshot.SortRanks(rs.Rows)
	return rs
}

type jsonRankSet struct {
	Path       string          `json:"path"`
	Iterations []jsonIteration `json:"iterations"`
}

type jsonIteration struct {
	Step      *int          `json:"step"`
	OOMExit   bool          `json:"oom_exit"`
	Ranks     []jsonRank    `json:"ranks"`
	Imbalance jsonImbalance `json:"imbalance"`
}

type jsonRank struct {
	Rank             int     `json:"rank"`
	Path             string  `json:"path"`
	Error            *string `json:"error"`
	Device           *string `json:"device"`
	Peak             int64   `json:"peak_bytes"`
	Reserved         int64   `json:"reserved_bytes"`
	EfficiencyPct    float64 `json:"efficiency_pct"`
	TopCategory      string  `json:"top_category"`
	TopCategoryBytes int64   `json:"top_category_bytes"`
	OOMs             int     `json:"oom_events"`
}

type jsonImbalance struct {
	Ranks        int     `json:"ranks"`
	MeanPeak     int64   `json:"mean_peak_bytes"`
	MaxPeak      int64   `json:"max_peak_bytes"`
	MaxOverMean  float64 `json:"max_over_mean"`
	HeaviestRank *int    `json:"heaviest_rank"`
}

func ranksJSON(sets []RankSet) []jsonRankSet {
	out := []jsonRankSet{}
	for _, rs := range sets {
		js := jsonRankSet{Path: rs.Path, Iterations: []jsonIteration{}}
		for _, k := range snapshot.Iterations(rs.Rows) {
			rows := k.Of(rs.Rows)
			it := jsonIteration{OOMExit: k.Exit, Ranks: []jsonRank{}}
			if k.Step >= 0 {
				step := k.Step
				it.Step = &step
			}
			for _, r := range rows {
				jr := jsonRank{Rank: r.Label.Rank, Path: r.Path, Peak: r.Peak, Reserved: r.Reserved,
					EfficiencyPct: round2(r.EfficiencyPct), TopCategory: r.TopCategory, TopCategoryBytes: r.TopCategoryBytes, OOMs: r.OOMs}
				if r.Err != nil {
					msg := r.Err.Error()
					jr.Error = &msg
				}
				if r.Device >= 0 {
					d := fmt.Sprintf("cuda:%d", r.Device)
					jr.Device = &d
				}
				it.Ranks = append(it.Ranks, jr)
			}
			im := snapshot.ImbalanceOf(rows)
			it.Imbalance = jsonImbalance{Ranks: im.Ranks, MeanPeak: im.Mean, MaxPeak: im.Max, MaxOverMean: round2(im.MaxOverMean)}
			if im.Heaviest >= 0 {
				r := rows[im.Heaviest].Label.Rank
				it.Imbalance.HeaviestRank = &r
			}
			js.Iterations = append(js.Iterations, it)
		}
		out = append(out, js)
	}
	return out
}

// writeRanksText writes a table of ranks per iteration, with the imbalance.
func writeRanksText(tw *textWriter, sets []RankSet) {
	for _, rs := range sets {
		tw.line("━━ ranks  %s", rs.Path)
		for _, k := range snapshot.Iterations(rs.Rows) {
			rows := k.Of(rs.Rows)
			name := "no step in the paths"
			if k.Step >= 0 {
				name = fmt.Sprintf("step %d", k.Step)
			}
			if k.Exit {
				name += " (OOM exit)"
			}
			im := snapshot.ImbalanceOf(rows)
			heavy := ""
			if im.Heaviest >= 0 {
				heavy = fmt.Sprintf(", heaviest rank %d", rows[im.Heaviest].Label.Rank)
			}
			tw.line("")
			tw.line("  %s: %d ranks, peak mean %s, max %s, imbalance %.2fx (max over mean)%s", name, len(rows),
				units.Bytes(im.Mean), units.Bytes(im.Max), im.MaxOverMean, heavy)
			tw.line("    %5s %10s %10s %7s  %-16s %10s %4s", "RANK", "PEAK", "RESERVED", "EFF", "TOP CATEGORY", "", "OOMS")
			for _, r := range rows {
				if r.Err != nil {
					tw.line("    %5d error: %v", r.Label.Rank, r.Err)
					continue
				}
				tw.line("    %5d %10s %10s %7s  %-16s %10s %4d", r.Label.Rank, units.Bytes(r.Peak), units.Bytes(r.Reserved),
					units.Pct(r.EfficiencyPct), r.TopCategory, units.Bytes(r.TopCategoryBytes), r.OOMs)
			}
		}
		tw.line("")
	}
}
