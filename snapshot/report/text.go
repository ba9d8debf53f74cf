package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"memscope/internal/textsafe"
	"memscope/internal/units"
	"memscope/snapshot"
)

// The text report (memscope report, and the explorer's non-interactive
// form).

// WriteText writes the human-readable report.
func WriteText(w io.Writer, reports []FileReport, opt Options) error {
	tw := &textWriter{w: w}
	writeRanksText(tw, opt.Ranks)
	for i, r := range reports {
		if i > 0 {
			tw.line("")
		}
		title := r.Path
		// A label is read from the path of a snapshot found in a folder
		// layout; a failed input gets its path alone, nothing guessed.
		if l := r.Label.String(); l != "" && r.Err == nil {
			title = l + "  " + r.Path
		}
		tw.line("━━ %s", title)
		switch {
		case r.Err != nil:
			tw.line("error: %v", r.Err)
		case r.prepared != nil && !r.prepared.asJSON:
			tw.raw(r.prepared.text)
		default:
			writeFileText(tw, &r, opt)
		}
	}
	return tw.err
}

// writeFileText writes the section of a file that was read.
func writeFileText(tw *textWriter, r *FileReport, opt Options) {
	switch {
	case r.Analysis != nil:
		writeSnapshotText(tw, r.Analysis, opt)
	case r.Estimate != nil:
		writeEstimateText(tw, r.Estimate, opt)
	}
}

type textWriter struct {
	w   io.Writer
	err error
}

// raw writes text a textWriter already wrote (sanitised, line by line).
func (t *textWriter) raw(b []byte) {
	if t.err == nil {
		_, t.err = t.w.Write(b)
	}
}

func (t *textWriter) line(format string, args ...any) {
	if t.err != nil {
		return
	}
	// Frames, paths and annotations come from files: no control character
	// of theirs reaches the terminal.
	_, t.err = io.WriteString(t.w, textsafe.Lines(fmt.Sprintf(format, args...))+"\n")
}

func bar(frac float64, width int) string {
	if frac < 0 || math.IsNaN(frac) {
		frac = 0
	}
	if frac > 1 {
		frac = 1
	}
	full := int(math.Round(frac * float64(width)))
	return strings.Repeat("█", full) + strings.Repeat("░", width-full)
}

func writeSnapshotText(tw *textWriter, a *snapshot.Analysis, opt Options) {
	s := a.Snapshot
	tw.line("format: %s", s.Format)
	for _, w := range s.Warnings {
		tw.line("note: %s", w)
	}
	if len(a.Devices) == 0 {
		tw.line("no segments and no trace entries: nothing was allocated while recording")
	}
	for i := range a.Devices {
		d := &a.Devices[i]
		tw.line("")
		tw.line("cuda:%d  reserved %s  allocated %s  efficiency %s (%s) at the snapshot", d.Device,
			units.Bytes(d.ReservedBytes), units.Bytes(d.AllocatedBytes), units.Pct(d.EfficiencyPct), d.Rating)
		if pk := &d.Peak; pk.FromTrace {
			tw.line("  peak    reserved %s  active %s  efficiency %s (%s) %s; largest free range %s of %s free",
				units.Bytes(pk.Reserved), units.Bytes(pk.Active), units.Pct(pk.EfficiencyPct), pk.Rating, snapshot.PeakWhen(pk.EventIndex),
				units.Bytes(pk.LargestFree), units.Bytes(pk.Free))
		}
		tw.line("  active %s (pending free %s)  requested %s  rounding waste %s  inactive (cached free) %s",
			units.Bytes(d.ActiveBytes), units.Bytes(d.PendingFreeBytes), units.Bytes(d.RequestedBytes),
			units.Bytes(d.RoundingWaste), units.Bytes(d.InactiveBytes))
		var pools []string
		for _, p := range d.Pools {
			pools = append(pools, fmt.Sprintf("%s %d: %s", p.Name, p.Segments, units.Bytes(p.Reserved)))
		}
		tw.line("  segments %d (%s)  blocks %d (%d active, %d inactive)", d.Segments, strings.Join(pools, ", "),
			d.Blocks, d.ActiveBlocks, d.InactiveBlocks)
		tw.line("  trace %s, %s", count(d.TraceEntries, "entry"), count(len(d.OOMs), "OOM event"))

		writeTotals(tw, "Categories (active blocks)", d.Categories, d.ActiveBytes)
		writeTotals(tw, "Roles (active blocks: what the memory is)", d.Roles, d.ActiveBytes)
		n := opt.TopN
		if n > 0 && len(d.Allocations) > 0 {
			tw.line("")
			tw.line("  Top %d allocations", min(n, len(d.Allocations)))
			tw.line("    %10s %10s  %-16s %-15s %-16s %s", "SIZE", "REQUESTED", "STATE", "ROLE", "CATEGORY", "SITE")
			shown := 0
			for j := range d.Allocations {
				al := &d.Allocations[j]
				if al.State != snapshot.StateActiveAllocated {
					continue
				}
				if shown == n {
					break
				}
				shown++
				loc := al.Location()
				if loc == "" {
					loc = "(no frames recorded)"
				} else if al.FramesFromTrace {
					loc += " (from trace)"
				}
				tw.line("    %10s %10s  %-16s %-15s %-16s %s", units.Bytes(al.Size), units.Bytes(al.RequestedSize),
					al.State, al.Role, al.Category, loc)
			}
		}
		if tl := a.Timeline(d.Device); tl != nil {
			writePeakText(tw, tl, d.Peak.Roles, opt.TopN)
		}
		writeStagesText(tw, d)
		tw.line("")
		tw.line("  Fragmentation")
		fr := d.Fragmentation
		tw.line("    largest free block %s of %s free (external fragmentation %s)", units.Bytes(d.LargestFreeBlock),
			units.Bytes(d.InactiveBytes), units.Pct(fr.ExternalPct))
		tw.line("    free in segments with live blocks %s (%d blocks under 1 MiB); free in empty segments %s",
			units.Bytes(fr.FreeInUsedSegments), fr.SmallFreeBlocks, units.Bytes(fr.FreeInEmptySegments))
		if len(d.ActiveHist) > 0 || len(d.InactiveHist) > 0 {
			tw.line("    block sizes     active        inactive")
			for _, lo := range histKeys(d.ActiveHist, d.InactiveHist) {
				tw.line("    ≥%-10s %6s %9s  %6s %9s", units.Bytes(lo), countAt(d.ActiveHist, lo), bytesAt(d.ActiveHist, lo),
					countAt(d.InactiveHist, lo), bytesAt(d.InactiveHist, lo))
			}
		}
		tw.line("")
		if len(d.Recommendations) == 0 {
			tw.line("  Recommendations: none; the allocator state looks healthy")
		} else {
			tw.line("  Recommendations")
			for _, r := range d.Recommendations {
				tw.line("    %-2s %s", r.Severity.Mark("-"), r.Text)
			}
		}
	}
}

// writeTotals writes a table of totals (categories, roles) with each one's
// share of all bytes; nothing when there are none.
func writeTotals(tw *textWriter, title string, totals []snapshot.CategoryTotal, all int64) {
	if len(totals) == 0 {
		return
	}
	tw.line("")
	tw.line("  %s", title)
	for _, c := range totals {
		frac := 0.0
		if all > 0 {
			frac = float64(c.Bytes) / float64(all)
		}
		tw.line("    %-16s %10s %6s %s %5d blocks", c.Name, units.Bytes(c.Bytes), units.Pct(100*frac), bar(frac, 20), c.Blocks)
	}
}

func histKeys(hs ...snapshot.Histogram) []int64 {
	seen := map[int64]bool{}
	var keys []int64
	for _, h := range hs {
		for _, b := range h {
			if !seen[b.Lo] {
				seen[b.Lo] = true
				keys = append(keys, b.Lo)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

func countAt(h snapshot.Histogram, lo int64) string {
	for _, b := range h {
		if b.Lo == lo {
			return fmt.Sprint(b.Count)
		}
	}
	return "·"
}

func bytesAt(h snapshot.Histogram, lo int64) string {
	for _, b := range h {
		if b.Lo == lo {
			return units.Bytes(b.Bytes)
		}
	}
	return ""
}

func writePeakText(tw *textWriter, tl *snapshot.Timeline, roles []snapshot.CategoryTotal, n int) {
	p := &tl.Peak
	tw.line("")
	when := snapshot.PeakWhen(p.EventIndex)
	tw.line("  Peak: %s active of %s reserved (%.1f%%) %s (%s)", units.Bytes(p.Active), units.Bytes(p.Reserved), p.EfficiencyPct, when, tl.Note)
	tw.line("    by role:")
	for _, c := range roles {
		tw.line("      %-16s %10s %5d allocations", c.Name, units.Bytes(c.Bytes), c.Blocks)
	}
	tw.line("    by category:")
	total := 0 // allocations live at the peak
	for _, c := range tl.PeakCategories() {
		tw.line("      %-16s %10s %5d allocations", c.Name, units.Bytes(c.Bytes), c.Blocks)
		total += c.Blocks
	}
	tw.line("    %10s  %-15s %-16s %s", "SIZE", "ROLE", "CATEGORY", "SITE")
	var live []snapshot.Allocation // the n largest; all for n < 0
	switch {
	case n < 0:
		live = tl.PeakLive()
	case n > 0:
		live = tl.PeakTop(n)
	}
	for _, l := range live {
		loc := snapshot.Location(l.Frames)
		if loc == "" {
			loc = snapshot.NoFrames
		}
		tw.line("    %10s  %-15s %-16s %s", units.Bytes(l.Size), l.Role, l.Category, loc)
	}
	if n >= 0 && total > n {
		tw.line("    … %d more", total-n)
	}
}

// writeStagesText lists the stages grouped by name: a ProfilerStep#N of a
// thousand steps is one row (report --json lists each).
func writeStagesText(tw *textWriter, d *snapshot.DeviceStats) {
	if len(d.Stages) == 0 {
		return
	}
	tw.line("")
	tw.line("  Stages (annotations; each its highest peak)")
	groups := snapshot.GroupStages(d.Stages)
	w := 4
	for _, g := range groups {
		w = min(48, max(w, len(g.Name)))
	}
	tw.line("    %-*s %5s %10s %10s %10s  %s", w, "NAME", "COUNT", "PEAK", "MEAN Δ", "MAX Δ", "TOP CALL SITE AT THAT PEAK")
	for _, g := range groups {
		top := "-"
		if ss := d.Stages[g.PeakStage].Top; len(ss) > 0 {
			top = fmt.Sprintf("%s %s", units.Bytes(ss[0].Bytes), ss[0].Site)
		}
		tw.line("    %-*s %5d %10s %10s %10s  %s", w, g.Name, g.Count, units.Bytes(g.Peak), signedBytes(g.MeanDelta),
			signedBytes(g.MaxDelta), top)
	}
}

func signedBytes(b int64) string {
	if b < 0 {
		return "-" + units.Bytes(-b)
	}
	return "+" + units.Bytes(b)
}
