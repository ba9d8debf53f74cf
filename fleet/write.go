package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"

	"memscope/internal/textsafe"
	"memscope/internal/units"
)

type gpuJSON struct {
	Host         string `json:"host"`
	GPU          any    `json:"gpu"`
	UUID         string `json:"uuid"`
	Model        string `json:"model"`
	Pod          string `json:"pod"`
	UsedBytes    *int64 `json:"used_bytes"`
	FreeBytes    *int64 `json:"free_bytes"`
	TotalBytes   *int64 `json:"total_bytes"`
	MaxUsedBytes *int64 `json:"max_used_bytes"`
	// Stale marks a GPU whose newest sample is older than two scrape
	// intervals (its exporter stopped answering); LastSeen is that
	// sample's time (null when none in the range).
	Stale    bool    `json:"stale"`
	LastSeen *string `json:"last_seen"`
}

type fleetJSON struct {
	Hosts int       `json:"hosts"`
	GPUs  []gpuJSON `json:"gpus"`
}

func optBytes(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}

// gpuLabel is the GPU's index as a number when it is one (dcgm-exporter's
// gpu label is "0".."7"), else the label text.
func gpuLabel(s string) any {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		return n
	}
	return s
}

func toJSON(f *Fleet) fleetJSON {
	out := fleetJSON{Hosts: len(f.Hosts()), GPUs: make([]gpuJSON, 0, len(f.GPUs))}
	for _, g := range f.GPUs {
		var seen *string
		if !g.LastSeen.IsZero() {
			t := g.LastSeen.UTC().Format(time.RFC3339)
			seen = &t
		}
		out.GPUs = append(out.GPUs, gpuJSON{Host: g.Host, GPU: gpuLabel(g.Index), UUID: g.UUID, Model: g.Model, Pod: g.Pod,
			UsedBytes: optBytes(g.Used), FreeBytes: optBytes(g.Free), TotalBytes: optBytes(g.Total), MaxUsedBytes: optBytes(g.MaxUsed),
			Stale: g.Stale, LastSeen: seen})
	}
	return out
}

func bytesOrDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return units.Bytes(n)
}

// WriteJSON writes the fleet as memscope fleet --json does (docs/live.md):
// one entry per GPU, bytes as integers, blanks as null.
func WriteJSON(w io.Writer, f *Fleet) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(toJSON(f))
}

// WriteText writes the fleet as memscope fleet prints it: a table of GPUs
// per host, with each host's imbalance and which GPUs are stale.
func WriteText(w io.Writer, url string, f *Fleet) {
	hosts := f.Hosts()
	fmt.Fprintf(w, "Prometheus %s: %d hosts, %d GPUs, at %s; maximum over %s\n",
		textsafe.Safe(url), len(hosts), len(f.GPUs), f.At.Format(time.DateTime), promDuration(f.Range))
	i := 0
	for _, h := range hosts {
		j := i
		for j < len(f.GPUs) && f.GPUs[j].Host == h {
			j++
		}
		gs := f.GPUs[i:j]
		i = j
		s := SummarizeHost(gs)
		fmt.Fprintf(w, "\n%s: %d GPUs, %s used of %s", textsafe.Safe(h), len(gs), units.Bytes(s.Used), units.Bytes(s.Total))
		if s.Imbalance > 0 {
			fmt.Fprintf(w, ", imbalance %.2f (max/mean used)", s.Imbalance)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GPU\tUSED\tFREE\tTOTAL\tUSED%\tMAX USED\tMODEL\tPOD\tSEEN")
		for _, g := range gs {
			pct := "-"
			if fr := g.UsedFraction(); fr == fr {
				pct = fmt.Sprintf("%.0f%%", 100*fr)
			}
			pod := g.Pod
			if g.Namespace != "" && pod != "" {
				pod = g.Namespace + "/" + pod
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", textsafe.Safe(g.Index), bytesOrDash(g.Used), bytesOrDash(g.Free),
				bytesOrDash(g.Total), pct, bytesOrDash(g.MaxUsed), textsafe.Safe(g.Model), textsafe.Safe(pod), seenText(&g, f.At))
		}
		tw.Flush()
	}
}

// seenText says when a GPU was last seen: "now" for a fresh one, "STALE,
// 3m ago" for one whose exporter stopped answering.
func seenText(g *GPU, at time.Time) string {
	switch {
	case g.LastSeen.IsZero():
		return "STALE"
	case !g.Stale:
		return "now"
	}
	return "STALE, " + promDuration(at.Sub(g.LastSeen).Round(time.Second)) + " ago"
}

// promDuration prints a duration as Prometheus does ("1h", "5m", "90s").
func promDuration(d time.Duration) string { return model.Duration(d).String() }
