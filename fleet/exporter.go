package fleet

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"memscope/nvml"
)

// Exporter serves a GPU source under dcgm-exporter's metric names and
// labels, so a node without DCGM (or a test) looks like one with it.
// Scrapes within MaxAge of a sampling round share it, page and all (see
// Handler): fifty concurrent scrapes cost one NVML round, not fifty queued
// on the driver.
type Exporter struct {
	src  nvml.Source
	host string
	// SampleTimeout bounds one sampling round.
	SampleTimeout time.Duration
	// MaxAge is how old a round may be and still answer a scrape (0: every
	// scrape samples).
	MaxAge time.Duration
	descs  []exportedMetric
	rounds atomic.Int64 // sampling rounds run (tests)
}

type exportedMetric struct {
	desc  *prometheus.Desc
	value func(s *nvml.Sample) float64 // NaN: not exported for this GPU
}

var exportLabels = []string{LabelGPU, LabelUUID, LabelDevice, LabelModel, LabelPCIBusID, LabelHost}

func mib(b int64) float64 {
	if b < 0 {
		return math.NaN()
	}
	return math.Floor(float64(b) / MiB) // DCGM reports whole MiB
}

// NewExporter exports src's GPUs under the Hostname label host.
func NewExporter(src nvml.Source, host string) *Exporter {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, exportLabels, nil)
	}
	return &Exporter{src: src, host: host, SampleTimeout: 5 * time.Second, MaxAge: DefaultExportMaxAge, descs: []exportedMetric{
		{d(MetricUsed, "Framebuffer memory used (in MiB)."), func(s *nvml.Sample) float64 { return mib(s.Used) }},
		{d(MetricFree, "Framebuffer memory free (in MiB)."), func(s *nvml.Sample) float64 {
			if s.Total <= 0 || s.Used < 0 {
				return math.NaN()
			}
			// In whole MiB, so USED + FREE + RESERVED = TOTAL as DCGM has it.
			return max(0, mib(s.Total)-mib(s.Used)-mib(max(0, s.Reserved)))
		}},
		{d(MetricTotal, "Total framebuffer memory (in MiB)."), func(s *nvml.Sample) float64 { return mib(s.Total) }},
		{d(MetricReserved, "Framebuffer memory reserved by the driver (in MiB)."), func(s *nvml.Sample) float64 {
			if s.MemV1 {
				return math.NaN()
			}
			return mib(s.Reserved)
		}},
		{d(MetricUtil, "GPU utilization (in %)."), func(s *nvml.Sample) float64 { return s.UtilGPU }},
		{d(MetricPower, "Power draw (in W)."), func(s *nvml.Sample) float64 { return s.PowerW }},
	}}
}

// Describe implements prometheus.Collector.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range e.descs {
		ch <- m.desc
	}
}

// DefaultExportMaxAge is how long a sampling round answers scrapes.
const DefaultExportMaxAge = time.Second

// Collect implements prometheus.Collector: one sampling round.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), e.SampleTimeout)
	defer cancel()
	e.rounds.Add(1)
	samples, err := e.src.Sample(ctx)
	if err != nil {
		for _, m := range e.descs {
			ch <- prometheus.NewInvalidMetric(m.desc, fmt.Errorf("sampling %s: %w", e.src.Name(), err))
		}
		return
	}
	devs := map[int]nvml.Device{}
	for _, d := range e.src.Devices() {
		devs[d.Index] = d
	}
	for i := range samples {
		s := &samples[i]
		if s.Err != nil {
			continue // a GPU that could not be read has no figures, not zeros
		}
		dev := devs[s.Device]
		labels := []string{fmt.Sprint(s.Device), dev.UUID, fmt.Sprintf("nvidia%d", s.Device), dev.Name, "", e.host}
		for _, m := range e.descs {
			v := m.value(s)
			if math.IsNaN(v) {
				continue
			}
			ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, v, labels...)
		}
	}
}

// Handler returns the /metrics handler: a registry holding only the
// exporter, so the page carries the DCGM names and nothing else. A page is
// gathered at most once per MaxAge and encoded once per format; scrapes
// that arrive while it is gathered wait for it (200 scrapes of 1,024 GPUs
// at once took 5.8 s at p99 when each gathered and encoded its own).
func (e *Exporter) Handler() (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(e); err != nil {
		return nil, err
	}
	if e.MaxAge <= 0 {
		return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}), nil
	}
	return &cachedPage{g: reg, maxAge: e.MaxAge}, nil
}

// cachedPage serves a gathered page for maxAge.
type cachedPage struct {
	g      prometheus.Gatherer
	maxAge time.Duration
	mu     sync.Mutex
	at     time.Time
	mfs    []*dto.MetricFamily
	errs   string
	bodies map[expfmt.Format][]byte
}

func (c *cachedPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
	c.mu.Lock()
	if c.at.IsZero() || time.Since(c.at) >= c.maxAge {
		mfs, err := c.g.Gather()
		c.mfs, c.errs, c.at, c.bodies = mfs, "", time.Now(), map[expfmt.Format][]byte{}
		if err != nil {
			// As promhttp's ContinueOnError: what could be read is served.
			c.errs = err.Error()
		}
	}
	body, ok := c.bodies[format]
	if !ok {
		var b bytes.Buffer
		enc := expfmt.NewEncoder(&b, format)
		for _, mf := range c.mfs {
			if err := enc.Encode(mf); err != nil {
				break
			}
		}
		if cl, ok := enc.(expfmt.Closer); ok {
			cl.Close()
		}
		body = b.Bytes()
		c.bodies[format] = body
	}
	empty, errs := len(c.mfs) == 0, c.errs
	c.mu.Unlock()
	if empty && errs != "" {
		http.Error(w, "gathering metrics: "+errs, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(format))
	w.Write(body)
}
