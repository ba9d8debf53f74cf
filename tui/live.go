package tui

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/nvml"
	"memscope/tui/widget"
)

// liveTab shows the GPUs of a live (or simulated, or replayed) source.
type liveTab struct {
	w, h     int
	opts     Options
	sampler  *nvml.Sampler
	state    nvml.State
	told     map[string]bool // the UUIDs the Fleet tab was last told (localGPUsMsg)
	sel      int             // selected device position
	focus    bool
	procs    widget.Scroller
	procSort int
	filter   widget.Filter
	// metric is what the chart plots; multiples draws one chart per GPU.
	metric    liveMetric
	multiples bool
}

type liveMsg struct{}

var (
	lkGPU    = key.NewBinding(key.WithKeys("left", "right", "h", "l"), key.WithHelp("←/→", "select GPU"))
	lkFocus  = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "focus the selected GPU (esc: all)"))
	lkSort   = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort processes (memory, GPU, PID, user)"))
	lkFilter = key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter processes"))
)

func newLiveTab(opts Options) *liveTab {
	t := &liveTab{opts: opts, filter: widget.NewFilter("command, user, PID…")}
	if opts.Live != nil {
		if t.opts.History <= 0 {
			t.opts.History = 30 * time.Minute
		}
		t.sampler = nvml.NewSampler(opts.Live, opts.Interval, nvml.HistoryFor(t.opts.History, opts.Interval))
	}
	return t
}

func (t *liveTab) id() tabID { return tabLive }

func (t *liveTab) name() string { return "Live" }

func (t *liveTab) capturing() bool { return t.filter.Typing() }

func (t *liveTab) help() []key.Binding {
	keys := []key.Binding{lkGPU, lkFocus, lkMetric, lkView, widget.KeyUp, widget.KeyDown, lkSort, lkFilter, widget.KeyBack, kExport}
	if t.player() != nil {
		keys = append(keys, lkPause, lkSeek)
	}
	return keys
}

// player is a replayed recording's playback controls (nvml.Playback).
type player interface {
	Position() (at, span float64, loop int, paused bool)
	TogglePause()
	Seek(d float64)
}

var (
	lkPause = key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "replay: pause / resume"))
	lkSeek  = key.NewBinding(key.WithKeys("[", "]"), key.WithHelp("[ ]", "replay: back / forward a tenth of the recording"))
)

// player is the source's playback controls when it replays a recording.
func (t *liveTab) player() player {
	p, _ := t.opts.Live.(player)
	return p
}

// replayLine says where a replay is: the position in the recording, the
// loop, paused or playing.
func (t *liveTab) replayLine(c *tabContext) string {
	p := t.player()
	if p == nil {
		return ""
	}
	at, span, loop, paused := p.Position()
	state := "playing"
	if paused {
		state = c.th.Warn.Render("paused")
	}
	return fmt.Sprintf("replay %.1fs of %.1fs · loop %d · %s · space pause · [ ] seek", at, span, loop+1, state)
}

func (t *liveTab) resize(w, h int) { t.w, t.h = w, h }

// init starts the sampler (off the UI goroutine) and the update listener.
func (t *liveTab) init(c *tabContext) tea.Cmd {
	if t.sampler == nil {
		return nil
	}
	go t.sampler.Run(c.ctx)
	return t.wait()
}

func (t *liveTab) wait() tea.Cmd {
	s := t.sampler
	return func() tea.Msg {
		<-s.Updates()
		return liveMsg{}
	}
}

func (t *liveTab) onSample(c *tabContext, _ liveMsg) tea.Cmd {
	t.state = t.sampler.State()
	if t.state.Err != nil {
		c.setStatus("live: %v (retrying)", t.state.Err)
	}
	// The Fleet tab marks this machine's GPUs: tell it when they change.
	local := map[string]bool{}
	for _, d := range t.state.Devices {
		if d.UUID != "" {
			local[d.UUID] = true
		}
	}
	if len(local) > 0 && !maps.Equal(local, t.told) {
		t.told = local
		c.send(localGPUsMsg{local})
	}
	return t.wait()
}

// focus shows one GPU, found by UUID (the Fleet tab's l).
func (t *liveTab) focusGPU(c *tabContext, m focusGPUMsg) {
	for i, d := range t.shownDevices() {
		if d.UUID != "" && d.UUID == m.uuid {
			t.sel, t.focus = i, true
			c.send(switchTabMsg{tabLive})
			return
		}
	}
	c.setStatus("%s GPU %s is not one of this machine's GPUs", safe(m.host), safe(m.index))
}

func (t *liveTab) update(c *tabContext, msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case focusGPUMsg:
		t.focusGPU(c, m)
		return nil
	case exportMsg:
		return exportLive(c, t)
	}
	if t.filter.Typing() {
		cmd, _ := t.filter.Update(msg) // the rows are filtered as they are drawn
		return cmd
	}
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		t.procs.Scroll(wheel(m))
	case tea.KeyPressMsg:
		n := len(t.state.Devices)
		switch {
		case m.String() == "left" || m.String() == "h":
			if n > 0 {
				t.sel = (t.sel + n - 1) % n
			}
		case m.String() == "right" || m.String() == "l":
			if n > 0 {
				t.sel = (t.sel + 1) % n
			}
		case key.Matches(m, lkPause) && t.player() != nil:
			t.player().TogglePause()
			return nil
		case key.Matches(m, lkSeek) && t.player() != nil:
			_, span, _, _ := t.player().Position()
			d := span / 10
			if m.String() == "[" {
				d = -d
			}
			t.player().Seek(d)
			return nil
		case key.Matches(m, lkFocus):
			t.focus = n > 0
		case key.Matches(m, widget.KeyBack):
			if !t.filter.Clear() { // esc clears a filter before anything else, as it says
				t.focus = false
			}
		case key.Matches(m, lkMetric):
			t.metric = nextMetric(t.metric)
			c.setStatus("chart: %s", t.metric)
		case key.Matches(m, lkView):
			t.multiples = !t.multiples
			if t.multiples {
				c.setStatus("chart: one per GPU (when the window holds them)")
			} else {
				c.setStatus("chart: every GPU in one, the selected one on top")
			}
		case key.Matches(m, lkSort):
			t.procSort = (t.procSort + 1) % 4
			c.setStatus("processes sorted by %s", []string{"memory", "GPU", "PID", "user"}[t.procSort])
		case key.Matches(m, lkFilter):
			return t.filter.Start()
		case key.Matches(m, kExport):
			return exportLive(c, t)
		default:
			widget.ListMove(&t.procs, m)
		}
	}
	return nil
}

func (t *liveTab) view(c *tabContext) string {
	th := c.th
	if t.sampler == nil {
		return t.unavailableView(c)
	}
	st := t.state
	if st.Samples == 0 && st.Err == nil {
		return th.Dim.Render("sampling " + safe(c.opts.Live.Name()) + "…")
	}
	var b strings.Builder
	src := safe(st.Source)
	if c.opts.Live.Simulated() {
		src = th.Warn.Render("SIMULATED") + " · " + src
	}
	head := fmt.Sprintf("%s · %s · every %v · %d samples of history", th.Bold.Render("Live GPUs"), src, c.opts.Interval, t.historyLen())
	if r := t.replayLine(c); r != "" {
		// A replay says where it is first: the history counts every loop.
		head = fmt.Sprintf("%s · %s · %s", th.Bold.Render("Live GPUs"), r, src)
	}
	if st.Err != nil {
		head += " · " + th.Err.Render("error: "+safe(st.Err.Error())+" (retrying)")
	}
	b.WriteString(widget.Fit(head, t.w) + "\n")
	devs := t.shownDevices()
	// Layout: cards, then the chart, then processes, sized to the screen.
	compact := t.h < 30 || len(devs)*2 > t.h/2
	cardLines := t.cards(c, devs, compact)
	b.WriteString(cardLines)
	used := 1 + strings.Count(cardLines, "\n")
	rest := t.h - used
	chartH := max(4, rest*55/100)
	if rest < 12 {
		chartH = max(0, rest-4)
	}
	if chartH >= 4 {
		b.WriteString(t.chart(c, devs, chartH) + "\n")
		used += chartH
	}
	b.WriteString(t.processes(c, devs, t.h-used))
	return b.String()
}

func (t *liveTab) historyLen() int { return t.state.HistoryLen }

func (t *liveTab) shownDevices() []nvml.Device {
	devs := t.state.Devices
	if t.sel >= len(devs) {
		t.sel = 0
	}
	if t.focus && len(devs) > 0 {
		return devs[t.sel : t.sel+1]
	}
	return devs
}

func (t *liveTab) latest(dev int) *nvml.Sample {
	for i := range t.state.Latest {
		if t.state.Latest[i].Device == dev {
			return &t.state.Latest[i]
		}
	}
	return nil
}

func na(v float64, format string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

var gpuColors = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#8E7CC3"}

func gpuColor(i int) string { return gpuColors[i%len(gpuColors)] }

func (t *liveTab) cards(c *tabContext, devs []nvml.Device, compact bool) string {
	th := c.th
	var b strings.Builder
	for i, d := range devs {
		s := t.latest(d.Index)
		selected := devs[i].Index == t.state.Devices[t.sel].Index
		name := fmt.Sprintf("GPU %d", d.Index)
		if d.Parent >= 0 {
			name = fmt.Sprintf("GPU %d %s", d.Parent, d.MIG)
		}
		dot := th.Fg(gpuColor(i)).Render("●")
		if s == nil {
			b.WriteString(widget.Fit(fmt.Sprintf("%s %s %s  (no sample yet)", dot, name, safe(d.Name)), t.w) + "\n")
			continue
		}
		if s.Err != nil {
			b.WriteString(widget.Fit(fmt.Sprintf("%s %s %s  %s", dot, name, safe(d.Name), th.Err.Render(safe(s.Err.Error()))), t.w) + "\n")
			continue
		}
		frac := 0.0
		if s.Total > 0 {
			frac = float64(s.Used) / float64(s.Total)
		}
		barSt := th.OK
		switch {
		case frac > 0.95:
			barSt = th.Err
		case frac > 0.85:
			barSt = th.Warn
		}
		// Near the limit is said in words too, not only in colour.
		hot := ""
		if frac > 0.9 {
			hot = " " + th.Err.Render("▲ near limit")
		}
		resv := ""
		if s.MemV1 {
			resv = " (v1: no reserved figure)"
		} else if s.Reserved > 0 {
			resv = " +" + bytesStr(s.Reserved) + " driver"
		}
		mem := fmt.Sprintf("%s / %s%s", bytesStr(s.Used), bytesStr(s.Total), resv)
		power := na(s.PowerW, "%.0fW")
		if !math.IsNaN(s.PowerLimitW) {
			power += "/" + na(s.PowerLimitW, "%.0fW")
		}
		stats := fmt.Sprintf("util %s · mem util %s · %s · %s · SM %s", na(s.UtilGPU, "%.0f%%"), na(s.UtilMem, "%.0f%%"),
			na(s.TempC, "%.0f°C"), power, na(s.SMClockMHz, "%.0f MHz"))
		label := fmt.Sprintf("%s %-9s", dot, name)
		if selected {
			label = th.Sel.Render(ansiStrip(label))
		}
		if compact {
			barW := max(6, t.w/5)
			short := fmt.Sprintf("%s/%s  util %s  %s  %s", bytesStr(s.Used), bytesStr(s.Total), na(s.UtilGPU, "%.0f%%"), na(s.TempC, "%.0f°C"), na(s.PowerW, "%.0fW"))
			mark := " "
			if hot != "" {
				mark = th.Err.Render("▲") // ▲: near the limit (the full view says so in words)
			}
			line := fmt.Sprintf("%s %s %5.1f%%%s%s", label, widget.HBar(frac, barW, barSt), 100*frac, mark, short)
			b.WriteString(widget.Fit(line, t.w) + "\n")
			continue
		}
		b.WriteString(widget.Fit(fmt.Sprintf("%s %s · %s", label, safe(d.Name), stats), t.w) + "\n")
		barW := max(10, (t.w-12)/2)
		b.WriteString(widget.Fit(fmt.Sprintf("            %s %5.1f%%  %s%s", widget.HBar(frac, barW, barSt), 100*frac, mem, hot), t.w) + "\n")
	}
	return b.String()
}

func (t *liveTab) processes(c *tabContext, devs []nvml.Device, h int) string {
	th := c.th
	if h < 3 {
		return ""
	}
	want := map[int]bool{}
	for _, d := range devs {
		want[d.Index] = true
	}
	var rows []nvml.Process
	q := strings.ToLower(t.filter.Query())
	for _, s := range t.state.Latest {
		if !want[s.Device] {
			continue
		}
		for _, p := range s.Processes {
			if q != "" && !strings.Contains(strings.ToLower(fmt.Sprintf("%d %s %s", p.PID, p.User, p.Command)), q) {
				continue
			}
			rows = append(rows, p)
		}
	}
	slices.SortStableFunc(rows, func(x, y nvml.Process) int {
		switch t.procSort {
		case 1:
			return cmp.Compare(x.GPU, y.GPU)
		case 2:
			return cmp.Compare(x.PID, y.PID)
		case 3:
			return cmp.Compare(x.User, y.User)
		}
		return cmp.Compare(y.Used, x.Used)
	})
	t.procs.SetHeight(h - 2)
	t.procs.SetN(len(rows))
	var b strings.Builder
	b.WriteString(th.Header.Render(widget.Fit(fmt.Sprintf("%8s %-10s %4s %10s  %s", "PID", "USER", "GPU", "GPU MEM", "COMMAND"), t.w)) + "\n")
	from, to := t.procs.Visible()
	for i := from; i < to; i++ {
		p := rows[i]
		mem := bytesStr(p.Used)
		if p.Used < 0 {
			mem = "n/a"
		}
		user := p.User
		if !p.Visible {
			user = "?"
		}
		// A process chooses its own name and command line: escape them.
		line := fmt.Sprintf("%8d %-10s %4d %10s  %s", p.PID, widget.Fit(safe(user), 10), p.GPU, mem, safe(p.Command))
		if !p.Visible {
			line = th.Dim.Render(line)
		}
		if i == t.procs.Cursor {
			line = th.Sel.Render(widget.Fit(ansiStrip(line), t.w))
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	if len(rows) == 0 {
		msg := "no compute processes"
		if t.filter.Query() != "" {
			msg = "no process matches the filter (esc clears it)"
		}
		b.WriteString(th.Dim.Render(msg) + "\n")
	}
	for i := max(1, to-from); i < t.procs.Height; i++ {
		b.WriteString("\n")
	}
	switch {
	case t.filter.Typing():
		b.WriteString(t.filter.View())
	case t.filter.Query() != "":
		// A filter is never silent: the footer says what it hides.
		b.WriteString(th.Warn.Render(widget.Fit(fmt.Sprintf("filter %q: %d processes shown · esc clears", safe(t.filter.Query()), len(rows)), t.w)))
	default:
		b.WriteString(th.Dim.Render(widget.Fit("←/→ GPU · enter focus · s sort · / filter · e export", t.w)))
	}
	return b.String()
}

func (t *liveTab) unavailableView(c *tabContext) string {
	th := c.th
	var b strings.Builder
	b.WriteString(th.Title.Render("Live GPUs: not available") + "\n\n")
	if c.opts.LiveErr != nil {
		b.WriteString(th.Err.Width(max(10, t.w-1)).Render(safe(c.opts.LiveErr.Error())) + "\n\n")
	} else {
		b.WriteString("Live GPU data was not requested for this session.\n\n")
	}
	b.WriteString("The other tabs work without it. To see GPUs here:\n")
	b.WriteString("  · run memscope on a machine with an NVIDIA driver (nvidia-smi works there)\n")
	b.WriteString("  · in a container, start it with the GPU runtime (docker --gpus all)\n")
	b.WriteString("  · memscope demo shows eight simulated GPUs\n")
	b.WriteString("  · memscope --replay DIR plays recorded traces (memscope record --out DIR) back\n")
	return b.String()
}
