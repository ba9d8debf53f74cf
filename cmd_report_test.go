package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"memscope/snapshot"
)

// TestLoadProgress: a bar only on a terminal, only after the delay, with
// the phase escaped and the bytes of all files summed.
func TestLoadProgress(t *testing.T) {
	if p := newLoadProgress(&bytes.Buffer{}, false, 100, 0, time.Now); p != nil {
		t.Error("no bar when stderr is not a terminal")
	}
	if p := newLoadProgress(&bytes.Buffer{}, true, 0, 0, time.Now); p != nil {
		t.Error("no bar when there is nothing to read")
	}
	var nilBar *loadProgress
	nilBar.update(0, 1, "x") // a nil bar does nothing
	nilBar.finish()

	start := time.Unix(1000, 0)
	clock := start
	var out bytes.Buffer
	p := newLoadProgress(&out, true, 4<<20, time.Second, func() time.Time { return clock })
	clock = start.Add(time.Second - time.Millisecond)
	p.update(0, 1<<20, "decoding a.pickle")
	if out.Len() != 0 {
		t.Errorf("nothing is drawn before the delay: %q", out.String())
	}
	clock = start.Add(time.Second)
	p.update(1, 1<<20, "decoding b\x1b[2J.pickle")
	s := out.String()
	if !strings.Contains(s, "decoding b\\x1b[2J.pickle") || strings.Contains(s, "\x1b[2J") {
		t.Errorf("the bar names the phase, escaped: %q", s)
	}
	if !strings.Contains(s, "2.0/4.0 MiB") || !strings.Contains(s, "50%") {
		t.Errorf("both files' bytes count: %q", s)
	}
	p.finish()
}

// TestReportGCPercent: input up to reportGCMax is loaded collecting at 5x
// growth; larger input keeps the default, which bounds the peak of a 1 GB
// snapshot.
func TestReportGCPercent(t *testing.T) {
	for _, c := range []struct {
		total int64
		want  int
	}{{0, 400}, {reportGCMax, 400}, {reportGCMax + 1, 0}, {1 << 40, 0}} {
		if got := reportGCPercent(c.total); got != c.want {
			t.Errorf("reportGCPercent(%d) = %d, want %d", c.total, got, c.want)
		}
	}
}

// TestLoadReportsGCPace: a one-file report loads at reportGCPercent's slow
// pace and analyses at analysisGCPercent; with two files, one may still be
// decoding while the other is analysed, so the slow pace stays; above
// reportGCMax the default pace is never changed.
func TestLoadReportsGCPace(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	snap := "testdata/snapshots/drisspg_transformer_nuggets__mini_snapshot.pickle"
	big := filepath.Join(t.TempDir(), "big.pickle")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(reportGCMax + 1); err != nil { // a sparse file: refused, but sized
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		paths []string
		want  int
	}{
		{[]string{snap}, analysisGCPercent},
		{[]string{snap, snap}, reportGCPercent(0)},
		{[]string{big}, 77},
	} {
		debug.SetGCPercent(77)
		loadReports(context.Background(), c.paths, snapshot.NewCategorizer(nil), nil, nil)
		if got := debug.SetGCPercent(77); got != c.want {
			t.Errorf("%d file(s) of %v: GOGC %d after the load, want %d", len(c.paths), c.paths, got, c.want)
		}
	}
}
