package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"memscope/nvml"
)

// cmdRecord implements `memscope record`.
func cmdRecord(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	fs := newFlagSet("record", "memscope record --out DIR [--interval D] [--duration D] [--devices LIST] [--pid PID] [--source nvml|fake]", stderr)
	out := fs.String("out", "", "directory for memory_trace_rank{i}.json (required)")
	interval := fs.Duration("interval", time.Second, "sampling interval (min 50ms)")
	duration := fs.Duration("duration", 0, "stop after this long (default: until Ctrl-C)")
	devices := fs.String("devices", "", "comma-separated GPU indices (default: all)")
	pids := fs.String("pid", "", "comma-separated PIDs whose memory counts as allocated (default: all compute processes)")
	source := fs.String("source", "nvml", "nvml, or fake (simulated GPUs)")
	flush := fs.Duration("flush", nvml.DefaultFlush, "how often the files are rewritten")
	if _, err := parseFlags(fs, args); err != nil {
		return false, err
	}
	if *out == "" {
		fmt.Fprintln(stderr, "memscope record: --out DIR is required")
		fs.Usage()
		return false, errUsage
	}
	if *interval < 50*time.Millisecond {
		fmt.Fprintln(stderr, "memscope record: --interval must be at least 50ms")
		return false, errUsage
	}
	devList, err := intList(*devices)
	if err != nil {
		fmt.Fprintf(stderr, "memscope record: --devices: %v\n", err)
		return false, errUsage
	}
	pidList, err := intList(*pids)
	if err != nil {
		fmt.Fprintf(stderr, "memscope record: --pid: %v\n", err)
		return false, errUsage
	}
	src, err := openGPUSource("record", *source, nvml.NewFake(8, nil), stderr)
	if err != nil {
		return false, err
	}
	defer src.Close()
	err = nvml.Record(ctx, src, nvml.RecordOptions{OutDir: *out, Interval: *interval, Duration: *duration,
		Devices: devList, PIDs: pidList, FlushEvery: *flush, Log: stderr, Status: terminalOrNil(stderr)})
	return false, err
}

func intList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// terminalOrNil returns w when it is a terminal: status lines rewritten in
// place would litter a log file.
func terminalOrNil(w io.Writer) io.Writer {
	if isTerminal(w) {
		return w
	}
	return nil
}

// openGPUSource opens the --source of record and serve: NVML, or the given
// simulated GPUs. Unknown kinds are usage errors, reported on stderr.
func openGPUSource(cmd, kind string, fake *nvml.Fake, stderr io.Writer) (nvml.Source, error) {
	switch kind {
	case "nvml":
		n, err := nvml.Open()
		if err != nil {
			return nil, err
		}
		return n, nil
	case "fake":
		return fake, nil
	}
	fmt.Fprintf(stderr, "memscope %s: --source must be nvml or fake, not %q\n", cmd, kind)
	return nil, errUsage
}
