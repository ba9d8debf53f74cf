package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/schollz/progressbar/v3"

	"memscope/internal/textsafe"
)

// progressDelay is how long loading runs before a progress bar appears:
// quick reports stay clean.
const progressDelay = time.Second

// loadProgress draws one bar on a terminal for all the files of a report:
// bytes decoded over the total, and the phase of the file last heard from.
// A nil *loadProgress does nothing.
type loadProgress struct {
	mu    sync.Mutex
	w     *gateWriter
	start time.Time
	delay time.Duration
	now   func() time.Time
	total int64
	done  map[int]int64
	sum   int64
	bar   *progressbar.ProgressBar
}

// newLoadProgress returns nil unless w is a terminal (tty) and there are
// bytes to read.
func newLoadProgress(w io.Writer, tty bool, total int64, delay time.Duration, now func() time.Time) *loadProgress {
	if !tty || total <= 0 {
		return nil
	}
	p := &loadProgress{w: &gateWriter{w: w}, start: now(), delay: delay, now: now, total: total, done: map[int]int64{}}
	// The bar starts with the load, so its rate and time left are right,
	// but writes nothing until the delay has passed.
	p.bar = progressbar.NewOptions64(p.total, progressbar.OptionSetWriter(p.w), progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true), progressbar.OptionUseIECUnits(true))
	return p
}

// gateWriter drops writes until opened.
type gateWriter struct {
	w    io.Writer
	open bool
}

func (g *gateWriter) Write(b []byte) (int, error) {
	if !g.open {
		return len(b), nil
	}
	return g.w.Write(b)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// update records that file i has n bytes done and is in phase.
func (p *loadProgress) update(i int, n int64, phase string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sum += n - p.done[i]
	p.done[i] = n
	if !p.w.open && p.now().Sub(p.start) >= p.delay {
		p.w.open = true
	}
	// A file name goes to the terminal: escape it.
	p.bar.Describe(textsafe.Safe(phase))
	_ = p.bar.Set64(min(p.sum, p.total))
}

// finish clears the bar, if one was drawn.
func (p *loadProgress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w.open {
		_ = p.bar.Clear()
	}
	p.w.open = false
	_ = p.bar.Exit()
}
