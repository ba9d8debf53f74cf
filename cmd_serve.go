package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"memscope/fleet"
	"memscope/nvml"
)

// cmdServe implements `memscope serve`: this node's GPUs under
// dcgm-exporter's metric names, for a Prometheus to scrape.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("serve", "memscope serve [--listen 127.0.0.1:9400] [--source nvml|fake] [--hostname H] [--gpus N] [--max-conns N] [--idle-timeout D] [--cache D]", stderr)
	listen := fs.String("listen", "127.0.0.1:9400", "address to serve /metrics on (loopback unless told otherwise, e.g. :9400)")
	source := fs.String("source", "nvml", "nvml, or fake (simulated GPUs)")
	host, _ := os.Hostname()
	hostname := fs.String("hostname", host, "value of the Hostname label")
	gpus := fs.Int("gpus", 8, "number of fake GPUs (--source fake), 1 to 4096")
	def := fleet.DefaultServerOptions
	maxConns := fs.Int("max-conns", def.MaxConns, "most open connections; at the cap a new one evicts the longest-idle keep-alive connection, or is refused")
	idle := fs.Duration("idle-timeout", def.IdleTimeout, "close a keep-alive connection idle this long")
	cacheFor := fs.Duration("cache", fleet.DefaultExportMaxAge, "scrapes within this of a GPU reading share it (0: read the GPUs on every scrape)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return false, err
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "memscope serve: unexpected argument %q\n", pos[0])
		return false, errUsage
	}
	if *gpus < 1 || *gpus > 4096 {
		fmt.Fprintln(stderr, "memscope serve: --gpus must be 1 to 4096")
		return false, errUsage
	}
	if *maxConns < 1 || *idle <= 0 || *cacheFor < 0 {
		fmt.Fprintln(stderr, "memscope serve: --max-conns must be at least 1, --idle-timeout above 0, --cache 0 or more")
		return false, errUsage
	}
	fake := nvml.NewFake(*gpus, nil)
	fake.Host = *hostname
	src, err := openGPUSource("serve", *source, fake, stderr)
	if err != nil {
		return false, err
	}
	defer src.Close()
	exp := fleet.NewExporter(src, *hostname)
	exp.MaxAge = *cacheFor
	h, err := exp.Handler()
	if err != nil {
		return false, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "memscope serve: DCGM metrics of %s at /metrics\n", src.Name())
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return false, fmt.Errorf("listen on %s: %w", *listen, err)
	}
	opt := def
	opt.MaxConns, opt.IdleTimeout = *maxConns, *idle
	srv, wrap := fleet.NewServer(mux, opt)
	fmt.Fprintf(stdout, "memscope serve: %d GPUs (%s) as Hostname=%q on http://%s/metrics\n",
		len(src.Devices()), src.Name(), *hostname, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(wrap(ln)) }()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return false, err
	}
	return false, nil
}
