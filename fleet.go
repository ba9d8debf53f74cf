package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"

	"memscope/fleet"
	"memscope/internal/textsafe"
	"memscope/internal/units"
)

// Environment variables for Prometheus credentials, so they stay out of
// shell history and process listings.
const (
	envPromToken    = "MEMSCOPE_PROMETHEUS_TOKEN"
	envPromPassword = "MEMSCOPE_PROMETHEUS_PASSWORD"
)

// promFlags are the flags shared by `fleet` and the explorer.
type promFlags struct {
	url, selector, tokenFile, user, passwordFile, ca *string
	rng, scrape, timeout                             *time.Duration
	maxResponse                                      *byteSize
}

func addPromFlags(fs *flag.FlagSet) promFlags {
	return promFlags{
		url:          fs.String("prometheus", "", "URL of the cluster's Prometheus (fed by dcgm-exporter)"),
		selector:     fs.String("selector", "", `label selector for every query, e.g. {Hostname=~"node-0.*"}`),
		tokenFile:    fs.String("prometheus-token-file", "", "file holding a bearer token (or set "+envPromToken+")"),
		user:         fs.String("prometheus-user", "", "basic auth user (password in "+envPromPassword+" or --prometheus-password-file)"),
		passwordFile: fs.String("prometheus-password-file", "", "file holding the basic auth password"),
		ca:           fs.String("prometheus-ca", "", "PEM file of extra certificate authorities for https"),
		rng:          promDurationVar(fs, "range", time.Hour, "history window: maximum used and sparklines (Prometheus durations: 30m, 7d, 2w)"),
		scrape:       promDurationVar(fs, "scrape", fleet.DefaultScrape, "dcgm-exporter's scrape interval (finest history step, refresh period; a GPU silent for two is stale)"),
		maxResponse:  byteSizeVar(fs, "max-response", fleet.DefaultMaxResponse, "most bytes read of one Prometheus response"),
		timeout:      fs.Duration("timeout", 30*time.Second, "limit for each Prometheus query"),
	}
}

func readSecret(path, env string) (string, error) {
	if path == "" {
		return os.Getenv(env), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func (p promFlags) client() (*fleet.Client, error) {
	token, err := readSecret(*p.tokenFile, envPromToken)
	if err != nil {
		return nil, fmt.Errorf("--prometheus-token-file: %w", err)
	}
	var pass string
	if *p.user != "" {
		if pass, err = readSecret(*p.passwordFile, envPromPassword); err != nil {
			return nil, fmt.Errorf("--prometheus-password-file: %w", err)
		}
	}
	return fleet.New(fleet.Options{URL: *p.url, Selector: *p.selector, Range: *p.rng, Scrape: *p.scrape,
		Timeout: *p.timeout, BearerToken: token, BasicUser: *p.user, BasicPassword: pass, CAFile: *p.ca,
		MaxResponse: int64(*p.maxResponse)})
}

// cmdFleet implements `memscope fleet`.
func cmdFleet(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("fleet", "memscope fleet --prometheus URL [--selector S] [--range 1h] [--json]", stderr)
	pf := addPromFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	atFlag := fs.String("at", "", "read the fleet as it was at this time (RFC 3339, Unix seconds, or a duration ago: 2d; default now)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	if *pf.url == "" || len(pos) > 0 {
		fmt.Fprintln(stderr, "memscope fleet: --prometheus URL is required, and takes no paths")
		fs.Usage()
		return false, errUsage
	}
	at, err := parseAt(*atFlag)
	if err != nil {
		fmt.Fprintf(stderr, "memscope fleet: --at: %v\n", err)
		return false, errUsage
	}
	c, err := pf.client()
	if err != nil {
		return false, err
	}
	f, err := c.Fetch(ctx, at)
	if err != nil {
		return false, err
	}
	for _, w := range f.Warnings {
		for _, line := range strings.Split(w, "\n") {
			fmt.Fprintf(stderr, "memscope fleet: %s\n", textsafe.Safe(line))
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return false, enc.Encode(fleetJSON(f))
	}
	writeFleetText(stdout, *pf.url, f)
	return false, nil
}

// parseAt reads RFC 3339, Unix seconds, or a Prometheus duration (that
// long ago: 2d, 90m); "" is the zero time (now).
func parseAt(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := model.ParseDuration(s); err == nil && d > 0 {
		return time.Now().Add(-time.Duration(d)), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2026-01-02T15:04:05Z), Unix seconds, nor a duration ago (2d)", s)
}

// promDurationFlag is a duration flag that takes Prometheus's forms (7d,
// 2w, 1h30m) as well as Go's (1.5h, 90s).
type promDurationFlag struct{ d *time.Duration }

func (p promDurationFlag) String() string {
	if p.d == nil {
		return ""
	}
	return promDuration(*p.d)
}

func (p promDurationFlag) Set(s string) error {
	if d, err := model.ParseDuration(s); err == nil {
		*p.d = time.Duration(d)
	} else if d, err := time.ParseDuration(s); err == nil {
		*p.d = d
	} else {
		return fmt.Errorf("%q is not a duration (say 30m, 7d, 2w)", s)
	}
	if *p.d <= 0 {
		return fmt.Errorf("%q: want a duration above 0", s)
	}
	return nil
}

func promDurationVar(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var(promDurationFlag{&d}, name, usage)
	return &d
}

type fleetGPUJSON struct {
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

type fleetOut struct {
	Hosts int            `json:"hosts"`
	GPUs  []fleetGPUJSON `json:"gpus"`
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

func fleetJSON(f *fleet.Fleet) fleetOut {
	out := fleetOut{Hosts: len(f.Hosts()), GPUs: make([]fleetGPUJSON, 0, len(f.GPUs))}
	for _, g := range f.GPUs {
		var seen *string
		if !g.LastSeen.IsZero() {
			t := g.LastSeen.UTC().Format(time.RFC3339)
			seen = &t
		}
		out.GPUs = append(out.GPUs, fleetGPUJSON{Host: g.Host, GPU: gpuLabel(g.Index), UUID: g.UUID, Model: g.Model, Pod: g.Pod,
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

func writeFleetText(w io.Writer, url string, f *fleet.Fleet) {
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
		s := fleet.SummarizeHost(gs)
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
func seenText(g *fleet.GPU, at time.Time) string {
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
