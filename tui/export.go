package tui

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"memscope/model"
	"memscope/plot"
	"memscope/snapshot"
)

// Exports write the current view's picture (PNG) and table (CSV) into the
// export directory (the working directory unless set), named after the view
// and the time, and report where in the status line.

func exportDir(c *tabContext) string {
	if c.opts.ExportDir != "" {
		return c.opts.ExportDir
	}
	return "."
}

func stamp() string { return time.Now().Format("20060102_150405") }

func writeCSV(path string, header []string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(header)
	w.WriteAll(rows)
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func done(paths []string, err error) tea.Cmd {
	return func() tea.Msg { return doneMsg(paths, err) }
}

func doneMsg(paths []string, err error) tea.Msg {
	if err != nil {
		return statusMsg("export failed: " + err.Error())
	}
	return statusMsg("exported " + strings.Join(paths, ", "))
}

// background runs an export off the UI goroutine (drawing pictures takes
// a second or two) and reports where the files went. Its inputs must be
// computed before: the analyses are not safe for concurrent use.
func background(c *tabContext, work func() ([]string, error)) tea.Cmd {
	c.setStatus("exporting…")
	return func() tea.Msg { return doneMsg(work()) }
}

func f64(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func exportTraces(c *tabContext, t *tracesTab) tea.Cmd {
	if t.src == nil || len(t.rows) == 0 {
		return done(nil, fmt.Errorf("no traces to export"))
	}
	base := filepath.Join(exportDir(c), "memscope_traces_"+stamp())
	var rows [][]string
	for _, r := range t.rows {
		rows = append(rows, []string{strconv.Itoa(r.rank), f64(r.realPeak), f64(r.simPeak), f64(r.errPct), f64(r.curvePct)})
	}
	cmpn := t.src.Comparison
	detail, showTheo := -1, t.showTheo
	if r := t.cur(); r != nil && t.mode == modeDetail {
		detail = r.rank
	}
	return background(c, func() ([]string, error) {
		paths := []string{base + ".csv"}
		if err := writeCSV(paths[0], []string{"rank", "real_peak_mib", "sim_peak_mib", "peak_error_pct", "curve_error_pct"}, rows); err != nil {
			return nil, err
		}
		if cmpn == nil {
			return paths, nil
		}
		if detail >= 0 {
			for _, rc := range cmpn.Ranks {
				if rc.Rank == detail && rc.Real != nil && rc.Sim != nil {
					p := base + fmt.Sprintf("_rank%d.png", detail)
					if err := plot.RankComparison(p, rc, plot.Options{ShowTheoretical: showTheo}); err != nil {
						return paths, err
					}
					paths = append(paths, p)
				}
			}
			return paths, nil
		}
		p := base + "_overview.png"
		if err := plot.ComparisonOverview(p, cmpn); err != nil {
			return paths, err
		}
		return append(paths, p), nil
	})
}

func exportSnapshot(c *tabContext, t *snapTab) tea.Cmd {
	if t.src == nil || t.src.State != model.Loaded {
		return done(nil, fmt.Errorf("no snapshot to export"))
	}
	base := filepath.Join(exportDir(c), "memscope_snapshot_"+stamp())
	d, e := t.dev(), t.estDev()
	var tl *snapshot.Timeline
	if d != nil {
		tl = t.src.Analysis.Timeline(d.Device)
	}
	return background(c, func() ([]string, error) {
		var paths []string
		if d != nil {
			var rows [][]string
			for _, c := range d.Categories {
				rows = append(rows, []string{c.Name, strconv.FormatInt(c.Bytes, 10), strconv.Itoa(c.Blocks)})
			}
			if err := writeCSV(base+"_categories.csv", []string{"category", "bytes", "blocks"}, rows); err != nil {
				return nil, err
			}
			paths = append(paths, base+"_categories.csv")
			pics, err := plot.SnapshotPlots(base, d, tl)
			paths = append(paths, pics...)
			if err != nil {
				return paths, err
			}
		}
		if e != nil {
			var rows [][]string
			for _, m := range e.Modules {
				rows = append(rows, []string{m.Pattern, strconv.FormatInt(m.Bytes, 10), strconv.Itoa(m.Tensors), strconv.Itoa(m.Instances)})
			}
			if err := writeCSV(base+"_modules.csv", []string{"pattern", "bytes", "tensors", "instances"}, rows); err != nil {
				return paths, err
			}
			paths = append(paths, base+"_modules.csv")
			pics, err := plot.EstimatePlots(base, e)
			paths = append(paths, pics...)
			if err != nil {
				return paths, err
			}
		}
		return paths, nil
	})
}

func exportTop(c *tabContext, t *topTab) tea.Cmd {
	if len(t.view_) == 0 {
		return done(nil, fmt.Errorf("no rows to export"))
	}
	path := filepath.Join(exportDir(c), "memscope_top_"+stamp()+".csv")
	var rows [][]string
	for _, i := range t.view_ {
		al := t.allocs[i]
		rows = append(rows, []string{strconv.FormatInt(al.Size, 10), strconv.FormatInt(al.RequestedSize, 10), al.State.String(),
			al.Category, fmt.Sprintf("%#x", al.Address), al.Shape(), al.Module(), al.Phase(), t.locs[i]})
	}
	err := writeCSV(path, []string{"size", "requested_size", "state", "category", "address", "shape", "module", "phase", "location"}, rows)
	return done([]string{path}, err)
}

func exportTimeline(c *tabContext, t *timelineTab) tea.Cmd {
	if t.tl == nil {
		return done(nil, fmt.Errorf("no timeline to export"))
	}
	base := filepath.Join(exportDir(c), "memscope_timeline_"+stamp())
	var rows [][]string
	for _, l := range t.tl.LiveAt(t.cursor, 0) {
		rows = append(rows, []string{strconv.FormatInt(l.Size, 10), l.Category, snapshot.Location(l.Frames)})
	}
	tl := t.tl
	return background(c, func() ([]string, error) {
		if err := writeCSV(base+"_live.csv", []string{"size", "category", "location"}, rows); err != nil {
			return nil, err
		}
		p := base + ".png"
		if err := plot.Timeline(p, tl); err != nil {
			return []string{base + "_live.csv"}, err
		}
		return []string{base + "_live.csv", p}, nil
	})
}

// exportLive writes the shown GPUs' sampled history and the process table.
func exportLive(c *tabContext, t *liveTab) tea.Cmd {
	if t.sampler == nil {
		return done(nil, fmt.Errorf("no live GPUs to export"))
	}
	base := filepath.Join(exportDir(c), "memscope_live_"+stamp())
	var hist, procs [][]string
	for _, d := range t.shownDevices() {
		for _, s := range t.sampler.History(d.Index) {
			hist = append(hist, []string{s.Time.UTC().Format(time.RFC3339Nano), strconv.Itoa(d.Index), d.UUID,
				strconv.FormatInt(s.Used, 10), strconv.FormatInt(s.Reserved, 10), strconv.FormatInt(s.Total, 10),
				f64(s.UtilGPU), f64(s.PowerW), f64(s.TempC)})
		}
		if s := t.latest(d.Index); s != nil {
			for _, p := range s.Processes {
				procs = append(procs, []string{strconv.Itoa(p.PID), strconv.Itoa(p.GPU), strconv.FormatInt(p.Used, 10), p.User, p.Command})
			}
		}
	}
	if len(hist) == 0 {
		return done(nil, fmt.Errorf("no samples yet"))
	}
	paths := []string{base + "_history.csv", base + "_processes.csv"}
	err := writeCSV(paths[0], []string{"time", "gpu", "uuid", "used_bytes", "reserved_bytes", "total_bytes", "util_percent", "power_w", "temp_c"}, hist)
	if err == nil {
		err = writeCSV(paths[1], []string{"pid", "gpu", "used_bytes", "user", "command"}, procs)
	}
	return done(paths, err)
}

// exportFleet writes every GPU of the fleet with its latest figures.
func exportFleet(c *tabContext, t *fleetTab) tea.Cmd {
	if t.data == nil {
		return done(nil, fmt.Errorf("no fleet data yet"))
	}
	path := filepath.Join(exportDir(c), "memscope_fleet_"+stamp()+".csv")
	var rows [][]string
	n := func(v int64) string {
		if v < 0 {
			return ""
		}
		return strconv.FormatInt(v, 10)
	}
	for _, g := range t.data.GPUs {
		rows = append(rows, []string{g.Host, g.Index, g.UUID, g.Model, g.Namespace, g.Pod, n(g.Used), n(g.Free), n(g.Total), n(g.MaxUsed), f64(g.Util), f64(g.Power)})
	}
	err := writeCSV(path, []string{"host", "gpu", "uuid", "model", "namespace", "pod", "used_bytes", "free_bytes", "total_bytes", "max_used_bytes", "util_percent", "power_w"}, rows)
	return done([]string{path}, err)
}
