package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// MaxPoints is the most points per series Prometheus returns from a
// query_range; it refuses a query that would exceed it.
const MaxPoints = 11000

// DefaultScrape is dcgm-exporter's usual collection interval, the finest
// step worth asking for.
const DefaultScrape = 15 * time.Second

// Options says where the cluster's Prometheus is and how to reach it.
type Options struct {
	// URL of the Prometheus server ("http://prometheus:9090").
	URL string
	// Selector narrows every query: `{Hostname=~"node-0.*"}` (the braces
	// are optional).
	Selector string
	// Range is the history window (maximum used, sparklines). Default 1h.
	Range time.Duration
	// Scrape is the expected scrape interval: the finest history step.
	Scrape time.Duration
	// Timeout bounds each query. Default 30s.
	Timeout time.Duration
	// BearerToken is sent as "Authorization: Bearer ...".
	BearerToken string
	// BasicUser and BasicPassword enable HTTP basic auth.
	BasicUser, BasicPassword string
	// CAFile is a PEM bundle of extra certificate authorities.
	CAFile string
	// MaxResponse bounds the history query's response body (default
	// DefaultMaxResponse); each of the instant queries, which run eight
	// at once, gets a sixteenth of it (client_golang buffers a whole
	// response, up to twice its size). Past it the read stops with an
	// error.
	MaxResponse int64
}

// DefaultMaxResponse bounds the history's response: an hour of 10,000
// GPUs' history at 15 s takes about 100 MB, their latest figures about
// 5 MB a query.
const DefaultMaxResponse = 256 << 20

// Client reads dcgm-exporter metrics from one Prometheus.
type Client struct {
	api      v1.API
	opt      Options
	matchers string
}

// New checks the options and returns a client. It does not contact the
// server.
func New(opt Options) (*Client, error) {
	if opt.URL == "" {
		return nil, errors.New("no Prometheus URL given")
	}
	u, err := url.Parse(opt.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Prometheus URL %q: want http://host:port or https://host:port", opt.URL)
	}
	if opt.Range <= 0 {
		opt.Range = time.Hour
	}
	if opt.Scrape <= 0 {
		opt.Scrape = DefaultScrape
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	if opt.MaxResponse <= 0 {
		opt.MaxResponse = DefaultMaxResponse
	}
	matchers, err := normalizeSelector(opt.Selector)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = opt.Timeout
	if opt.CAFile != "" {
		pem, err := os.ReadFile(opt.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", opt.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = limitTransport{next: tr, max: opt.MaxResponse}
	if opt.BearerToken != "" || opt.BasicUser != "" {
		rt = authTransport{next: rt, token: opt.BearerToken, user: opt.BasicUser, pass: opt.BasicPassword}
	}
	c, err := api.NewClient(api.Config{Address: opt.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("Prometheus client: %w", err)
	}
	return &Client{api: v1.NewAPI(c), opt: opt, matchers: matchers}, nil
}

// Options returns the options in effect (defaults filled in).
func (c *Client) Options() Options { return c.opt }

// normalizeSelector strips the braces of a label selector and checks they
// balance; Prometheus checks the rest and its message is shown as is.
func normalizeSelector(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		if !strings.HasSuffix(s, "}") {
			return "", fmt.Errorf("selector %q: missing closing }", s)
		}
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	if strings.ContainsAny(s, "{}") {
		return "", fmt.Errorf("selector %q: want label matchers such as {Hostname=~\"node-0.*\"}", s)
	}
	return s, nil
}

// series is the selector of one metric over the fleet.
func (c *Client) series(metric string) string {
	if c.matchers == "" {
		return metric
	}
	return metric + "{" + c.matchers + "}"
}

// Step is the history step for a range: the scrape interval, coarsened
// to whole seconds until no series has more than MaxPoints points.
func Step(rng, scrape time.Duration) time.Duration {
	if scrape < time.Second {
		scrape = time.Second
	}
	step := scrape.Truncate(time.Second)
	// points = rng/step + 1 must stay within MaxPoints.
	minStep := (rng + time.Duration(MaxPoints-1) - 1) / time.Duration(MaxPoints-1)
	if minStep > step {
		step = ((minStep + time.Second - 1) / time.Second) * time.Second
	}
	return step
}

// instantQueries are the queries of Latest, each filling one figure.
type instantQuery struct {
	query string
	// makes: a series of this query adds a GPU; the others only fill in
	// GPUs found by a memory query (a lone utilisation series is not a
	// memory reading).
	makes bool
	set   func(g *GPU, v float64)
}

func (c *Client) instantQueries() []instantQuery {
	// last_over_time over the range, not a plain selector: a plain
	// selector only looks back five minutes, and a node whose exporter
	// went quiet (or a backfilled history) would vanish from the table.
	// The plain query below says which GPUs are fresh.
	last := func(m string) string {
		return fmt.Sprintf("last_over_time(%s[%s])", c.series(m), model.Duration(c.opt.Range))
	}
	return []instantQuery{
		{last(MetricUsed), true, func(g *GPU, v float64) { g.Used = mibBytes(v) }},
		{last(MetricFree), true, func(g *GPU, v float64) { g.Free = mibBytes(v) }},
		{fmt.Sprintf("max_over_time(%s[%s])", c.series(MetricUsed), model.Duration(c.opt.Range)), true, func(g *GPU, v float64) {
			if Blank(v) {
				g.maxBlank = true // a sentinel in the window outranks every figure
				return
			}
			g.MaxUsed = mibBytes(v)
		}},
		{last(MetricTotal), false, func(g *GPU, v float64) { g.total = mibBytes(v) }},
		{last(MetricReserved), false, func(g *GPU, v float64) { g.Reserved = mibBytes(v) }},
		{last(MetricUtil), false, func(g *GPU, v float64) { g.Util = rate(v) }},
		{last(MetricPower), false, func(g *GPU, v float64) { g.Power = rate(v) }},
		// A plain selector's timestamp is the sample's own (a function's
		// would be the evaluation time); a GPU whose exporter stopped has
		// a staleness marker and drops out of it, and History then says
		// when it was last seen.
		{fmt.Sprintf("timestamp(%s)", c.series(MetricUsed)), false,
			func(g *GPU, v float64) {
				if !math.IsNaN(v) && v > 0 {
					sec, frac := math.Modf(v)
					g.LastSeen = time.Unix(int64(sec), int64(frac*1e9))
				}
			}},
	}
}

func rate(v float64) float64 {
	if Blank(v) {
		return math.NaN()
	}
	return v
}

// Latest reads every GPU's latest figures at time at (zero: now), one
// instant query per metric for the whole fleet, run concurrently.
func (c *Client) Latest(ctx context.Context, at time.Time) (*Fleet, error) {
	if at.IsZero() {
		at = time.Now()
	}
	qs := c.instantQueries()
	results := make([]model.Vector, len(qs))
	warns := make([][]string, len(qs))
	errs := make([]error, len(qs))
	// A query that fails for good (too large, refused) stops the others:
	// they would fail alike, each buffering its share meanwhile.
	bctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if errs[i] != nil && q.makes && ctx.Err() == nil {
					stopAll()
				}
			}()
			qctx, cancel := context.WithTimeout(withLimit(bctx, c.instantLimit()), c.opt.Timeout)
			defer cancel()
			v, w, _, err := c.api.Query(qctx, q.query, at, v1.WithTimeout(c.opt.Timeout))
			if err != nil {
				errs[i] = c.explain(err, q.query)
				return
			}
			warns[i] = w
			vec, ok := v.(model.Vector)
			if !ok {
				errs[i] = fmt.Errorf("Prometheus at %s: %s: expected a vector, got %s", c.opt.URL, q.query, v.Type())
				return
			}
			results[i] = vec
		}()
	}
	wg.Wait()
	// The figures every GPU needs (used, free, maximum) must be read; the
	// others only add columns, so their failure is a warning.
	var needed []error
	f := &Fleet{At: at, Range: c.opt.Range, Step: Step(c.opt.Range, c.opt.Scrape)}
	var optional []error
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled) && ctx.Err() == nil:
			// Stopped because a sibling failed: that one says why.
		case qs[i].makes:
			needed = append(needed, err)
		default:
			optional = append(optional, err)
		}
	}
	if err := distinct(needed); err != nil {
		return nil, err
	}
	if err := distinct(optional); err != nil {
		f.Warnings = append(f.Warnings, "some figures are missing: "+err.Error())
	}
	byKey := map[string]int{}
	for i, vec := range results {
		for _, s := range vec {
			k := keyOf(s.Metric)
			j, ok := byKey[k]
			if !ok {
				if !qs[i].makes {
					continue
				}
				j = len(f.GPUs)
				byKey[k] = j
				f.GPUs = append(f.GPUs, gpuFrom(s.Metric))
			}
			qs[i].set(&f.GPUs[j], float64(s.Value))
		}
		for _, w := range warns[i] {
			f.Warnings = append(f.Warnings, "Prometheus: "+w)
		}
	}
	if len(f.GPUs) == 0 {
		return nil, fmt.Errorf("Prometheus at %s has no series %s or %s in the %s before %s: is dcgm-exporter scraped, and does the selector match?",
			c.opt.URL, c.series(MetricUsed), c.series(MetricFree), model.Duration(c.opt.Range), at.Format(time.RFC3339))
	}
	for i := range f.GPUs {
		g := &f.GPUs[i]
		g.Total = totalOf(g)
		if g.maxBlank {
			g.MaxUsed = -1 // known once the history is read
		}
		g.Stale = g.LastSeen.IsZero() || at.Sub(g.LastSeen) > 2*c.opt.Scrape
	}
	sortGPUs(f.GPUs)
	return f, nil
}

// instantLimit is the response limit of one instant query.
func (c *Client) instantLimit() int64 { return max(1<<20, c.opt.MaxResponse/16) }

// distinct joins errors, each distinct message once (the queries fail
// together when the server does), in the order they came.
func distinct(errs []error) error {
	var uniq []error
	seen := map[string]bool{}
	for _, err := range errs {
		if !seen[err.Error()] {
			seen[err.Error()] = true
			uniq = append(uniq, err)
		}
	}
	if len(uniq) == 1 {
		return uniq[0]
	}
	return errors.Join(uniq...)
}

// History fills each GPU's FB_USED series over the range with one
// query_range, and the maximum of GPUs whose window held a blank.
// GPUs seen only in the history (an exporter gone quiet) are added with
// unknown latest figures.
func (c *Client) History(ctx context.Context, f *Fleet) error {
	q := c.series(MetricUsed)
	qctx, cancel := context.WithTimeout(ctx, c.opt.Timeout)
	defer cancel()
	r := v1.Range{Start: f.At.Add(-f.Range), End: f.At, Step: f.Step}
	v, w, _, err := c.api.QueryRange(qctx, q, r, v1.WithTimeout(c.opt.Timeout))
	if err != nil {
		return c.explain(err, q)
	}
	for _, s := range w {
		f.Warnings = append(f.Warnings, "Prometheus: "+s)
	}
	mat, ok := v.(model.Matrix)
	if !ok {
		return fmt.Errorf("Prometheus at %s: %s: expected a matrix, got %s", c.opt.URL, q, v.Type())
	}
	byKey := make(map[string]int, len(f.GPUs))
	for i := range f.GPUs {
		byKey[f.GPUs[i].Key()] = i
	}
	added := false
	for _, s := range mat {
		k := keyOf(s.Metric)
		j, ok := byKey[k]
		if !ok {
			j = len(f.GPUs)
			byKey[k] = j
			f.GPUs = append(f.GPUs, gpuFrom(s.Metric))
			f.GPUs[j].maxBlank = true
			added = true
		}
		g := &f.GPUs[j]
		// A new slice: a clone being filled must not write into the
		// history another reader still holds.
		g.History = make([]Point, 0, len(s.Values))
		var peak int64 = -1
		for _, p := range s.Values {
			b := mibBytes(float64(p.Value))
			if b < 0 {
				continue
			}
			g.History = append(g.History, Point{T: p.Timestamp.Time(), Bytes: b})
			peak = max(peak, b)
		}
		if g.maxBlank {
			g.MaxUsed = max(peak, g.Used)
		}
		if n := len(s.Values); g.LastSeen.IsZero() && n > 0 {
			g.LastSeen = s.Values[n-1].Timestamp.Time()
		}
	}
	if added {
		sortGPUs(f.GPUs)
	}
	f.HasHistory = true
	return nil
}

// Fetch reads the latest figures and the history. A history that cannot
// be read is a warning: the latest figures already read still count.
func (c *Client) Fetch(ctx context.Context, at time.Time) (*Fleet, error) {
	f, err := c.Latest(ctx, at)
	if err != nil {
		return nil, err
	}
	if err := c.History(ctx, f); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		f.Warnings = append(f.Warnings, "no history: "+err.Error())
	}
	return f, nil
}

// explain turns a client error into a sentence a user can act on.
func (c *Client) explain(err error, query string) error {
	var apiErr *v1.Error
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("Prometheus at %s did not answer within %s (--timeout)", c.opt.URL, c.opt.Timeout)
	case errors.Is(err, ErrResponseTooLarge):
		return fmt.Errorf("Prometheus at %s answered a query with more than its share of --max-response (%d MiB for the history, a sixteenth for each latest figure); stopped reading",
			c.opt.URL, c.opt.MaxResponse>>20)
	case errors.As(err, &apiErr):
		msg := apiErr.Msg
		if d := firstLine(apiErr.Detail); d != "" && !strings.Contains(msg, d) {
			msg += ": " + d
		}
		// The query is left out: every query fails alike when the URL or
		// the credentials are wrong, and the cause is said once. A hint
		// is a line of its own.
		hint := ""
		switch {
		case strings.Contains(msg, "401"), strings.Contains(msg, "403"):
			hint = "\nhint: check --prometheus-token-file or --prometheus-user"
		case strings.Contains(msg, "404"):
			hint = "\nhint: the URL must be the Prometheus server itself (http://host:9090), not an exporter or /api/v1"
		}
		if apiErr.Type == v1.ErrBadData || apiErr.Type == v1.ErrExec {
			return fmt.Errorf("Prometheus at %s refused %s: %s%s", c.opt.URL, query, msg, hint)
		}
		return fmt.Errorf("Prometheus at %s refused the queries: %s%s", c.opt.URL, msg, hint)
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		return fmt.Errorf("cannot reach Prometheus at %s: %v", c.opt.URL, unwrapURL(err))
	}
	return fmt.Errorf("Prometheus at %s: %s: %w", c.opt.URL, query, err)
}

func unwrapURL(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
