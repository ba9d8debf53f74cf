package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"memscope/fleet"
	"memscope/internal/textsafe"
)

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
		return false, fleet.WriteJSON(stdout, f)
	}
	fleet.WriteText(stdout, *pf.url, f)
	return false, nil
}
