// Package report writes the text and JSON reports of analysed allocator
// snapshots and estimates (memscope report, and the explorer's
// non-interactive form).
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"memscope/format"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
)

// FileReport is one input of `memscope report`: an analysed allocator
// snapshot, an analysed estimate, or the error that stopped it.
type FileReport struct {
	Path     string
	Label    snapshot.Label
	Kind     format.Kind
	Err      error
	Analysis *snapshot.Analysis
	Estimate *estimate.Analysis
	// prepared, set by Prepare, holds what the writers need of Analysis
	// or Estimate, which Prepare drops.
	prepared *prepared
}

// prepared is a file's report rendered ahead of the writers.
type prepared struct {
	asJSON   bool
	devices  any    // the file's "devices" (asJSON)
	text     []byte // its text section, sanitised, without the title line
	summary  *snapshot.RankSummary
	warnings []string // the snapshot's notes
}

// Prepare renders r as WriteJSON (asJSON) or WriteText will write it with
// opt (whose Ranks it does not read), keeps its row of a rank table and its
// snapshot's notes, and drops its analysis: a report of a folder of rank
// snapshots otherwise held every analysis until it wrote (8 snapshots of
// 45 MB: 297 MiB against 81 for one). r must then be written by WriteJSON
// when asJSON, else by WriteText, with the same TopN and Allocations. rank
// says r will be a row of a rank table (RankSetOf).
func Prepare(r *FileReport, opt Options, asJSON, rank bool) {
	if r.Err != nil || r.prepared != nil || (r.Analysis == nil && r.Estimate == nil) {
		return
	}
	p := &prepared{asJSON: asJSON}
	if a := r.Analysis; a != nil {
		if rank {
			sum := snapshot.Summarize(r.Path, a)
			p.summary = &sum
		}
		p.warnings = a.Snapshot.Warnings
	}
	if asJSON {
		p.devices = fileDevicesJSON(r, opt)
	} else {
		var b bytes.Buffer
		tw := &textWriter{w: &b}
		writeFileText(tw, r, opt)
		p.text = b.Bytes()
	}
	r.prepared, r.Analysis, r.Estimate = p, nil, nil
}

// Warnings are the notes of r's snapshot (none for an estimate or a
// failed file).
func (r *FileReport) Warnings() []string {
	switch {
	case r.prepared != nil:
		return r.prepared.warnings
	case r.Analysis != nil:
		return r.Analysis.Snapshot.Warnings
	}
	return nil
}

// JSON shapes of `memscope report --json`, documented in the README.
type jsonReport struct {
	Files []jsonFile    `json:"files"`
	Ranks []jsonRankSet `json:"ranks"`
}

type jsonFile struct {
	Path    string      `json:"path"`
	Kind    format.Kind `json:"kind"`
	Error   *string     `json:"error"`
	Devices any         `json:"devices"`
}

type jsonDevice struct {
	Device          string         `json:"device"`
	Reserved        int64          `json:"reserved_bytes"`
	Allocated       int64          `json:"allocated_bytes"`
	Active          int64          `json:"active_bytes"`
	Requested       int64          `json:"requested_bytes"`
	Inactive        int64          `json:"inactive_bytes"`
	RoundingWaste   int64          `json:"rounding_waste_bytes"`
	Segments        int            `json:"segments"`
	Blocks          int            `json:"blocks"`
	ActiveBlocks    int            `json:"active_blocks"`
	EfficiencyPct   float64        `json:"efficiency_pct"`
	TraceEntries    int            `json:"trace_entries"`
	OOMEvents       int            `json:"oom_events"`
	Categories      []jsonCategory `json:"categories"`
	Roles           []jsonCategory `json:"roles"`
	Top             []jsonTop      `json:"top"`
	Recommendations []string       `json:"recommendations"`
	Peak            *jsonPeak      `json:"peak,omitempty"`
	Stages          []jsonStage    `json:"stages"`
	Steps           *jsonSteps     `json:"steps"`
	LeakSuspects    []jsonLeak     `json:"leak_suspects"`
	PendingFrees    *jsonPending   `json:"pending_frees"`
	// Allocations is every active block ([]jsonAlloc, none omitted),
	// with --allocations only; while written, what takeArrays leaves.
	Allocations any `json:"allocations,omitempty"`
}

// jsonAlloc is one active block of report --json --allocations: enough to
// join memscope's answer with a script's own tensors (by data_ptr).
type jsonAlloc struct {
	Addr      uint64 `json:"addr"`
	Size      int64  `json:"size"`
	Requested int64  `json:"requested"`
	Role      string `json:"role"`
	Category  string `json:"category"`
	Site      string `json:"site"`
	Op        string `json:"op"`
}

type jsonStage struct {
	Name        string     `json:"name"`
	Occurrence  int        `json:"occurrence"`
	Depth       int        `json:"depth"`
	StartUS     int64      `json:"start_us"`
	EndUS       int64      `json:"end_us"`
	FirstEvent  int        `json:"first_event"`
	EndEvent    int        `json:"end_event"`
	OpenStart   bool       `json:"open_start"`
	OpenEnd     bool       `json:"open_end"`
	StartActive int64      `json:"start_active_bytes"`
	EndActive   int64      `json:"end_active_bytes"`
	Delta       int64      `json:"delta_bytes"`
	Peak        int64      `json:"peak_bytes"`
	PeakEvent   int        `json:"peak_event"`
	Allocated   int64      `json:"allocated_bytes"`
	Allocations int        `json:"allocations"`
	TopSites    []jsonSite `json:"top_sites"`
}

type jsonSite struct {
	Site        string `json:"site"`
	Bytes       int64  `json:"bytes"`
	Allocations int    `json:"allocations"`
}

type jsonSteps struct {
	Marker string `json:"marker"`
	Count  int    `json:"count"`
}

type jsonLeak struct {
	Site       string `json:"site"`
	FirstBytes int64  `json:"first_bytes"`
	LastBytes  int64  `json:"last_bytes"`
	Growth     int64  `json:"growth_bytes"`
	StepsGrew  int    `json:"steps_grew"`
	Steps      int    `json:"steps"`
}

type jsonPending struct {
	Deferred     int        `json:"deferred"`
	Long         int        `json:"long"`
	LongBytes    int64      `json:"long_bytes"`
	WaitUnit     string     `json:"wait_unit"`
	MedianWait   int64      `json:"median_wait"`
	MaxWait      int64      `json:"max_wait"`
	MaxSite      string     `json:"max_site"`
	MaxSize      int64      `json:"max_size"`
	AtPeak       int64      `json:"at_peak_bytes"`
	StillPending int        `json:"still_pending"`
	TopSites     []jsonSite `json:"top_sites"`
}

func sitesJSON(ss []snapshot.SiteBytes) []jsonSite {
	out := []jsonSite{}
	for _, s := range ss {
		out = append(out, jsonSite{Site: s.Site, Bytes: s.Bytes, Allocations: s.Count})
	}
	return out
}

// anomaliesJSON adds the stages, the leak check and the pending frees;
// they need a trace, and are empty (steps and pending_frees null) without.
func anomaliesJSON(j *jsonDevice, d *snapshot.DeviceStats, hasTrace bool) {
	j.Stages, j.LeakSuspects = make([]jsonStage, 0, len(d.Stages)), []jsonLeak{}
	for _, s := range d.Stages {
		j.Stages = append(j.Stages, jsonStage{Name: s.Name, Occurrence: s.Occurrence, Depth: s.Depth,
			StartUS: s.StartUS, EndUS: s.EndUS, FirstEvent: s.First, EndEvent: s.Last, OpenStart: s.OpenStart, OpenEnd: s.OpenEnd,
			StartActive: s.StartActive, EndActive: s.EndActive, Delta: s.Delta(), Peak: s.Peak, PeakEvent: s.PeakEvent,
			Allocated: s.Allocated, Allocations: s.AllocatedCount, TopSites: sitesJSON(s.Top)})
	}
	if d.HasSteps {
		j.Steps = &jsonSteps{Marker: d.Steps.Name, Count: len(d.Steps.Events)}
	}
	for _, l := range d.Leaks {
		j.LeakSuspects = append(j.LeakSuspects, jsonLeak{Site: l.Site, FirstBytes: l.First, LastBytes: l.Last,
			Growth: l.Growth(), StepsGrew: l.Grew, Steps: l.Steps})
	}
	if !hasTrace {
		return
	}
	p := &d.Pending
	unit := "events"
	if p.ByTime {
		unit = "us"
	}
	j.PendingFrees = &jsonPending{Deferred: p.Deferred, Long: p.Long, LongBytes: p.LongBytes, WaitUnit: unit,
		MedianWait: p.MedianWait, MaxWait: p.MaxWait, MaxSite: p.MaxSite, MaxSize: p.MaxSize, AtPeak: p.AtPeak,
		StillPending: p.StillPending, TopSites: sitesJSON(p.Top)}
}

type jsonCategory struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	Blocks int    `json:"blocks"`
}

type jsonTop struct {
	Size          int64  `json:"size"`
	RequestedSize int64  `json:"requested_size"`
	Address       uint64 `json:"address"`
	State         string `json:"state"`
	Category      string `json:"category"`
	// CategoryFrame is the frame ("file:line function") whose base file
	// name or function name decided the category, and CategoryKeyword the
	// keyword that matched; both empty for Unknown.
	CategoryFrame   string `json:"category_frame"`
	CategoryKeyword string `json:"category_keyword"`
	Role            string `json:"role"`
	// Site is the user's own line that made the block (Location is the same
	// frame, kept for older scripts); Op the innermost torch frame.
	Site     string `json:"site"`
	Op       string `json:"op"`
	Location string `json:"location"`
}

// jsonPeak is the peak of memory_viz's active series (see Timeline).
type jsonPeak struct {
	ActiveBytes   int64   `json:"active_bytes"`
	EventIndex    int     `json:"event_index"`
	TimeUS        int64   `json:"time_us"`
	ReservedBytes int64   `json:"reserved_bytes"`
	EfficiencyPct float64 `json:"efficiency_pct"`
	Rating        string  `json:"rating"`
	// FromTrace is false when the device has no trace: the peak is then the
	// snapshot's active blocks (memory_viz's flat line).
	FromTrace        bool           `json:"from_trace"`
	FreeBytes        int64          `json:"free_bytes"`
	LargestFreeBytes int64          `json:"largest_free_bytes"`
	ExternalFragPct  float64        `json:"external_fragmentation_pct"`
	Roles            []jsonCategory `json:"roles"`
	Live             []jsonLiveItem `json:"live"`
}

type jsonLiveItem struct {
	Size     int64  `json:"size"`
	Category string `json:"category"`
	Role     string `json:"role"`
	Site     string `json:"site"`
	Op       string `json:"op"`
	Location string `json:"location"`
}

// Options shapes the report.
type Options struct {
	TopN int
	// Allocations lists every active block in the JSON.
	Allocations bool
	// Ranks are the folders of per-rank snapshots among the inputs; they
	// get a table of ranks before the files.
	Ranks []RankSet
}

// fileDevicesJSON is the "devices" of a file that was read.
func fileDevicesJSON(r *FileReport, opt Options) any {
	if r.Analysis == nil {
		return estimateJSON(r.Estimate, opt.TopN)
	}
	devs := []jsonDevice{}
	for i := range r.Analysis.Devices {
		devs = append(devs, deviceJSON(r.Analysis, &r.Analysis.Devices[i], opt))
	}
	return devs
}

// WriteJSON writes the reports as the documented JSON.
func WriteJSON(w io.Writer, reports []FileReport, opt Options) error {
	out := jsonOf(reports, opt)
	// Compact first, then indented in one pass of our own (indenter): the
	// same bytes as Encoder.SetIndent("", "  "), in a third of the time.
	// The devices' stages and allocations are encoded a few at a time as
	// the indented JSON is written (writeArrays).
	arrays := takeArrays(&out)
	var compact bytes.Buffer
	if err := json.NewEncoder(&compact).Encode(out); err != nil {
		return err
	}
	return writeArrays(newIndentWriter(w, "  ", indentChunk), compact.Bytes(), arrays, arrayChunk)
}

// jsonOf is the reports' JSON value.
func jsonOf(reports []FileReport, opt Options) jsonReport {
	out := jsonReport{Files: []jsonFile{}, Ranks: ranksJSON(opt.Ranks)}
	for _, r := range reports {
		jf := jsonFile{Path: r.Path, Kind: r.Kind, Devices: []any{}}
		if jf.Kind == format.Unknown {
			// Nothing was recognised: say so rather than name a kind.
			jf.Kind = "unknown"
		}
		switch {
		case r.Err != nil:
			msg := r.Err.Error()
			jf.Error = &msg
		case r.prepared != nil && r.prepared.asJSON:
			jf.Devices = r.prepared.devices
		case r.Analysis != nil || r.Estimate != nil:
			jf.Devices = fileDevicesJSON(&r, opt)
		}
		out.Files = append(out.Files, jf)
	}
	return out
}

func deviceJSON(a *snapshot.Analysis, d *snapshot.DeviceStats, opt Options) jsonDevice {
	j := jsonDevice{
		Device: fmt.Sprintf("cuda:%d", d.Device), Reserved: d.ReservedBytes, Allocated: d.AllocatedBytes,
		Active: d.ActiveBytes, Requested: d.RequestedBytes, Inactive: d.InactiveBytes,
		RoundingWaste: d.RoundingWaste, Segments: d.Segments, Blocks: d.Blocks, ActiveBlocks: d.ActiveBlocks,
		EfficiencyPct: round2(d.EfficiencyPct), TraceEntries: d.TraceEntries, OOMEvents: len(d.OOMs),
		Categories: totalsJSON(d.Categories), Roles: totalsJSON(d.Roles), Top: []jsonTop{}, Recommendations: []string{},
	}
	n := 0
	for i := range d.Allocations {
		al := &d.Allocations[i]
		if al.State != snapshot.StateActiveAllocated {
			continue
		}
		if n == opt.TopN {
			break
		}
		n++
		jt := jsonTop{Size: al.Size, RequestedSize: al.RequestedSize, Address: al.Address,
			State: al.State.String(), Category: al.Category, CategoryKeyword: al.CategoryKeyword, Role: al.Role.String(),
			Site: al.Location(), Op: snapshot.Op(al.Frames), Location: al.Location()}
		if k := int(al.CategoryFrame); k >= 0 && k < al.Frames.Len() {
			jt.CategoryFrame = al.Frames.At(k).String()
		}
		j.Top = append(j.Top, jt)
	}
	for _, r := range d.Recommendations {
		j.Recommendations = append(j.Recommendations, r.Text)
	}
	pk := &d.Peak
	j.Peak = &jsonPeak{ActiveBytes: pk.Active, EventIndex: pk.EventIndex, TimeUS: pk.TimeUS,
		ReservedBytes: pk.Reserved, EfficiencyPct: round2(pk.EfficiencyPct), Rating: pk.Rating, FromTrace: pk.FromTrace,
		FreeBytes: pk.Free, LargestFreeBytes: pk.LargestFree, ExternalFragPct: round2(pk.ExternalPct),
		Roles: totalsJSON(pk.Roles), Live: []jsonLiveItem{}}
	// Without a trace the live set is the active blocks at their requested
	// sizes (what diff's peak rows use too).
	var top []snapshot.Allocation // the TopN largest; none for 0, all below
	switch {
	case opt.TopN < 0:
		top = a.PeakLive(d)
	case opt.TopN > 0:
		top = a.PeakTop(d, opt.TopN)
	}
	for _, l := range top {
		site := snapshot.Site(l.Frames)
		j.Peak.Live = append(j.Peak.Live, jsonLiveItem{Size: l.Size, Category: l.Category, Role: l.Role.String(),
			Site: site, Op: snapshot.Op(l.Frames), Location: site})
	}
	anomaliesJSON(&j, d, a.Timeline(d.Device) != nil)
	if opt.Allocations && len(d.Allocations) > 0 {
		all := make([]jsonAlloc, 0, len(d.Allocations))
		for i := range d.Allocations {
			al := &d.Allocations[i]
			all = append(all, jsonAlloc{Addr: al.Address, Size: al.Size, Requested: al.RequestedSize,
				Role: al.Role.String(), Category: al.Category, Site: al.Location(), Op: snapshot.Op(al.Frames)})
		}
		j.Allocations = all
	}
	return j
}

func totalsJSON(ts []snapshot.CategoryTotal) []jsonCategory {
	out := []jsonCategory{}
	for _, c := range ts {
		out = append(out, jsonCategory{Name: c.Name, Bytes: c.Bytes, Blocks: c.Blocks})
	}
	return out
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }
