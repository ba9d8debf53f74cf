package trace

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
)

func nan() float64 { return math.NaN() }

// ParseTorchtitanExport reads torchtitan's structured memory export: a list
// of MemorySnapshot records {step, timestamp, device_mem_stats, metadata}, or
// an object holding such a list under any key (e.g. "history"). It becomes a
// step series of max active (as allocated) and max reserved memory, in MiB.
// Allocation retries and OOMs are named in Warnings; fields it does not know
// are listed there too.
func ParseTorchtitanExport(path string, data []byte) (*Rank, error) {
	var top any
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("torchtitan memory export: %w", err)
	}
	records, where, err := findRecords(top)
	if err != nil {
		return nil, err
	}
	r := &Rank{Rank: RankFromName(path), Path: path, Kind: KindTorchtitanJSON}
	it := Iteration{Key: "steps", X: Steps, PeakAllocated: Unset, Static: Unset, Theoretical: Unset}
	unknown := map[string]bool{}
	for i, rec := range records {
		m, ok := rec.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: expected an object", where, i)
		}
		step, ok := num(m["step"])
		if !ok {
			return nil, fmt.Errorf("%s[%d].step: expected a number", where, i)
		}
		stats, ok := m["device_mem_stats"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d].device_mem_stats: expected an object", where, i)
		}
		active, _ := num(stats["max_active_gib"])
		reserved, _ := num(stats["max_reserved_gib"])
		it.T = append(it.T, step)
		it.Allocated = append(it.Allocated, active*1024)
		it.Reserved = append(it.Reserved, reserved*1024)
		if n, _ := num(stats["num_alloc_retries"]); n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("step %v: %v allocation retries (the allocator freed its cache to satisfy a request)", step, n))
		}
		if n, _ := num(stats["num_ooms"]); n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("step %v: %v OOMs", step, n))
		}
		if md, ok := m["metadata"].(map[string]any); ok && r.Rank < 0 {
			if n, ok := num(md["rank"]); ok {
				r.Rank = int(n)
			}
		}
		for k := range m {
			switch k {
			case "step", "timestamp", "device_mem_stats", "metadata":
			default:
				unknown[k] = true
			}
		}
		for k := range stats {
			switch k {
			case "max_active_gib", "max_active_pct", "max_reserved_gib", "max_reserved_pct", "num_alloc_retries", "num_ooms":
			default:
				unknown["device_mem_stats."+k] = true
			}
		}
	}
	for k := range unknown {
		r.Warnings = append(r.Warnings, fmt.Sprintf("field %q not understood: ignored", k))
	}
	slices.Sort(r.Warnings)
	if r.Rank < 0 {
		r.Rank = 0
	}
	sortSeries(&it)
	r.Iterations = []Iteration{it}
	return r, nil
}

func findRecords(top any) ([]any, string, error) {
	switch t := top.(type) {
	case []any:
		return t, "records", nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if l, ok := t[k].([]any); ok && len(l) > 0 {
				if m, ok := l[0].(map[string]any); ok {
					if _, ok := m["device_mem_stats"]; ok {
						return l, strconv.Quote(k), nil
					}
				}
			}
		}
		return nil, "", fmt.Errorf("no list of records with device_mem_stats found (keys: %v)", keys)
	}
	return nil, "", fmt.Errorf("expected a list of memory records or an object holding one")
}

func num(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}
