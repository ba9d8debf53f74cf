package report

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"memscope/internal/units"
)

// Findings is the README.md of a saved report (report --out): the figures that
// matter, the recommendations, and links to the pictures.
func Findings(paths []string, reports []FileReport, dir string, pics []string) string {
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
				tensors := fmt.Sprintf("%d tensors", d.Tensors)
				if d.Tensors == 1 {
					tensors = "1 tensor"
				}
				fmt.Fprintf(&b, "**%s** (estimate): peak %s, listed %s in %s, unlisted %s.\n\n", d.Device,
					units.Bytes(d.PeakBytes), units.Bytes(d.ListedBytes), tensors, units.Bytes(d.UnlistedBytes))
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
	PictureLinks(&b, dir, pics)
	return b.String()
}

// PictureLinks writes a "Pictures" section linking pics (paths under
// dir) as Markdown images, for the README of a saved run.
func PictureLinks(b *strings.Builder, dir string, pics []string) {
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
