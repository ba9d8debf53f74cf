package fleet

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/common/model"
)

// Fleet is every GPU the selector matches, as Prometheus knew them at At.
type Fleet struct {
	At    time.Time
	Range time.Duration
	Step  time.Duration
	// GPUs sorted by host, then GPU number.
	GPUs []GPU
	// Warnings from Prometheus and about the data.
	Warnings []string
	// HasHistory is set once History has filled the series.
	HasHistory bool
}

// Clone copies the fleet so History can fill the copy while the original
// is still read elsewhere.
func (f *Fleet) Clone() *Fleet {
	c := *f
	c.GPUs = slices.Clone(f.GPUs)
	c.Warnings = slices.Clone(f.Warnings)
	return &c
}

// Hosts returns the distinct host names, sorted.
func (f *Fleet) Hosts() []string {
	var out []string
	for i, g := range f.GPUs {
		if i == 0 || g.Host != f.GPUs[i-1].Host {
			out = append(out, g.Host)
		}
	}
	return out
}

// GPU is one GPU's latest figures. Bytes are -1 and rates NaN when the
// latest sample is missing or blank.
type GPU struct {
	Host, Index, UUID, Model, Device, PCIBusID string
	Pod, Namespace, Container                  string
	Used, Free, Reserved                       int64
	// Total is FB_TOTAL when exported, else USED + FREE (+ RESERVED).
	Total int64
	// MaxUsed is the maximum of FB_USED over the range.
	MaxUsed int64
	// Util is GPU utilisation in percent, Power in watts.
	Util, Power float64
	// History is FB_USED over the range (blanks left out).
	History []Point

	// LastSeen is the time of the newest FB_USED sample: exact for a fresh
	// GPU, the last history point (within a step) for a stale one, zero
	// when unknown.
	LastSeen time.Time
	// Stale is set when that sample is older than two scrape intervals
	// (its exporter stopped answering): the figures are the last ones
	// seen in the range, not current.
	Stale bool

	maxBlank bool // the range held a blank: MaxUsed needs the history
	total    int64
}

// Point is one history sample.
type Point struct {
	T     time.Time
	Bytes int64
}

// Key identifies a GPU across queries.
func (g *GPU) Key() string { return g.Host + "\x00" + g.Index + "\x00" + g.UUID }

// UsedFraction is used over total, NaN when either is unknown.
func (g *GPU) UsedFraction() float64 {
	if g.Used < 0 || g.Total <= 0 {
		return math.NaN()
	}
	return float64(g.Used) / float64(g.Total)
}

func hostOf(m model.Metric) string {
	if h := m[LabelHost]; h != "" {
		return string(h)
	}
	return string(m["instance"])
}

func gpuFrom(m model.Metric) GPU {
	return GPU{
		Host: hostOf(m), Index: string(m[LabelGPU]), UUID: string(m[LabelUUID]),
		Model: string(m[LabelModel]), Device: string(m[LabelDevice]), PCIBusID: string(m[LabelPCIBusID]),
		Pod: string(m[LabelPod]), Namespace: string(m[LabelNamespace]), Container: string(m[LabelContainer]),
		Used: -1, Free: -1, Reserved: -1, Total: -1, MaxUsed: -1, total: -1,
		Util: math.NaN(), Power: math.NaN(), Stale: true,
	}
}

func keyOf(m model.Metric) string {
	return hostOf(m) + "\x00" + string(m[LabelGPU]) + "\x00" + string(m[LabelUUID])
}

func totalOf(g *GPU) int64 {
	if g.total > 0 {
		return g.total
	}
	if g.Used < 0 || g.Free < 0 {
		return -1
	}
	t := g.Used + g.Free
	if g.Reserved > 0 {
		t += g.Reserved
	}
	return t
}

func sortGPUs(gs []GPU) {
	sort.SliceStable(gs, func(i, j int) bool {
		if gs[i].Host != gs[j].Host {
			return gs[i].Host < gs[j].Host
		}
		if gs[i].Index != gs[j].Index {
			return gpuLess(gs[i].Index, gs[j].Index)
		}
		return gs[i].UUID < gs[j].UUID
	})
}
