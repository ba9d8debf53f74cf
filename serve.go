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
	fs := newFlagSet("serve", "memscope serve [--listen 127.0.0.1:9400] [--source nvml|fake] [--hostname H] [--gpus N]", stderr)
	listen := fs.String("listen", "127.0.0.1:9400", "address to serve /metrics on (loopback unless told otherwise, e.g. :9400)")
	source := fs.String("source", "nvml", "nvml, or fake (simulated GPUs)")
	host, _ := os.Hostname()
	hostname := fs.String("hostname", host, "value of the Hostname label")
	gpus := fs.Int("gpus", 8, "number of fake GPUs (--source fake)")
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
	fake := nvml.NewFake(*gpus, nil)
	fake.Host = *hostname
	src, err := openGPUSource("serve", *source, fake, stderr)
	if err != nil {
		return false, err
	}
	defer src.Close()
	h, err := fleet.NewExporter(src, *hostname).Handler()
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "memscope serve: %d GPUs (%s) as Hostname=%q on http://%s/metrics\n",
		len(src.Devices()), src.Name(), *hostname, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
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
