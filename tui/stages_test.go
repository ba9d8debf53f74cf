package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
)

// TestStagesOverlay: s on the Timeline lists the annotated stages with the
// analysis's figures, says what the anomaly checks found, and enter puts
// the cursor on the chosen stage's peak.
func TestStagesOverlay(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		a := newTestApp(t, size[0], size[1], "../testdata/snapshots/h200/big.pickle.gz")
		press(a, "5", "s")
		s := screen(a)
		checkScreen(t, s, size[0], size[1])
		golden(t, fmt.Sprintf("timeline_stages_%dx%d", size[0], size[1]), s)
		st := a.timeline.src.Analysis.Device(0)
		if !strings.Contains(s, fmt.Sprintf("%d annotated ranges", len(st.Stages))) || !strings.Contains(s, "Leak check: no call site grew") {
			t.Errorf("stages overlay:\n%s", s)
		}
		press(a, "home", "down", "down")
		want := st.Stages[2]
		press(a, "enter")
		if a.overlay != nil || a.timeline.cursor != want.PeakEvent {
			t.Errorf("enter: cursor %d, want the third stage's peak %d", a.timeline.cursor, want.PeakEvent)
		}
		if s := screen(a); !strings.Contains(s, fmt.Sprintf("%s #%d: peak %s", want.Name, want.Occurrence, bytesStr(want.Peak))) {
			t.Errorf("status after enter:\n%s", s)
		}
	}
	a := newTestApp(t, 120, 30, "../testdata/snapshots/h200/record_stream.pickle")
	press(a, "5", "s")
	s := screen(a)
	pf := a.timeline.src.Analysis.Device(0).Pending
	if !strings.Contains(s, "No stages: the snapshot has no external_annotations") ||
		!strings.Contains(s, fmt.Sprintf("Long pending frees: %d (%s)", pf.Long, bytesStr(pf.LongBytes))) {
		t.Errorf("record_stream stages overlay:\n%s", s)
	}
	press(a, "s")
	if a.overlay != nil {
		t.Error("s closes the overlay it opened")
	}
}

// TestStagesOverlayLongRuns: a stage run thousands of times (a layer
// annotated every step) shows its whole ordinal, the column as wide as the
// longest, at 80 and 200 columns.
func TestStagesOverlayLongRuns(t *testing.T) {
	a := newTestApp(t, 80, 24, "../testdata/snapshots/h200/big.pickle.gz")
	press(a, "5")
	st := *a.timeline.src.Analysis.Device(0)
	st.Stages = slices.Clone(st.Stages)
	st.Stages[0].Occurrence = 12344
	for _, w := range []int{80, 200} {
		o := newStagesOverlay(a.timeline, &st)
		o.list.Cursor = -1 // no row selected: plain text
		s := o.view(&a.c, w, 20)
		if !strings.Contains(s, "12345th") || strings.Contains(s, "1234…") {
			t.Errorf("%d columns: the 12345th run is cut:\n%s", w, s)
		}
		for _, l := range strings.Split(s, "\n") {
			if n := lipgloss.Width(l); n > w {
				t.Errorf("%d columns: a line of %d: %q", w, n, l)
			}
		}
	}
}

func TestOrdinal(t *testing.T) {
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 102: "102nd", 111: "111th"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d) = %q, want %q", n, got, want)
		}
	}
}
