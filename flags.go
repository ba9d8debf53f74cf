package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"memscope/fleet"
	"memscope/internal/units"
	"memscope/snapshot"
)

// byteSize is a flag holding a size in bytes, written as a number with an
// optional binary unit: 512MiB, 4GiB, 2G (G, M and K mean GiB, MiB, KiB
// here, as in PyTorch's allocator settings).
type byteSize int64

func (b *byteSize) String() string {
	if *b <= 0 {
		return "default"
	}
	return units.Bytes(int64(*b))
}

func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || f*float64(mult) > 1<<62 {
		return fmt.Errorf("%q is not a size (say 512MiB or 4GiB)", s)
	}
	*b = byteSize(f * float64(mult))
	return nil
}

// byteSizeVar adds a byteSize flag with a default.
func byteSizeVar(fs *flag.FlagSet, name string, def int64, usage string) *byteSize {
	b := byteSize(def)
	fs.Var(&b, name, usage)
	return &b
}

// maxInflateFlag adds --max-inflate, the ceiling on what a gzip input may
// expand to (snapshot.InflateMax).
func maxInflateFlag(fs *flag.FlagSet) *byteSize {
	b := new(byteSize)
	fs.Var(b, "max-inflate", fmt.Sprintf("most a .gz snapshot may expand to (default %s or the memory available, whichever is less)",
		units.Bytes(snapshot.DefaultInflateMax)))
	return b
}

// parseFlags parses flags that may appear before, between or after the
// positional arguments ("memscope report F --json" works), and returns the
// positionals.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

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

// promDuration prints a duration as Prometheus does ("1h", "5m", "90s").
func promDuration(d time.Duration) string { return model.Duration(d).String() }
