package snapshot

import (
	"fmt"

	"memscope/internal/units"
)

// Severity orders recommendations.
type Severity int

// Severities, most urgent last.
const (
	Info Severity = iota
	Warning
	Critical
)

func (s Severity) String() string {
	switch s {
	case Critical:
		return "critical"
	case Warning:
		return "warning"
	}
	return "info"
}

// Recommendation is one finding with the figure behind it.
type Recommendation struct {
	Severity Severity
	Text     string
}

func (r Recommendation) String() string { return r.Text }

// Thresholds behind the recommendations.
const (
	cacheOverheadPct   = 10        // % of reserved held cached but unallocated
	inactiveLimit      = 100 << 20 // bytes of inactive blocks worth a note
	roundingWastePct   = 5         // % of allocated lost to rounding
	fragMinFreeBlocks  = 16
	fragMinExternalPct = 50
)

func recommend(s *Snapshot, st *DeviceStats) []Recommendation {
	var out []Recommendation
	add := func(sev Severity, format string, args ...any) {
		out = append(out, Recommendation{Severity: sev, Text: fmt.Sprintf(format, args...)})
	}
	for i, o := range st.OOMs {
		if i == 3 {
			add(Critical, "%d more OOM events follow in the trace", len(st.OOMs)-3)
			break
		}
		loc := Location(o.Frames)
		if loc != "" {
			loc = " at " + loc
		}
		add(Critical, "out of memory at trace entry %d: a request of %s failed with %s free on the device%s",
			o.Index, units.Bytes(o.Size), units.Bytes(o.DeviceFree), loc)
	}
	if st.ReservedBytes > 0 {
		cached := st.ReservedBytes - st.AllocatedBytes
		pct := 100 * float64(cached) / float64(st.ReservedBytes)
		if pct > cacheOverheadPct {
			add(Warning, "cache overhead: %s (%s of reserved %s) is reserved but not allocated; expandable_segments:True in PYTORCH_CUDA_ALLOC_CONF usually cuts it, torch.cuda.empty_cache() returns wholly free segments",
				units.Bytes(cached), units.Pct(pct), units.Bytes(st.ReservedBytes))
		}
	}
	if st.InactiveBytes > inactiveLimit {
		add(Warning, "%s sits in %d inactive (cached free) blocks; %s of it is in segments that still hold live tensors, so empty_cache() cannot return it",
			units.Bytes(st.InactiveBytes), st.InactiveBlocks, units.Bytes(st.Fragmentation.FreeInUsedSegments))
	}
	fr := st.Fragmentation
	if st.InactiveBlocks >= fragMinFreeBlocks && fr.ExternalPct >= fragMinExternalPct && fr.SegmentsWithFree > 1 {
		add(Warning, "fragmentation: %d free blocks spread over %d segments; the largest is %s of %s free (%s external fragmentation), so a large request can fail with plenty free; try expandable_segments:True, or max_split_size_mb to keep large blocks whole",
			st.InactiveBlocks, fr.SegmentsWithFree, units.Bytes(st.LargestFreeBlock), units.Bytes(st.InactiveBytes), units.Pct(fr.ExternalPct))
	}
	if st.AllocatedBytes > 0 {
		pct := 100 * float64(st.RoundingWaste) / float64(st.AllocatedBytes)
		if pct > roundingWastePct {
			add(Info, "rounding waste: %s (%s of allocated) is lost to block rounding; odd tensor sizes are rounded up, roundup_power2_divisions or padding shapes to multiples of 512 bytes reduces it",
				units.Bytes(st.RoundingWaste), units.Pct(pct))
		}
	}
	if st.PendingFreeBytes > 0 {
		add(Info, "%s is freed but waiting for other streams to finish using it (record_stream / cross-stream frees)",
			units.Bytes(st.PendingFreeBytes))
	}
	for _, p := range st.Pools {
		if p.Name == "private" && p.Reserved > 0 {
			add(Info, "private pools (CUDA graphs or MemPool) reserve %s in %d segments; the regular allocator cannot reuse it",
				units.Bytes(p.Reserved), p.Segments)
		}
	}
	if st.TraceTruncated {
		add(Info, "trace incomplete: %s; raise max_entries in torch.cuda.memory._record_memory_history to see the whole run", st.TruncationReason)
	}
	if st.TraceEntries == 0 && st.Segments > 0 {
		add(Info, "no allocation trace on this device: call torch.cuda.memory._record_memory_history() before the work to get a timeline and call sites")
	}
	if len(s.Settings.Raw) > 0 && !s.Settings.ExpandableSegments && st.ReservedBytes > 0 &&
		(fr.ExternalPct >= fragMinExternalPct || 100*float64(st.ReservedBytes-st.AllocatedBytes)/float64(st.ReservedBytes) > cacheOverheadPct) {
		add(Info, "expandable_segments is off (PYTORCH_CUDA_ALLOC_CONF=%q)", s.Settings.AllocConf)
	}
	return out
}
