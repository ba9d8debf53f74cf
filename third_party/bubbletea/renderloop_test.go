package tea

// Tests of the render loop patch (PATCHES.md): frames are drawn while views
// are queued and the loop sleeps while nothing changes.

import (
	"bytes"
	"strconv"
	"sync"
	"testing"
	"time"
)

// countingRenderer records how often the loop flushes and which view the
// last flush drew.
type countingRenderer struct {
	renderer
	mu      sync.Mutex
	flushes int
	queued  string // content of the last view handed to render
	drawn   string // content queued when the last flush ran
}

func (r *countingRenderer) render(v View) {
	r.mu.Lock()
	r.queued = v.Content
	r.mu.Unlock()
	r.renderer.render(v)
}

func (r *countingRenderer) flush(closing bool) error {
	r.mu.Lock()
	r.flushes++
	r.drawn = r.queued
	r.mu.Unlock()
	return r.renderer.flush(closing)
}

func (r *countingRenderer) state() (flushes int, drawn string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushes, r.drawn
}

type setViewMsg string

// viewModel shows the last setViewMsg it got.
type viewModel struct{ content string }

func (m *viewModel) Init() Cmd { return nil }

func (m *viewModel) Update(msg Msg) (Model, Cmd) {
	if s, ok := msg.(setViewMsg); ok {
		m.content = string(s)
	}
	return m, nil
}

func (m *viewModel) View() View { return NewView(m.content) }

// waitDrawn polls until the loop has drawn want.
func waitDrawn(t *testing.T, r *countingRenderer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, drawn := r.state(); drawn == want {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	_, drawn := r.state()
	t.Fatalf("view %q never drawn; last drawn %q", want, drawn)
}

// flushesOver counts the loop's flushes during d.
func flushesOver(r *countingRenderer, d time.Duration) int {
	before, _ := r.state()
	time.Sleep(d)
	after, _ := r.state()
	return after - before
}

func TestRenderLoopSleepsWhenIdle(t *testing.T) {
	var out bytes.Buffer
	p := NewProgram(&viewModel{content: "first"}, WithInput(nil), WithOutput(&out), WithFPS(60))
	r := &countingRenderer{renderer: &nilRenderer{}}
	p.renderer = r
	done := make(chan error, 1)
	go func() { _, err := p.Run(); done <- err }()
	defer func() {
		p.Quit()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	waitDrawn(t, r, "first")
	// Let the ticker notice it has nothing to draw; a ticking loop would
	// flush about 18 times in the next 300 ms.
	time.Sleep(100 * time.Millisecond)
	if n := flushesOver(r, 300*time.Millisecond); n != 0 {
		t.Fatalf("idle program flushed %d times in 300 ms, want 0", n)
	}

	// A change after a pause is drawn, and the loop sleeps again after it.
	p.Send(setViewMsg("second"))
	waitDrawn(t, r, "second")
	time.Sleep(100 * time.Millisecond)
	if n := flushesOver(r, 300*time.Millisecond); n != 0 {
		t.Fatalf("after one change the program flushed %d times in 300 ms idle, want 0", n)
	}

	// A burst is drawn in far fewer frames than views, and its last view
	// is the one on screen.
	const burst = 500
	before, _ := r.state()
	for i := range burst {
		p.Send(setViewMsg("burst " + strconv.Itoa(i)))
	}
	waitDrawn(t, r, "burst "+strconv.Itoa(burst-1))
	if after, _ := r.state(); after-before >= burst {
		t.Fatalf("%d views drawn in %d flushes: not coalesced", burst, after-before)
	}
}
