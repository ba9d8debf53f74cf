// Command memscope is a terminal UI and command-line tool for the GPU memory
// of large-model training: live GPUs, per-rank traces, allocator snapshots
// and estimates. Run `memscope help` for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"

	"memscope/internal/pages"
	"memscope/internal/textsafe"
)

const usage = `memscope: GPU memory of large-model training, in the terminal.

Usage:
  memscope [PATH...]        open the explorer over files and directories
                            (no PATH: the current directory plus live GPUs);
                            prints the text report when stdout is not a terminal
  memscope demo             open the explorer over bundled sample data
  memscope report [--json] [--top N] [--categories FILE] PATH...
                            analyse allocator snapshots and memory estimates
  memscope compare [--json] [--iteration N] [--pair R:S,...] [--sort rank|error] REAL SIM
  memscope compare [--json] DIR
                            compare per-rank real and simulated memory traces
  memscope diff [--json] A B
                            compare two snapshots by category and call site
  memscope record --out DIR [--interval D] [--duration D] [--devices LIST]
                  [--pid PID] [--source nvml|fake]
                            record live GPU memory as per-rank traces
  memscope fleet --prometheus URL [--selector S] [--range 1h] [--json]
                            GPU memory of a cluster from its Prometheus
                            (dcgm-exporter metrics): a table per host
  memscope serve [--listen 127.0.0.1:9400] [--source nvml|fake] [--hostname H]
                            serve this node's GPUs as dcgm-exporter metrics
  memscope help             this text

Explorer flags: --replay DIR (drive the Live tab from recorded traces),
  --live / --no-live (sample GPUs through NVML; default: only without PATH),
  --interval D (live sampling, default 1s, min 50ms), --history D (live
  history kept for the charts, default 30m, 1m to 24h), --categories FILE,
  --prometheus URL [--selector S] [--range D] (add the Fleet tab: the cluster's
  GPUs from Prometheus; alone, it reads no files and opens on the Fleet tab),
  --keep SIZE (memory kept in snapshot analyses besides those shown, default
  256MiB; past it the least recently used are let go and load again when shown).

Exit status: 0 when every input was read, 1 when any failed (the others are
still reported), 2 for usage errors.
`

// errUsage marks command-line mistakes (exit status 2).
var errUsage = errors.New("usage")

func main() {
	// SIGHUP too: a closed SSH session must still restore the terminal,
	// flush recordings and remove the demo's temporary folder.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// MEMSCOPE_CPUPROFILE=FILE profiles a whole command (for performance
	// work: go tool pprof memscope FILE).
	if p := os.Getenv("MEMSCOPE_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer f.Close()
				defer pprof.StopCPUProfile()
			}
		}
	}
	// MEMSCOPE_TRACE=FILE writes an execution trace (go tool trace FILE):
	// which phases keep every core busy, and which wait.
	if p := os.Getenv("MEMSCOPE_TRACE"); p != "" {
		if f, err := os.Create(p); err == nil {
			if trace.Start(f) == nil {
				defer f.Close()
			}
		}
	}
	// MEMSCOPE_MEMPROFILE=FILE writes where the command allocated (every
	// 64 KiB sampled), for the same work: go tool pprof -sample_index
	// alloc_space memscope FILE.
	mem := os.Getenv("MEMSCOPE_MEMPROFILE")
	if mem != "" {
		runtime.MemProfileRate = 64 << 10
	}
	pages.ReleaseImage()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	pprof.StopCPUProfile()
	trace.Stop()
	if mem != "" {
		runtime.GC()
		if f, err := os.Create(mem); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	os.Exit(code)
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		// Last line of defence: a bug must not dump a goroutine trace on a
		// user; say what happened and exit non-zero.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "memscope: internal error: %v\n(please report this with the command line and input)\n", r)
			code = 3
		}
	}()
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	var err error
	var failed bool
	switch cmd {
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	case "report":
		failed, err = cmdReport(ctx, args[1:], stdout, stderr)
	case "compare":
		failed, err = cmdCompare(ctx, args[1:], stdout, stderr)
	case "diff":
		failed, err = cmdDiff(ctx, args[1:], stdout, stderr)
	case "record":
		failed, err = cmdRecord(ctx, args[1:], stdout, stderr)
	case "fleet":
		failed, err = cmdFleet(ctx, args[1:], stdout, stderr)
	case "serve":
		failed, err = cmdServe(ctx, args[1:], stdout, stderr)
	case "demo":
		err = cmdDemo(ctx, args[1:], stdout, stderr)
	default:
		if cmd != "" && !strings.HasPrefix(cmd, "-") {
			if _, statErr := os.Stat(cmd); statErr != nil && !strings.ContainsAny(cmd, "/.") {
				fmt.Fprintf(stderr, "memscope: unknown command or missing path %q\n\n%s", cmd, usage)
				return 2
			}
		}
		failed, err = cmdExplore(ctx, args, stdout, stderr)
	}
	switch {
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		// Errors quote paths and file strings: made safe line by line, so
		// joined errors and hints keep their own lines.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "memscope: %s\n", textsafe.Safe(line))
		}
		return 1
	case failed:
		return 1
	}
	return 0
}
