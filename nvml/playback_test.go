package nvml

import (
	"context"
	"math"
	"testing"
	"time"

	"memscope/trace"
)

// TestReplayPauseSeekLoop: the position follows the clock at the replay's
// speed, stands still while paused, moves by a seek (never before the
// start), and counts the loops of the recording.
func TestReplayPauseSeekLoop(t *testing.T) {
	dir := t.TempDir()
	if err := Record(context.Background(), &stepSource{n: 1, start: time.Now()}, RecordOptions{OutDir: dir,
		Interval: 10 * time.Millisecond, Duration: 220 * time.Millisecond, FlushEvery: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	now := func() time.Time { return clock }
	r, err := newPlaybackOf(t, dir, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	at, span, loop, paused := r.Position()
	if at != 0 || span <= 0 || loop != 0 || paused {
		t.Fatalf("start: at %v span %v loop %d paused %v", at, span, loop, paused)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	clock = clock.Add(time.Duration(span / 2 * float64(time.Second)))
	if at, _, _, _ := r.Position(); !near(at, span/2) {
		t.Errorf("half a span later: at %v, want %v", at, span/2)
	}
	r.TogglePause()
	clock = clock.Add(time.Hour)
	if at, _, _, paused := r.Position(); !near(at, span/2) || !paused {
		t.Errorf("paused for an hour: at %v paused %v, want %v", at, paused, span/2)
	}
	r.TogglePause()
	r.Seek(-10 * span)
	if at, _, loop, _ := r.Position(); at != 0 || loop != 0 {
		t.Errorf("seek far back: at %v loop %d, want the start", at, loop)
	}
	r.Seek(2.5 * span)
	if at, _, loop, _ := r.Position(); !near(at, span/2) || loop != 2 {
		t.Errorf("seek 2.5 spans: at %v loop %d, want %v in loop 2", at, loop, span/2)
	}
}

// newPlaybackOf loads dir's traces and plays them back.
func newPlaybackOf(t testing.TB, dir string, now func() time.Time, speed float64) (*Playback, error) {
	t.Helper()
	set, err := trace.LoadPath(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	return NewPlayback(set, dir, now, speed)
}
