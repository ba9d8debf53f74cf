package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/snapshot"
	"memscope/tui/widget"
)

var mkStages = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "stages (annotations), leak suspects, long pending frees"))

// stagesOverlay lists a device's annotated stages with the anomalies found
// over them; enter puts the Timeline's cursor on the chosen stage's peak.
type stagesOverlay struct {
	dev   int
	st    *snapshot.DeviceStats
	tl    *snapshot.Timeline
	list  widget.Scroller
	notes []string
	runW  int // the RUN column: the longest run's ordinal, "RUN" at least
}

func newStagesOverlay(t *timelineTab, st *snapshot.DeviceStats) *stagesOverlay {
	o := &stagesOverlay{dev: st.Device, st: st, tl: t.tl, runW: 4}
	o.notes = anomalyNotes(st, t.tl)
	// A layer annotated each step runs thousands of times: its ordinal
	// is whole, the column as wide as the longest.
	runs := 0
	for i := range st.Stages {
		runs = max(runs, st.Stages[i].Occurrence+1)
	}
	o.runW = max(o.runW, len(ordinal(runs)))
	// Start on the stage around the cursor, if any.
	for i, s := range st.Stages {
		if s.First <= t.cursor && t.cursor < s.Last {
			o.list.Cursor = i
		}
	}
	return o
}

// anomalyNotes says in a line each what the leak check and the pending
// frees found, or why there is nothing to say.
func anomalyNotes(st *snapshot.DeviceStats, tl *snapshot.Timeline) []string {
	var out []string
	switch {
	case len(st.Stages) == 0 && len(tl.Events) > 0 && tl.Events[len(tl.Events)-1].TimeUS == 0:
		out = append(out, "No stages: the trace has no timestamps to place annotations on.")
	case len(st.Stages) == 0:
		out = append(out, "No stages: the snapshot has no external_annotations. record_function ranges (torch.profiler's ProfilerStep#N, the optimizer's step, your own) are recorded while _record_memory_history runs.")
	}
	switch {
	case !st.HasSteps:
		out = append(out, "Leak check: needs 3 or more steps (ProfilerStep#N, or a stage that repeats once per iteration).")
	case len(st.Leaks) == 0:
		out = append(out, fmt.Sprintf("Leak check: no call site grew from step to step over %d steps (%s).", len(st.Steps.Events), st.Steps.Name))
	default:
		for _, l := range st.Leaks {
			out = append(out, fmt.Sprintf("Leak suspect: %s grew in %d of %d steps, %s → %s (+%s a step).",
				l.Site, l.Grew, l.Steps, bytesStr(l.First), bytesStr(l.Last), bytesStr(l.Growth()/int64(max(1, l.Steps)))))
		}
	}
	pf := &st.Pending
	switch {
	case pf.Long > 0:
		s := fmt.Sprintf("Long pending frees: %d (%s) waited on another stream, median %s, longest %s (%s at %s).",
			pf.Long, bytesStr(pf.LongBytes), pf.WaitString(pf.MedianWait), pf.WaitString(pf.MaxWait), bytesStr(pf.MaxSize), pf.MaxSite)
		if pf.AtPeak > 0 {
			s += fmt.Sprintf(" At the peak %s was freed but still counted active.", bytesStr(pf.AtPeak))
		}
		out = append(out, s)
	case pf.Deferred > 0:
		out = append(out, fmt.Sprintf("Pending frees: %d waited on another stream, none for long.", pf.Deferred))
	default:
		out = append(out, "Pending frees: none waited on another stream.")
	}
	return out
}

func (o *stagesOverlay) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyHome, widget.KeyEnd,
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "jump to the stage's peak on the Timeline")), widget.KeyBack}
}

func (o *stagesOverlay) update(c *tabContext, msg tea.Msg) (bool, tea.Cmd) {
	if m, ok := msg.(tea.KeyPressMsg); ok && m.String() == "enter" {
		if o.list.Cursor < len(o.st.Stages) {
			s := &o.st.Stages[o.list.Cursor]
			at := s.PeakEvent
			if at < 0 {
				at = s.First - 1
			}
			c.send(toTab{tabTimeline, seekEventMsg{at}})
			c.setStatus("%s #%d: peak %s (%s over the stage)", safe(s.Name), s.Occurrence, bytesStr(s.Peak), signed(s.Delta()))
		}
		return true, nil
	}
	return scrollOverlay(&o.list, msg, "s"), nil
}

func (o *stagesOverlay) view(c *tabContext, w, h int) string {
	var b strings.Builder
	b.WriteString(widget.Fit(c.th.Bold.Render(fmt.Sprintf("Stages · cuda:%d · %d annotated ranges", o.dev, len(o.st.Stages)))+
		c.th.Dim.Render(" · enter: its peak on the Timeline · esc closes"), w) + "\n")
	used := 1
	for _, n := range o.notes {
		for _, l := range wrapWords(safe(n), max(20, w-2)) {
			if used < h-3 {
				b.WriteString(widget.Fit(" "+l, w) + "\n")
				used++
			}
		}
	}
	if len(o.st.Stages) == 0 {
		return b.String()
	}
	// At 80 columns the call site matters more than the bytes allocated.
	wide := w >= 120
	nameW := max(12, min(40, w*3/10))
	const numW = 10
	siteW := w - nameW - 2*numW - o.runW - 5
	head := fmt.Sprintf("%-*s %*s %*s", nameW, "STAGE", numW, "PEAK", numW, "Δ")
	if wide {
		siteW -= numW + 1
		head += fmt.Sprintf(" %*s", numW, "ALLOCATED")
	}
	// The stage's run among those of its name (1st, 2nd…), not a count.
	head += fmt.Sprintf(" %*s  %s", o.runW, "RUN", "TOP CALL SITE AT ITS PEAK")
	b.WriteString(c.th.Header.Render(widget.Fit(head, w)) + "\n")
	used++
	o.list.SetHeight(h - used - 1)
	o.list.SetN(len(o.st.Stages))
	from, to := o.list.Visible()
	for i := from; i < to; i++ {
		s := &o.st.Stages[i]
		name := strings.Repeat("  ", min(s.Depth, 4)) + safe(s.Name)
		if s.OpenStart {
			name = "…" + name
		}
		if s.OpenEnd {
			name += "…"
		}
		top := "-"
		switch {
		case len(s.Top) > 0 && wide:
			top = widget.FitLeft(bytesStr(s.Top[0].Bytes), 10) + " " + widget.FitTail(shortSite(safe(s.Top[0].Site), siteW-11), siteW-11)
		case len(s.Top) > 0:
			top = widget.FitTail(shortSite(safe(s.Top[0].Site), siteW), max(1, siteW))
		}
		line := widget.FitMiddle(name, nameW) + " " + widget.FitLeft(bytesStr(s.Peak), numW) + " " + widget.FitLeft(signed(s.Delta()), numW)
		if wide {
			line += " " + widget.FitLeft(bytesStr(s.Allocated), numW)
		}
		line += " " + widget.FitLeft(ordinal(s.Occurrence+1), o.runW) + "  " + top
		if i == o.list.Cursor {
			line = c.th.Sel.Render(widget.Fit(line, w))
		}
		b.WriteString(widget.Fit(line, w) + "\n")
	}
	b.WriteString(c.th.Dim.Render(o.list.Hint()))
	return b.String()
}

// shortSite drops the folders of a "path/file.py:12 function" site when it
// does not fit in w cells: the file, line and function tell sites apart.
func shortSite(site string, w int) string {
	if len([]rune(site)) <= w {
		return site
	}
	file, fn, _ := strings.Cut(site, " ")
	if i := strings.LastIndexAny(file, "/\\"); i >= 0 {
		file = file[i+1:]
	}
	if fn == "" {
		return file
	}
	return file + " " + fn
}

// ordinal writes n as "1st", "2nd", "3rd", "11th"…
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprint(n) + suffix
}
