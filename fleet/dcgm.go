// Package fleet is the GPU memory of a whole cluster, read from the
// Prometheus that NVIDIA's dcgm-exporter feeds: a client that turns a
// handful of fleet-wide queries into one row per GPU, and an exporter that
// serves the same metric names for nodes without DCGM (and for tests).
package fleet

import (
	"math"
	"strconv"
)

// The dcgm-exporter metrics memscope reads. Memory is in MiB.
const (
	MetricUsed     = "DCGM_FI_DEV_FB_USED"
	MetricFree     = "DCGM_FI_DEV_FB_FREE"
	MetricTotal    = "DCGM_FI_DEV_FB_TOTAL"    // only when configured
	MetricReserved = "DCGM_FI_DEV_FB_RESERVED" // only when configured
	MetricUtil     = "DCGM_FI_DEV_GPU_UTIL"    // percent
	MetricPower    = "DCGM_FI_DEV_POWER_USAGE" // watts
)

// The dcgm-exporter labels memscope reads.
const (
	LabelHost      = "Hostname"
	LabelGPU       = "gpu"
	LabelUUID      = "UUID"
	LabelDevice    = "device"
	LabelModel     = "modelName"
	LabelPCIBusID  = "pci_bus_id"
	LabelPod       = "pod"
	LabelNamespace = "namespace"
	LabelContainer = "container"
)

// blankFrom is DCGM_INT32_BLANK (0x7ffffff0). DCGM writes a blank (no
// value yet, not found, not supported, no permission) as a sentinel: int64
// fields near 2^63 (DCGM_INT64_BLANK = 9223372036854775792 and its
// neighbours), fp64 fields at 2^47 and int32 fields from 0x7ffffff0. No
// memory in MiB, percentage or power in watts comes near the smallest of
// them, so every value from it up is a blank.
const blankFrom = 0x7ffffff0

// Blank reports whether a DCGM sample is a sentinel or not a number:
// such samples are missing values, never figures.
func Blank(v float64) bool {
	return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v >= blankFrom
}

// MiB is the factor from dcgm-exporter's MiB to bytes.
const MiB = 1 << 20

// mibBytes converts a MiB sample to bytes, or -1 when it is blank.
func mibBytes(v float64) int64 {
	if Blank(v) {
		return -1
	}
	return int64(math.Round(v * MiB))
}

// gpuOrder sorts GPU labels numerically when both are numbers.
func gpuLess(a, b string) bool {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return x < y
	case errA == nil:
		return true
	case errB == nil:
		return false
	}
	return a < b
}

// HostSummary sums one host's GPUs.
type HostSummary struct {
	Used, Total int64
	// Imbalance is the largest used over the mean used (1 = even), 0
	// when fewer than two GPUs report.
	Imbalance float64
	// Unknown counts GPUs without a latest reading.
	Unknown int
}

// SummarizeHost sums the GPUs of one host.
func SummarizeHost(gs []GPU) HostSummary {
	var s HostSummary
	var n int
	var top int64
	for i := range gs {
		g := &gs[i]
		if g.Used < 0 {
			s.Unknown++
			continue
		}
		n++
		s.Used += g.Used
		top = max(top, g.Used)
		if g.Total > 0 {
			s.Total += g.Total
		}
	}
	if n > 1 && s.Used > 0 {
		s.Imbalance = float64(top) / (float64(s.Used) / float64(n))
	}
	return s
}
