package fleet

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"memscope/nvml"
)

func TestBlank(t *testing.T) {
	for _, c := range []struct {
		v     float64
		blank bool
	}{
		{0, false}, {81559, false}, {blankFrom - 1, false}, // just below DCGM_INT32_BLANK
		{blankFrom, true}, {140737488355328, true}, // DCGM_FP64_BLANK
		{9223372036854775794, true}, {-1, true}, {math.NaN(), true}, {math.Inf(1), true},
	} {
		if got := Blank(c.v); got != c.blank {
			t.Errorf("Blank(%v) = %v, want %v", c.v, got, c.blank)
		}
	}
	if mibBytes(81559) != 81559<<20 || mibBytes(9223372036854775794) != -1 {
		t.Error("mibBytes")
	}
}

func TestStep(t *testing.T) {
	for _, c := range []struct {
		rng, scrape, want time.Duration
	}{
		{time.Hour, 15 * time.Second, 15 * time.Second},
		// 10999 steps of 15 s make exactly 11,000 points: still 15 s.
		{10999 * 15 * time.Second, 15 * time.Second, 15 * time.Second},
		// One second more needs a coarser (whole-second) step.
		{10999*15*time.Second + time.Second, 15 * time.Second, 16 * time.Second},
		{30 * 24 * time.Hour, 15 * time.Second, 236 * time.Second},
		{time.Minute, 100 * time.Millisecond, time.Second},
	} {
		got := Step(c.rng, c.scrape)
		if got != c.want {
			t.Errorf("Step(%s, %s) = %s, want %s", c.rng, c.scrape, got, c.want)
		}
		if pts := int(c.rng/got) + 1; pts > MaxPoints {
			t.Errorf("Step(%s) = %s gives %d points", c.rng, got, pts)
		}
	}
}

func TestSelector(t *testing.T) {
	for in, want := range map[string]string{
		"": "", `{Hostname=~"node-0.*"}`: `Hostname=~"node-0.*"`, ` Hostname="a" `: `Hostname="a"`, "{}": "",
	} {
		got, err := normalizeSelector(in)
		if err != nil || got != want {
			t.Errorf("normalizeSelector(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`{Hostname="a"`, `a{b}`} {
		if _, err := normalizeSelector(bad); err == nil {
			t.Errorf("normalizeSelector(%q) accepted", bad)
		}
	}
}

// fakeProm answers /api/v1/query and /api/v1/query_range from tables, and
// records what it was asked.
type fakeProm struct {
	mu      sync.Mutex
	queries []string
	auth    []string
	instant func(q string) (int, string)
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	q := r.Form.Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.Path+" "+q)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, "query_range") {
		q += " (range)"
	}
	code, body := f.instant(q)
	if code != 200 {
		w.WriteHeader(code)
		fmt.Fprint(w, body)
		return
	}
	kind := "vector"
	if strings.HasSuffix(r.URL.Path, "query_range") {
		kind = "matrix"
	}
	fmt.Fprintf(w, `{"status":"success","data":{"resultType":%q,"result":%s}}`, kind, body)
}

func vec(rows ...string) string { return "[" + strings.Join(rows, ",") + "]" }

func sample(host, gpu, v string) string {
	return fmt.Sprintf(`{"metric":{"Hostname":%q,"gpu":%q,"UUID":"GPU-%s-%s","modelName":"H100"},"value":[1700000000,%q]}`, host, gpu, host, gpu, v)
}

func series(host, gpu string, vs ...string) string {
	var pts []string
	for i, v := range vs {
		pts = append(pts, fmt.Sprintf("[%d,%q]", 1700000000+15*i, v))
	}
	return fmt.Sprintf(`{"metric":{"Hostname":%q,"gpu":%q,"UUID":"GPU-%s-%s"},"values":[%s]}`, host, gpu, host, gpu, strings.Join(pts, ","))
}

func TestLatestRules(t *testing.T) {
	fp := &fakeProm{instant: func(q string) (int, string) {
		switch {
		case strings.HasPrefix(q, "last_over_time(DCGM_FI_DEV_FB_USED"):
			return 200, vec(sample("b", "10", "100"), sample("b", "9", "9223372036854775794"), sample("a", "0", "300"),
				sample("e", "1", "1"), sample("e", "2", "1"))
		case strings.HasPrefix(q, "last_over_time(DCGM_FI_DEV_FB_FREE"):
			return 200, vec(sample("b", "10", "900"), sample("b", "9", "1000"), sample("a", "0", "700"))
		case strings.HasPrefix(q, "last_over_time(DCGM_FI_DEV_FB_RESERVED"):
			return 200, vec(sample("a", "0", "24"))
		case strings.HasPrefix(q, "last_over_time(DCGM_FI_DEV_FB_TOTAL"):
			return 200, vec(sample("b", "10", "2048"))
		case strings.HasPrefix(q, "last_over_time(DCGM_FI_DEV_GPU_UTIL"):
			// A GPU known only by its utilisation is not a memory reading.
			return 200, vec(sample("c", "0", "50"), sample("a", "0", "97"))
		case strings.HasPrefix(q, "max_over_time"):
			return 200, vec(sample("b", "10", "150"), sample("b", "9", "9223372036854775794"), sample("a", "0", "310"))
		case strings.HasPrefix(q, "timestamp(DCGM_FI_DEV_FB_USED"):
			// Sample times: a/0 10 s before the query (fresh at the
			// default 15 s scrape), b/9 now; b/10 has none (stale).
			// e/1 is exactly two scrapes (30 s) old: fresh; e/2 one
			// second more: stale.
			return 200, vec(sample("b", "9", "1700000000"), sample("a", "0", "1699999990"),
				sample("e", "1", "1699999970"), sample("e", "2", "1699999969"))
		case strings.HasPrefix(q, "DCGM_FI_DEV_FB_USED"):
			if strings.HasSuffix(q, "(range)") {
				return 200, vec(series("b", "9", "400", "9223372036854775794", "500", "9223372036854775794"), series("b", "10", "150", "100"),
					series("d", "1", "5"))
			}
			return 200, vec(sample("b", "9", "1"), sample("a", "0", "300"))
		}
		return 200, "[]"
	}}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	c, err := New(Options{URL: srv.URL, Selector: `{job="dcgm"}`})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Latest(context.Background(), time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(f.Hosts()); got != "[a b e]" || len(f.GPUs) != 5 {
		t.Fatalf("hosts %s, %d GPUs", got, len(f.GPUs))
	}
	if e1, e2 := f.GPUs[3], f.GPUs[4]; e1.Stale || !e2.Stale || e1.LastSeen.Unix() != 1699999970 {
		t.Errorf("two scrapes old: stale %v (want false); one second more: stale %v (want true); last seen %v",
			e1.Stale, e2.Stale, e1.LastSeen)
	}
	a, b9, b10 := f.GPUs[0], f.GPUs[1], f.GPUs[2] // gpu 9 before 10: numeric order
	if b9.Index != "9" || b10.Index != "10" {
		t.Fatalf("order %s %s", b9.Index, b10.Index)
	}
	check := func(name string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	check("a total (USED+FREE+RESERVED)", a.Total, (300+700+24)<<20)
	check("b10 total (FB_TOTAL)", b10.Total, 2048<<20)
	check("b9 used (blank)", b9.Used, -1)
	check("b9 total (USED blank)", b9.Total, -1)
	check("b9 max (blank in window: from the history)", b9.MaxUsed, -1)
	check("a max", a.MaxUsed, 310<<20)
	if a.Util != 97 || !math.IsNaN(b9.Util) || a.Stale || !b10.Stale {
		t.Errorf("util %v %v, stale a=%v b10=%v", a.Util, b9.Util, a.Stale, b10.Stale)
	}
	if err := c.History(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	b9 = f.GPUs[1]
	check("b9 max after history", b9.MaxUsed, 500<<20)
	if len(b9.History) != 2 {
		t.Errorf("b9 history keeps %d points, want the 2 that are not blank", len(b9.History))
	}
	check("a max untouched by history", f.GPUs[0].MaxUsed, 310<<20)
	if len(f.GPUs) != 6 || f.GPUs[3].Host != "d" || f.GPUs[3].Used != -1 || f.GPUs[3].MaxUsed != 5<<20 ||
		f.GPUs[3].LastSeen.Unix() != 1700000000 {
		t.Errorf("a GPU seen only in the history (last seen at its last point): %+v", f.GPUs[3])
	}
	for _, q := range fp.queries {
		if strings.Contains(q, "DCGM") && !strings.Contains(q, `{job="dcgm"}`) {
			t.Errorf("query without the selector: %s", q)
		}
	}
	if n := len(fp.queries); n > 10 {
		t.Errorf("%d queries for one refresh; want a handful", n)
	}
}

func TestErrorsArePlain(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()
	cases := []struct {
		name string
		code int
		body string
		url  string
		want []string
	}{
		{"unreachable", 0, "", closed, []string{"cannot reach Prometheus at " + closed}},
		{"bad query", 400, `{"status":"error","errorType":"bad_data","error":"1:20: parse error: unexpected \"(\""}`, "",
			[]string{"refused", `parse error: unexpected "("`}},
		{"unauthorised", 401, "Unauthorized\n", "", []string{"refused", "401", "Unauthorized", "--prometheus-token-file"}},
		{"not Prometheus", 404, "404 page not found\n", "", []string{"404", "not an exporter"}},
		{"server error", 503, `{"status":"error","errorType":"unavailable","error":"TSDB not ready"}`, "", []string{"TSDB not ready"}},
		{"no series", 200, "[]", "", []string{"no series DCGM_FI_DEV_FB_USED", "selector"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := c.url
			if u == "" {
				srv := httptest.NewServer(&fakeProm{instant: func(string) (int, string) { return c.code, c.body }})
				defer srv.Close()
				u = srv.URL
			}
			cl, err := New(Options{URL: u, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Fetch(context.Background(), time.Time{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// A server that never answers: the timeout, named.
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer hang.Close()
	defer close(stop)
	cl, _ := New(Options{URL: hang.URL, Timeout: 200 * time.Millisecond})
	if _, err := cl.Latest(context.Background(), time.Time{}); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("hanging server: %v", err)
	}
	for _, bad := range []string{"", "prometheus:9090", "ftp://x"} {
		if _, err := New(Options{URL: bad}); err == nil {
			t.Errorf("URL %q accepted", bad)
		}
	}
}

func TestAuth(t *testing.T) {
	fp := &fakeProm{instant: func(string) (int, string) { return 200, vec(sample("a", "0", "1")) }}
	srv := httptest.NewUnstartedServer(fp)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	defer srv.Close()
	// Without the server's CA the TLS handshake fails, plainly.
	c, _ := New(Options{URL: srv.URL, BearerToken: "s3cret"})
	if _, err := c.Latest(context.Background(), time.Time{}); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("unknown CA: %v", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pemOf(srv), 0o600)
	c, err := New(Options{URL: srv.URL, BearerToken: "s3cret", CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Latest(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	c, _ = New(Options{URL: srv.URL, BasicUser: "u", BasicPassword: "p", CAFile: ca})
	if _, err := c.Latest(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range fp.auth {
		seen[a] = true
	}
	if !seen["Bearer s3cret"] || !seen["Basic dTpw"] {
		t.Errorf("authorization headers seen: %v", seen)
	}
	if _, err := New(Options{URL: srv.URL, CAFile: filepath.Join(t.TempDir(), "none.pem")}); err == nil {
		t.Error("missing CA file accepted")
	}
}

func TestExporter(t *testing.T) {
	fake := nvml.NewFake(4, nil)
	fake.Host = "n1"
	h, err := NewExporter(fake, "n1").Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	val := map[string]map[string]float64{}
	for name, fam := range fams {
		for _, m := range fam.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels[LabelHost] != "n1" || labels[LabelUUID] != "GPU-fake-n1-000"+labels[LabelGPU] || labels[LabelDevice] != "nvidia"+labels[LabelGPU] {
				t.Errorf("%s labels %v", name, labels)
			}
			if val[name] == nil {
				val[name] = map[string]float64{}
			}
			val[name][labels[LabelGPU]] = m.GetGauge().GetValue()
		}
	}
	for _, m := range []string{MetricUsed, MetricFree, MetricTotal, MetricReserved, MetricUtil, MetricPower} {
		if len(val[m]) != 4 {
			t.Errorf("%s: %d GPUs", m, len(val[m]))
		}
	}
	for g := range val[MetricUsed] {
		if sum := val[MetricUsed][g] + val[MetricFree][g] + val[MetricReserved][g]; sum != val[MetricTotal][g] || val[MetricTotal][g] != 81920 {
			t.Errorf("GPU %s: used+free+reserved = %v, total %v", g, sum, val[MetricTotal][g])
		}
	}
}

func pemOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// TestPartialResults: a failed utilisation query or history is a warning
// beside the figures already read; a failed used-memory query fails the
// fetch, its cause said once.
func TestPartialResults(t *testing.T) {
	broken := ""
	fp := &fakeProm{instant: func(q string) (int, string) {
		switch {
		case broken != "" && strings.Contains(q, broken):
			return 500, `{"status":"error","errorType":"internal","error":"disk on fire"}`
		case strings.HasPrefix(q, "last_over_time(DCGM_FI_DEV_FB_USED"), strings.HasPrefix(q, "last_over_time(DCGM_FI_DEV_FB_FREE"):
			return 200, vec(sample("a", "0", "300"))
		}
		return 200, "[]"
	}}
	srv := httptest.NewServer(fp)
	defer srv.Close()
	c, err := New(Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"GPU_UTIL", "(range)"} {
		broken = part
		f, err := c.Fetch(context.Background(), time.Time{})
		if err != nil || len(f.GPUs) != 1 || f.GPUs[0].Used != 300<<20 || len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0], "disk on fire") {
			t.Errorf("%s failing: %v, %+v", part, err, f)
		}
	}
	broken = "DCGM_FI_DEV_FB_USED"
	_, err = c.Fetch(context.Background(), time.Time{})
	if err == nil || strings.Count(err.Error(), "disk on fire") != 1 {
		t.Errorf("used memory failing: %v, want one error naming the cause once", err)
	}
}
