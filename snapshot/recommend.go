package snapshot

import (
	"fmt"
	"strings"

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

// Mark is how lists of recommendations flag the severity: "!!" critical,
// "!" warning, info the mark given (each writer has its bullet).
func (s Severity) Mark(info string) string {
	switch s {
	case Critical:
		return "!!"
	case Warning:
		return "!"
	}
	return info
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
	pk := &st.Peak
	atPeak := "At the snapshot"
	if pk.FromTrace {
		atPeak = "At the peak"
		if pk.EventIndex >= 0 {
			atPeak = fmt.Sprintf("At the peak (trace entry %d)", pk.EventIndex)
		}
	}
	// Cache overhead is judged where memory is tightest: a snapshot taken
	// after empty_cache() or at a quiet moment says little about the peak.
	peakCachedPct := 0.0
	if pk.Reserved > 0 {
		peakCachedPct = 100 * float64(pk.Reserved-pk.Active) / float64(pk.Reserved)
	}
	if peakCachedPct > cacheOverheadPct {
		add(Warning, "%s: cache overhead: %s (%s of reserved %s) is reserved but not in use; expandable_segments:True in PYTORCH_CUDA_ALLOC_CONF usually cuts it",
			atPeak, units.Bytes(pk.Reserved-pk.Active), units.Pct(peakCachedPct), units.Bytes(pk.Reserved))
	} else if pk.FromTrace && st.ReservedBytes > 0 {
		cached := st.ReservedBytes - st.AllocatedBytes
		if pct := 100 * float64(cached) / float64(st.ReservedBytes); pct > cacheOverheadPct {
			add(Info, "At the snapshot: %s of reserved %s is cached but not allocated, but %s: %s of reserved was in use, so this is memory kept from the peak, not waste; torch.cuda.empty_cache() would return the wholly free segments to other processes",
				units.Bytes(cached), units.Bytes(st.ReservedBytes), strings.ToLower(atPeak[:1])+atPeak[1:], units.Pct(pk.EfficiencyPct))
		}
	}
	if st.InactiveBytes > inactiveLimit {
		add(Info, "At the snapshot: %s sits in %d inactive (cached free) blocks; %s of it is in segments that still hold live tensors, so empty_cache() cannot return it",
			units.Bytes(st.InactiveBytes), st.InactiveBlocks, units.Bytes(st.Fragmentation.FreeInUsedSegments))
	}
	fr := st.Fragmentation
	switch {
	case pk.FromTrace:
		if pk.Free > 0 && pk.ExternalPct >= fragMinExternalPct && 100*float64(pk.Free)/float64(max(pk.Reserved, 1)) > cacheOverheadPct {
			add(Warning, "%s: fragmentation: %s of reserved memory is free but the largest free range is %s (%s external fragmentation), so a large request can fail with plenty free; try expandable_segments:True, or max_split_size_mb to keep large blocks whole",
				atPeak, units.Bytes(pk.Free), units.Bytes(pk.LargestFree), units.Pct(pk.ExternalPct))
		}
	case st.InactiveBlocks >= fragMinFreeBlocks && fr.ExternalPct >= fragMinExternalPct && fr.SegmentsWithFree > 1:
		add(Warning, "At the snapshot: fragmentation: %d free blocks spread over %d segments; the largest is %s of %s free (%s external fragmentation), so a large request can fail with plenty free; try expandable_segments:True, or max_split_size_mb to keep large blocks whole",
			st.InactiveBlocks, fr.SegmentsWithFree, units.Bytes(st.LargestFreeBlock), units.Bytes(st.InactiveBytes), units.Pct(fr.ExternalPct))
	}
	if st.AllocatedBytes > 0 {
		pct := 100 * float64(st.RoundingWaste) / float64(st.AllocatedBytes)
		if pct > roundingWastePct {
			add(Info, "At the snapshot: rounding waste: %s (%s of allocated) is lost to block rounding; odd tensor sizes are rounded up, roundup_power2_divisions or padding shapes to multiples of 512 bytes reduces it",
				units.Bytes(st.RoundingWaste), units.Pct(pct))
		}
	}
	if st.PendingFreeBytes > 0 {
		add(Info, "At the snapshot: %s is freed but waiting for other streams to finish using it (record_stream / cross-stream frees)",
			units.Bytes(st.PendingFreeBytes))
	}
	for i, l := range st.Leaks {
		if i == 3 {
			add(Warning, "%d more call sites grow from step to step (report --json lists them under leak_suspects)", len(st.Leaks)-3)
			break
		}
		add(Warning, "leak suspect: memory live from %s grew in %d of %d steps (sampled at each %s start), from %s to %s (+%s a step) and never fell; look for tensors kept across iterations (a list of losses or outputs, a cache, a hook)",
			l.Site, l.Grew, l.Steps, st.Steps.Name, units.Bytes(l.First), units.Bytes(l.Last), units.Bytes(l.Growth()/int64(max(l.Steps, 1))))
	}
	if pf := st.Pending; pf.Long > 0 {
		sev := Info
		atPeak := ""
		if pf.AtPeak > 0 && pk.FromTrace {
			sev = Warning
			atPeak = fmt.Sprintf("; at the peak %s was freed but still waiting, counted as active", units.Bytes(pf.AtPeak))
		}
		add(sev, "long pending frees: %d frees (%s) waited %s or more on another stream between free_requested and free_completed (median %s, longest %s: %s at %s)%s; record_stream keeps a block until every stream that used it is done, so free it on the stream that used it last, or synchronize sooner",
			pf.Long, units.Bytes(pf.LongBytes), pf.waitStr(pf.longThreshold()), pf.waitStr(pf.MedianWait), pf.waitStr(pf.MaxWait),
			units.Bytes(pf.MaxSize), pf.MaxSite, atPeak)
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
	if len(s.Settings.Raw) > 0 && !s.Settings.ExpandableSegments && pk.Reserved > 0 &&
		peakCachedPct > cacheOverheadPct {
		add(Info, "expandable_segments is off (PYTORCH_CUDA_ALLOC_CONF=%q)", s.Settings.AllocConf)
	}
	return out
}
