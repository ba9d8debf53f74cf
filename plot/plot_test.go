package plot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"memscope/internal/units"
	"memscope/snapshot"
	"memscope/trace"
)

func comparison(t *testing.T) *trace.Comparison {
	t.Helper()
	real, err := trace.LoadPath(context.Background(), "../testdata/traces/generated/memory_traces")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := trace.LoadPath(context.Background(), "../testdata/traces/generated/memory_traces_scaling")
	if err != nil {
		t.Fatal(err)
	}
	return trace.Compare(real, sim, -1, nil)
}

// TestOverviewSeriesAreTheJSONPeaks: the bars drawn are the peaks the JSON
// reports.
func TestOverviewSeriesAreTheJSONPeaks(t *testing.T) {
	c := comparison(t)
	var buf bytes.Buffer
	if err := c.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Ranks []struct {
			Rank int `json:"rank"`
			Real *struct {
				Peak int64 `json:"peak_bytes"`
			} `json:"real"`
			Sim *struct {
				Peak int64 `json:"peak_bytes"`
			} `json:"sim"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal(buf.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	f := OverviewFigure(c)
	_, div := ByteUnit(0)
	if f.YUnit == "GiB" {
		div = units.GiB
	}
	for i, r := range js.Ranks {
		if f.Labels[i] != strconv.Itoa(r.Rank) {
			t.Fatalf("label %d: %s", i, f.Labels[i])
		}
		if got := f.Series[0].Y[i] * div; math.Abs(got-float64(r.Real.Peak)) > 1 {
			t.Errorf("rank %d real peak drawn %v, JSON %d", r.Rank, got, r.Real.Peak)
		}
		if got := f.Series[1].Y[i] * div; math.Abs(got-float64(r.Sim.Peak)) > 1 {
			t.Errorf("rank %d sim peak drawn %v, JSON %d", r.Rank, got, r.Sim.Peak)
		}
	}
}

func TestRankFigure(t *testing.T) {
	c := comparison(t)
	rc := c.Ranks[2] // static and theoretical both known
	f := RankFigure(rc, Options{})
	if len(f.Series) != 2 || f.Series[0].Dashed || !f.Series[1].Dashed {
		t.Fatalf("real solid, sim dashed: %+v", f.Series)
	}
	if len(f.HLines) != 2 || f.HLines[0].Color != "#009E73" || f.HLines[1].Color != "#009E73" {
		t.Errorf("static lines only, one per side (theoretical off by default): %+v", f.HLines)
	}
	if f := RankFigure(rc, Options{ShowTheoretical: true}); len(f.HLines) != 4 {
		t.Errorf("--show-theoretical adds the red lines: %+v", f.HLines)
	}
	// Relative time starts at 0; values are the iteration's, in the unit.
	div := float64(units.GiB)
	if f.YUnit == "MiB" {
		div = units.MiB
	}
	it := rc.Real.It
	if f.Series[0].X[0] != 0 || math.Abs(f.Series[0].Y[5]*div-it.Allocated[5]*units.MiB) > 1 {
		t.Errorf("real series: x0 %v y5 %v vs %v", f.Series[0].X[0], f.Series[0].Y[5]*div, it.Allocated[5]*units.MiB)
	}
}

func TestSnapshotFigures(t *testing.T) {
	s, err := snapshot.Open(context.Background(), "../testdata/snapshots/silmont2000_assignment2-systems__memory_forward_fp32_128.pickle")
	if err != nil {
		t.Fatal(err)
	}
	a := snapshot.Analyze(s, nil)
	d := &a.Devices[0]
	figs := SnapshotFigures(d, a.Timeline(0))
	for _, name := range []string{"memory_overview", "top_consumers", "category_breakdown", "size_distribution", "memory_efficiency", "memory_timeline"} {
		if figs[name] == nil {
			t.Errorf("missing %s", name)
		}
	}
	// With a trace, efficiency is judged at the peak, as the report does.
	_, div := ByteUnit(float64(d.ReservedBytes))
	ef := figs["memory_efficiency"].Series[0].Y
	if int64(math.Round(ef[0]*div)) != d.Peak.Reserved || int64(math.Round(ef[1]*div)) != d.Peak.Active ||
		!strings.Contains(figs["memory_efficiency"].Title, fmt.Sprintf("%.1f%%", d.Peak.EfficiencyPct)) {
		t.Errorf("efficiency bars %v vs reserved %d active %d at the peak", ef, d.Peak.Reserved, d.Peak.Active)
	}
	// Top consumers are the live set at the peak, labelled role · site.
	top := figs["top_consumers"]
	peakTop := a.Timeline(0).PeakLive()[0]
	if n := len(top.Labels); n == 0 || !strings.HasPrefix(top.Labels[n-1], peakTop.Role.String()+" · ") ||
		int64(math.Round(top.Series[0].Y[n-1]*unitDiv(top.YUnit))) != peakTop.Size {
		t.Errorf("top consumers' largest bar %q, want the peak's largest (%d bytes, %s)", top.Labels[len(top.Labels)-1], peakTop.Size, peakTop.Role)
	}
	var rsum float64
	for _, v := range figs["role_breakdown"].Series[0].Y {
		rsum += v
	}
	if math.Abs(rsum*unitDiv(figs["role_breakdown"].YUnit)-float64(d.Peak.Active)) > 4 {
		t.Errorf("roles at the peak sum to %v, peak %d", rsum*unitDiv(figs["role_breakdown"].YUnit), d.Peak.Active)
	}
	var sum float64
	for _, v := range figs["category_breakdown"].Series[0].Y {
		sum += v
	}
	cdiv := float64(units.MiB)
	if figs["category_breakdown"].YUnit == "GiB" {
		cdiv = units.GiB
	}
	if math.Abs(sum*cdiv-float64(d.ActiveBytes)) > 2 {
		t.Errorf("categories sum to %v, active %d", sum*cdiv, d.ActiveBytes)
	}
	// The bands are stacked: their sum at a column is the active memory
	// drawn there, and its maximum is the replay's peak.
	tl := figs["memory_timeline"]
	var peak float64
	for k := range tl.Series[0].Y {
		var sum float64
		for _, b := range tl.Series {
			sum += b.Y[k]
		}
		peak = math.Max(peak, sum)
	}
	_, tdiv := ByteUnit(peak * 1) // recomputed below from the figure's unit
	if tl.YUnit == "MiB" {
		tdiv = units.MiB
	}
	if int64(math.Round(peak*tdiv)) != a.Timeline(0).Peak.Active {
		t.Errorf("timeline peak drawn %v, replay %d", peak*tdiv, a.Timeline(0).Peak.Active)
	}
}

// TestSavePNGAndSVG writes real files and decodes them.
func TestSavePNGAndSVG(t *testing.T) {
	dir := t.TempDir()
	pics, err := CompareDir(dir, ".png", comparison(t), Options{ShowTheoretical: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(pics) != 7 || filepath.Base(pics[0]) != "memory_comparison_rank_0.png" || filepath.Base(pics[6]) != "memory_comparison_overview.png" {
		t.Fatalf("pictures: %v", pics)
	}
	f, err := os.Open(pics[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if cfg.Width != 960 || cfg.Height != 528 {
		t.Errorf("PNG is %dx%d, want 960x528 (10x5.5 in at 96 dpi)", cfg.Width, cfg.Height)
	}
	svg := filepath.Join(dir, "overview.svg")
	if err := ComparisonOverview(svg, comparison(t)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<svg[^>]*width="([\d.]+)pt"[^>]*height="([\d.]+)pt"`).FindSubmatch(b)
	if m == nil || string(m[1]) != "720" || string(m[2]) != "396" {
		t.Errorf("SVG size: %q", m)
	}
	if err := Save(OverviewFigure(comparison(t)), filepath.Join(dir, "x.bmp")); err == nil {
		t.Error("unknown formats are refused")
	}
}

// TestRankFigureLinesPerSide: static and theoretical memory are drawn per
// side (real solid, simulated dashed), only when above 0, and one-sided
// ranks get their picture.
func TestRankFigureLinesPerSide(t *testing.T) {
	c := comparison(t)
	for _, rc := range c.Ranks {
		f := RankFigure(rc, Options{ShowTheoretical: true})
		want := map[string]bool{}
		for _, sd := range []struct {
			name string
			s    *trace.SideStats
		}{{"Real", rc.Real}, {"Sim", rc.Sim}} {
			if sd.s != nil && sd.s.Static > 0 {
				want["Static Memory ("+sd.name+")"] = sd.name == "Sim"
			}
			if sd.s != nil && sd.s.Theoretical > 0 {
				want["Theoretical Memory ("+sd.name+")"] = sd.name == "Sim"
			}
		}
		got := map[string]bool{}
		for _, h := range f.HLines {
			got[h.Name[:strings.Index(h.Name, ")")+1]] = h.Dashed
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("rank %d lines %v, want %v (name: dashed)", rc.Rank, got, want)
		}
	}
	// Rank 0 writes static 0: no line at 0 on either side.
	if f := RankFigure(c.Ranks[0], Options{ShowTheoretical: true}); strings.Contains(fmt.Sprint(f.HLines), "Static") {
		t.Errorf("a static value of 0 is not drawn: %v", f.HLines)
	}
	one := &trace.Comparison{Ranks: []trace.RankComparison{{Rank: 4, SimRank: 4, Real: c.Ranks[1].Real, PeakErrorPct: math.NaN()}}}
	pics, err := CompareDir(t.TempDir(), ".png", one, Options{})
	if err != nil || len(pics) != 2 || filepath.Base(pics[0]) != "memory_comparison_rank_4.png" {
		t.Errorf("a one-sided rank gets its picture: %v %v", pics, err)
	}
}

func unitDiv(unit string) float64 {
	switch unit {
	case "GiB":
		return units.GiB
	case "MiB":
		return units.MiB
	case "KiB":
		return units.KiB
	}
	return 1
}
