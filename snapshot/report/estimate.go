package report

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"memscope/internal/units"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
)

type jsonEstDevice struct {
	Device   string          `json:"device"`
	Peak     int64           `json:"peak_bytes"`
	Listed   int64           `json:"listed_bytes"`
	Unlisted int64           `json:"unlisted_bytes"`
	Tensors  int             `json:"tensors"`
	Phases   []jsonPhase     `json:"phases"`
	Modules  []jsonModule    `json:"modules"`
	Top      []jsonEstTensor `json:"top"`
}

type jsonPhase struct {
	Name    string `json:"name"`
	Bytes   int64  `json:"bytes"`
	Tensors int    `json:"tensors"`
}

type jsonModule struct {
	Pattern   string `json:"pattern"`
	Bytes     int64  `json:"bytes"`
	Tensors   int    `json:"tensors"`
	Instances int    `json:"instances"`
}

type jsonEstTensor struct {
	Size     int64  `json:"size"`
	Shape    string `json:"shape"`
	Module   string `json:"module"`
	Phase    string `json:"phase"`
	Site     string `json:"site"`
	Op       string `json:"op"`
	Location string `json:"location"` // the same as site, for older scripts
}

func estimateJSON(e *estimate.Analysis, topN int) []jsonEstDevice {
	out := []jsonEstDevice{}
	for i := range e.Devices {
		d := &e.Devices[i]
		j := jsonEstDevice{Device: d.Device, Peak: d.PeakBytes, Listed: d.ListedBytes, Unlisted: d.UnlistedBytes,
			Tensors: d.Tensors, Phases: []jsonPhase{}, Modules: []jsonModule{}, Top: []jsonEstTensor{}}
		for _, p := range d.Phases {
			j.Phases = append(j.Phases, jsonPhase{p.Name, p.Bytes, p.Tensors})
		}
		for _, m := range d.Modules {
			j.Modules = append(j.Modules, jsonModule{m.Pattern, m.Bytes, m.Tensors, m.Instances})
		}
		for k := range d.Allocations {
			if k == topN {
				break
			}
			a := &d.Allocations[k]
			loc := a.Location()
			j.Top = append(j.Top, jsonEstTensor{a.Size, a.Shape(), a.Module(), a.Phase(), loc, snapshot.Op(a.Frames), loc})
		}
		out = append(out, j)
	}
	return out
}

func writeEstimateText(tw *textWriter, e *estimate.Analysis, opt Options) {
	tw.line("format: PyTorch-Memory-Profiler peak snapshot (an estimate)")
	for _, w := range e.Estimate.Warnings {
		tw.line("note: %s", w)
	}
	if len(e.Devices) == 0 {
		tw.line("")
		tw.line("empty estimate: no device had tensors when the profiler wrote it ({})")
	}
	for i := range e.Devices {
		d := &e.Devices[i]
		tw.line("")
		tw.line("%s  estimated peak %s  listed %s in %s  unlisted %s", d.Device, units.Bytes(d.PeakBytes),
			units.Bytes(d.ListedBytes), count(d.Tensors, "tensor"), units.Bytes(d.UnlistedBytes))
		if d.PeakBelowListed {
			tw.line("  warning: the peak (%s) is smaller than the listed tensors (%s); the file is inconsistent",
				units.Bytes(d.PeakBytes), units.Bytes(d.ListedBytes))
		}
		frac := func(b int64) float64 {
			if d.PeakBytes <= 0 {
				return 0
			}
			return float64(b) / float64(max(d.PeakBytes, d.ListedBytes))
		}
		tw.line("")
		tw.line("  Phases")
		for _, p := range d.Phases {
			tw.line("    %-30s %10s %6s %s %s", p.Name, units.Bytes(p.Bytes), units.Pct(100*frac(p.Bytes)), bar(frac(p.Bytes), 20), count(p.Tensors, "tensor"))
		}
		if d.UnlistedBytes > 0 {
			tw.line("    %-30s %10s %6s %s  (tensors < 1 MiB and the one that set the peak)", "(unlisted)",
				units.Bytes(d.UnlistedBytes), units.Pct(100*frac(d.UnlistedBytes)), bar(frac(d.UnlistedBytes), 20))
		}
		if len(d.Modules) > 0 {
			tw.line("")
			tw.line("  Top modules (merged: digits -> *)")
			for k, m := range d.Modules {
				if k == max(opt.TopN, 1) {
					tw.line("    … %d more patterns", len(d.Modules)-k)
					break
				}
				tw.line("    %10s %6s  %-50s %s in %s", units.Bytes(m.Bytes), units.Pct(100*frac(m.Bytes)),
					m.Pattern, count(m.Tensors, "tensor"), count(m.Instances, "instance"))
			}
		}
		if opt.TopN > 0 && len(d.Allocations) > 0 {
			tw.line("")
			tw.line("  Top %s", count(min(opt.TopN, len(d.Allocations)), "tensor"))
			// Columns as wide as their widest cell, so a long shape or
			// module shifts the column, never one row.
			var buf strings.Builder
			tab := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tab, "    SIZE\tSHAPE\tPHASE\tMODULE\tCREATED AT")
			for k := range d.Allocations {
				if k == opt.TopN {
					break
				}
				a := &d.Allocations[k]
				loc := a.Location()
				if loc == "" {
					loc = snapshot.NoFrames
				}
				fmt.Fprintf(tab, "    %s\t%s\t%s\t%s\t%s\n", units.Bytes(a.Size), cell(a.Shape()), cell(a.Phase()), cell(a.Module()), strings.Join(strings.Fields(loc), " "))
			}
			tab.Flush()
			for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
				tw.line("%s", strings.TrimRight(l, " "))
			}
		}
		if len(d.Categories) > 0 {
			tw.line("")
			tw.line("  Categories (from creation stacks)")
			for _, c := range d.Categories {
				tw.line("    %-16s %10s %s", c.Name, units.Bytes(c.Bytes), count(c.Blocks, "tensor"))
			}
		}
	}
}

// count is "1 tensor", "3 tensors", "2 entries".
func count(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %s", n, units.Plural(word))
}

// cell keeps a table cell on one line and within 60 columns, cut in the
// middle where module paths and shapes differ most at their ends.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		return string(r[:29]) + "…" + string(r[len(r)-30:])
	}
	if s == "" {
		return "-"
	}
	return s
}
