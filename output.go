package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"memscope/internal/units"
	"memscope/plot"
	"memscope/snapshot"
	"memscope/trace"
)

func pictureExt(format string) (string, bool) {
	switch strings.ToLower(strings.TrimPrefix(format, ".")) {
	case "png":
		return ".png", true
	case "svg":
		return ".svg", true
	}
	return "", false
}

// reportPlots writes the pictures of every report into dir (one
// subdirectory per input when there are several).
func reportPlots(dir, ext string, reports []snapshot.FileReport) ([]string, error) {
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

var reUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// folderName makes a file-system-safe name from a path.
func folderName(p string) string {
	base := filepath.Base(filepath.Clean(p))
	base = strings.TrimSuffix(base, filepath.Ext(base))
	if base == "." || base == "" || base == string(filepath.Separator) {
		base = "memscope"
	}
	return strings.Trim(reUnsafe.ReplaceAllString(base, "_"), "_")
}

// newRunFolder makes DIR/YYYYMMDD_HHMMSS_NAME and points DIR/latest at it.
func newRunFolder(root, name string, paths []string) (string, error) {
	if name == "" {
		if len(paths) > 0 {
			name = folderName(paths[0])
		} else {
			name = "memscope"
		}
	}
	name = strings.Trim(reUnsafe.ReplaceAllString(name, "_"), "_")
	dir := filepath.Join(root, time.Now().Format("20060102_150405")+"_"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	latest := filepath.Join(root, "latest")
	if fi, err := os.Lstat(latest); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return dir, fmt.Errorf("%s exists and is not a link; not replacing it", latest)
	}
	os.Remove(latest)
	if err := os.Symlink(filepath.Base(dir), latest); err != nil {
		return dir, fmt.Errorf("latest link: %w", err)
	}
	return dir, nil
}

func saveReportFolder(root, name string, paths []string, ext string, reports []snapshot.FileReport, opt snapshot.ReportOptions) (string, error) {
	dir, err := newRunFolder(root, name, paths)
	if err != nil {
		return dir, err
	}
	var text, js bytes.Buffer
	if err := snapshot.WriteText(&text, reports, opt); err != nil {
		return dir, err
	}
	if err := snapshot.WriteJSON(&js, reports, opt); err != nil {
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
	return dir, os.WriteFile(filepath.Join(dir, "README.md"), []byte(reportFindings(paths, reports, dir, pics)), 0o644)
}

// reportFindings is the README.md of a saved report: the figures that
// matter, the recommendations, and links to the pictures.
func reportFindings(paths []string, reports []snapshot.FileReport, dir string, pics []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Memory report\n\nInputs: %s  \nMade by `memscope report` on %s.\n\n", strings.Join(paths, ", "), time.Now().Format("2006-01-02 15:04"))
	for _, r := range reports {
		fmt.Fprintf(&b, "## %s\n\n", r.Path)
		if r.Err != nil {
			fmt.Fprintf(&b, "Could not be read: %v\n\n", r.Err)
			continue
		}
		if a := r.Analysis; a != nil {
			for _, d := range a.Devices {
				fmt.Fprintf(&b, "**cuda:%d**: reserved %s, allocated %s, efficiency %.1f%% (%s); cached free %s, rounding waste %s.\n\n",
					d.Device, units.Bytes(d.ReservedBytes), units.Bytes(d.AllocatedBytes), d.EfficiencyPct, d.Rating,
					units.Bytes(d.InactiveBytes), units.Bytes(d.RoundingWaste))
				if len(d.Categories) > 0 {
					b.WriteString("| category | bytes | blocks |\n|---|---:|---:|\n")
					for _, c := range d.Categories {
						fmt.Fprintf(&b, "| %s | %s | %d |\n", c.Name, units.Bytes(c.Bytes), c.Blocks)
					}
					b.WriteString("\n")
				}
				if tl := a.Timeline(d.Device); tl != nil {
					fmt.Fprintf(&b, "Peak %s at trace entry %d (%s).\n\n", units.Bytes(tl.Peak.Active), tl.Peak.EventIndex, tl.Note)
				}
				for _, rec := range d.Recommendations {
					fmt.Fprintf(&b, "- %s\n", rec.Text)
				}
				b.WriteString("\n")
			}
		}
		if e := r.Estimate; e != nil {
			for _, d := range e.Devices {
				fmt.Fprintf(&b, "**%s** (estimate): peak %s, listed %s in %d tensors, unlisted %s.\n\n", d.Device,
					units.Bytes(d.PeakBytes), units.Bytes(d.ListedBytes), d.Tensors, units.Bytes(d.UnlistedBytes))
				for i, m := range d.Modules {
					if i == 5 {
						break
					}
					fmt.Fprintf(&b, "- %s: %s in %d instances\n", m.Pattern, units.Bytes(m.Bytes), m.Instances)
				}
				b.WriteString("\n")
			}
		}
	}
	writePictureLinks(&b, dir, pics)
	return b.String()
}

func writePictureLinks(b *strings.Builder, dir string, pics []string) {
	if len(pics) == 0 {
		return
	}
	b.WriteString("## Pictures\n\n")
	for _, p := range pics {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			rel = p
		}
		fmt.Fprintf(b, "![%s](%s)\n\n", strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)), filepath.ToSlash(rel))
	}
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
	writePictureLinks(&b, dir, pics)
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
