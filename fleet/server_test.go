package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"memscope/nvml"
)

// startServer serves an exporter of n fake GPUs on a loopback port.
func startServer(t *testing.T, n int, opt ServerOptions) (addr string, lim *connLimit, exp *Exporter) {
	t.Helper()
	exp = NewExporter(nvml.NewFake(n, nil), "node-0")
	h, err := exp.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv, wrap := NewServer(h, opt)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := wrap(ln)
	go srv.Serve(wl)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), wl.(*connLimit), exp
}

// scrape GETs /metrics on a fresh connection and returns how long it took
// (a failure is reported with Errorf: scrapes run on many goroutines).
func scrape(t *testing.T, addr string) time.Duration {
	t.Helper()
	timeout := 5 * time.Second
	if raceEnabled {
		timeout = time.Minute
	}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Errorf("scrape: %v", err)
		return time.Since(start)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !bytes.Contains(body, []byte(MetricUsed+"{")) {
		t.Errorf("scrape: %d %v, %d bytes", resp.StatusCode, err, len(body))
	}
	return time.Since(start)
}

// keepAlive makes one request on a new connection and leaves it open
// (idle, as a client's keep-alive pool does).
func keepAlive(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c
}

// TestServeIdleFlood: 5,000 idle keep-alive connections never starve a
// scrape (each answers in under a second), the server holds at most
// MaxConns, and idle connections are closed after IdleTimeout.
func TestServeIdleFlood(t *testing.T) {
	opt := DefaultServerOptions
	opt.MaxConns, opt.IdleTimeout = 256, 2*time.Second
	addr, lim, _ := startServer(t, 8, opt)
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for i := range 5000 {
		idle = append(idle, keepAlive(t, addr))
		if i%1000 == 999 {
			if d := scrape(t, addr); d > time.Second {
				t.Errorf("a scrape beside %d idle connections took %v", i+1, d)
			}
		}
	}
	if n := lim.open(); n > opt.MaxConns {
		t.Errorf("%d connections open, cap %d", n, opt.MaxConns)
	}
	if lim.evicted.Load() < 5000-int64(opt.MaxConns) {
		t.Errorf("evicted %d idle connections, want at least %d", lim.evicted.Load(), 5000-opt.MaxConns)
	}
	// The last ones are still open; after IdleTimeout the server closes
	// them (a read sees EOF).
	last := idle[len(idle)-1]
	last.SetReadDeadline(time.Now().Add(opt.IdleTimeout + 3*time.Second))
	start := time.Now()
	if _, err := last.Read(make([]byte, 1)); err == nil {
		t.Error("an idle connection got data instead of being closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("an idle connection was not closed after %v", opt.IdleTimeout)
	} else if waited := time.Since(start); waited > opt.IdleTimeout+2*time.Second {
		t.Errorf("closed after %v", waited)
	}
}

// fillSilently opens n connections that send nothing (closed when the
// test ends) and waits until the server holds them.
func fillSilently(t *testing.T, addr string, lim *connLimit, n int) {
	t.Helper()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	for deadline := time.Now().Add(5 * time.Second); lim.open() < n && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServeSilentConnections: connections that never send a request
// (slowloris) fill the cap; after staleNew a scrape evicts one and is
// answered.
func TestServeSilentConnections(t *testing.T) {
	opt := DefaultServerOptions
	opt.MaxConns = 10
	addr, lim, _ := startServer(t, 8, opt)
	fillSilently(t, addr, lim, opt.MaxConns)
	time.Sleep(staleNew + 100*time.Millisecond)
	if d := scrape(t, addr); d > time.Second {
		t.Errorf("a scrape beside %d silent connections took %v", opt.MaxConns, d)
	}
	if lim.evicted.Load() == 0 {
		t.Error("no silent connection was evicted")
	}
}

// TestServeConcurrentScrapesShareAReading: 200 concurrent scrapes of 1,024
// GPUs answer with p99 under a second and share a few sampling rounds
// instead of 200.
func TestServeConcurrentScrapesShareAReading(t *testing.T) {
	opt := DefaultServerOptions
	opt.MaxConns = 512
	addr, _, exp := startServer(t, 1024, opt)
	var mu sync.Mutex
	var times []time.Duration
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			d := scrape(t, addr)
			mu.Lock()
			times = append(times, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(times)
	bound := time.Second
	if raceEnabled {
		bound = time.Minute // the race detector, on a loaded machine: correctness only
	}
	if p99 := times[len(times)*99/100]; p99 > bound {
		t.Errorf("p99 %v over 200 scrapes of 1024 GPUs (bound %v)", p99, bound)
	}
	if r := exp.rounds.Load(); r > 10 {
		t.Errorf("%d sampling rounds for 200 concurrent scrapes (MaxAge %v)", r, exp.MaxAge)
	}
	// Past MaxAge a scrape reads the GPUs again.
	before := exp.rounds.Load()
	time.Sleep(exp.MaxAge + 50*time.Millisecond)
	scrape(t, addr)
	if exp.rounds.Load() != before+1 {
		t.Errorf("a scrape after MaxAge ran %d rounds, want 1", exp.rounds.Load()-before)
	}
}

// TestFleetStopsReadingAHugeResponse: a stand-in for Prometheus that
// streams without end is cut at the response limit, well within the
// timeout, with an error that says so.
func TestFleetStopsReadingAHugeResponse(t *testing.T) {
	item := []byte(`{"metric":{"__name__":"DCGM_FI_DEV_FB_USED","Hostname":"h","gpu":"0"},"value":[1,"1"]},`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[`)
		for sent := 0; sent < 1<<30; sent += len(item) { // 1 GiB
			if _, err := w.Write(item); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, err := New(Options{URL: srv.URL, MaxResponse: 16 << 20, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Fetch(context.Background(), time.Time{})
	if err == nil || !errors.Is(err, ErrResponseTooLarge) && !strings.Contains(err.Error(), "stopped reading") {
		t.Fatalf("got %v, want the response limit", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestLimitedBody: a body of exactly the limit is read whole; one byte
// more is an error.
func TestLimitedBody(t *testing.T) {
	for _, tc := range []struct {
		size    int
		wantErr bool
	}{{1000, false}, {1001, true}, {0, false}} {
		b := &limitedBody{rc: io.NopCloser(bytes.NewReader(make([]byte, tc.size))), left: 1000}
		got, err := io.ReadAll(b)
		if (err != nil) != tc.wantErr || (!tc.wantErr && len(got) != tc.size) {
			t.Errorf("%d bytes under a 1000-byte limit: %d read, %v", tc.size, len(got), err)
		}
	}
}

// TestServeRefusesWhenNothingIsIdle: at the cap, with every connection
// younger than staleNew and none idle, a newcomer is closed at once
// (refused fast) rather than queued.
func TestServeRefusesWhenNothingIsIdle(t *testing.T) {
	opt := DefaultServerOptions
	opt.MaxConns = 2
	addr, lim, _ := startServer(t, 8, opt)
	fillSilently(t, addr, lim, opt.MaxConns)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(staleNew / 2))
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	if n, err := c.Read(make([]byte, 1)); n > 0 || err == nil {
		t.Errorf("a newcomer beside %d fresh connections was served (%d bytes, %v)", opt.MaxConns, n, err)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the newcomer was left waiting instead of refused")
	}
	if lim.refused.Load() == 0 || lim.evicted.Load() != 0 {
		t.Errorf("refused %d, evicted %d; want a refusal and no eviction", lim.refused.Load(), lim.evicted.Load())
	}
}
