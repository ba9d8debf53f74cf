package trace

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"memscope/internal/budget"

	"memscope/format"
	"memscope/internal/jsonscan"
)

func nan() float64 { return math.NaN() }

// statsFields is torchtitan's DeviceMemStats namedtuple in field order (a
// namedtuple dumped by json.dump is an array), then the two fields the
// memory_tracker fork adds.
var statsFields = []string{"max_active_gib", "max_active_pct", "max_reserved_gib", "max_reserved_pct",
	"num_alloc_retries", "num_ooms", "peak_allocated_gib", "peak_allocated_pct"}

// ParseTorchtitanExport reads torchtitan's structured memory exports:
//   - MemoryDataCollector's history: a list of {step, timestamp,
//     device_mem_stats, metadata}, or an object holding one under any key
//     (e.g. "history");
//   - the memory_tracker fork's export_to_json: {"metadata", "snapshots":
//     [{step, timestamp, memory_stats, metadata}]}.
//
// Stats are an object or an array in namedtuple order. NaN and Infinity
// (Python's json writes them for a NaN loss) are accepted anywhere. The
// series are peak allocated (the fork's peak_allocated_gib, else max
// active) as Allocated, max active as Active and max reserved as
// Reserved, in MiB; allocation retries and OOMs become marks and warnings.
func ParseTorchtitanExport(path string, data []byte) (*Rank, error) {
	sc := jsonscan.New(data)
	top, err := sc.ValueWithin(budget.Limit(len(data)))
	if err != nil {
		return nil, fmt.Errorf("torchtitan memory export: %w", err)
	}
	records, where, err := findRecords(top)
	if err != nil {
		return nil, err
	}
	r := &Rank{Rank: RankFromName(path), Path: path, Kind: format.TitanExport}
	it := Iteration{Key: "steps", X: Steps, PeakAllocated: Unset, Static: Unset, Theoretical: Unset, FilePeak: Unset}
	var unknown unknownFields
	hasPeak := false
	var peaks []float64
	for i, rec := range records {
		m, ok := rec.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: expected an object", where, i)
		}
		step, ok := num(m["step"])
		if !ok || !finite(step) {
			return nil, fmt.Errorf("%s[%d].step: expected a number", where, i)
		}
		statsKey := "device_mem_stats"
		if _, ok := m[statsKey]; !ok {
			statsKey = "memory_stats"
		}
		stats, err := statsObject(m[statsKey])
		if err != nil {
			return nil, fmt.Errorf("%s[%d].%s: %w", where, i, statsKey, err)
		}
		active, _ := num(stats["max_active_gib"])
		reserved, _ := num(stats["max_reserved_gib"])
		peak, okPeak := num(stats["peak_allocated_gib"])
		hasPeak = hasPeak || okPeak
		it.T = append(it.T, step)
		it.Active = append(it.Active, gibToMiB(active, true))
		it.Reserved = append(it.Reserved, gibToMiB(reserved, true))
		peaks = append(peaks, gibToMiB(peak, okPeak))
		if n, _ := num(stats["num_alloc_retries"]); n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("step %v: %v allocation retries (the allocator freed its cache to satisfy a request)", step, n))
			it.Marks = append(it.Marks, Mark{X: step, Label: fmt.Sprintf("%v alloc retries", n)})
		}
		if n, _ := num(stats["num_ooms"]); n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("step %v: %v OOMs", step, n))
			it.Marks = append(it.Marks, Mark{X: step, Label: fmt.Sprintf("%v OOMs", n), OOM: true})
		}
		if md, ok := m["metadata"].(map[string]any); ok && r.Rank < 0 {
			if n, ok := num(md["rank"]); ok && finite(n) {
				r.Rank = int(n)
			}
		}
		for k := range m {
			switch k {
			case "step", "timestamp", "metadata", statsKey:
			default:
				unknown.add([]byte(k))
			}
		}
		for k := range stats {
			if !slices.Contains(statsFields, k) {
				unknown.add([]byte(statsKey + "." + k))
			}
		}
	}
	it.Allocated = it.Active
	if hasPeak {
		it.Allocated = peaks
	} else {
		it.Active = nil // the same series: draw it once
	}
	r.Warnings = append(r.Warnings, unknown.warnings("field %q not understood: ignored")...)
	slices.Sort(r.Warnings)
	if r.Rank < 0 {
		r.Rank = 0
	}
	sortSeries(&it)
	r.Iterations = []Iteration{it}
	return r, nil
}

// gibToMiB converts a GiB figure; NaN when absent or not finite.
func gibToMiB(v float64, ok bool) float64 {
	if !ok || !finite(v) {
		return math.NaN()
	}
	return v * 1024
}

// statsObject accepts the stats as an object or as an array in namedtuple
// order.
func statsObject(v any) (map[string]any, error) {
	switch s := v.(type) {
	case map[string]any:
		return s, nil
	case []any:
		if len(s) != 6 && len(s) != len(statsFields) {
			return nil, fmt.Errorf("an array of %d values; expected 6 (DeviceMemStats) or %d", len(s), len(statsFields))
		}
		m := map[string]any{}
		for i, x := range s {
			m[statsFields[i]] = x
		}
		return m, nil
	}
	return nil, fmt.Errorf("expected an object or an array")
}

func findRecords(top any) ([]any, string, error) {
	isRecord := func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		_, a := m["device_mem_stats"]
		_, b := m["memory_stats"]
		return a || b
	}
	switch t := top.(type) {
	case []any:
		return t, "records", nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		// "snapshots" (memory_tracker) first, then any list of records.
		slices.SortStableFunc(keys, func(a, b string) int {
			switch {
			case a == "snapshots" && b != "snapshots":
				return -1
			case b == "snapshots" && a != "snapshots":
				return 1
			}
			return 0
		})
		for _, k := range keys {
			if l, ok := t[k].([]any); ok && len(l) > 0 && isRecord(l[0]) {
				return l, strconv.Quote(k), nil
			}
		}
		return nil, "", fmt.Errorf("no list of records with device_mem_stats or memory_stats found (keys: %v)", keys)
	}
	return nil, "", fmt.Errorf("expected a list of memory records or an object holding one")
}

func num(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}
