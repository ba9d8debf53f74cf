package tui

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/fleet"
	"memscope/tui/widget"
)

// FleetSource is where the Fleet tab reads the cluster (a *fleet.Client).
type FleetSource interface {
	Latest(ctx context.Context, at time.Time) (*fleet.Fleet, error)
	History(ctx context.Context, f *fleet.Fleet) error
	Options() fleet.Options
}

// fleetTab is the cluster: a hosts x GPUs grid from Prometheus, a host's
// GPUs with their history, and one GPU's chart.
type fleetTab struct {
	w, h   int
	src    FleetSource
	data   *fleet.Fleet
	err    error
	errAt  time.Time
	seq    int // the refresh in flight; older answers are dropped
	busy   bool
	gotAt  time.Time
	took   time.Duration // the last refresh, latest figures and history
	hosts  []fleetHost   // sorted and filtered
	sortBy int
	list   widget.Scroller // hosts
	gpus   widget.Scroller // the open host's GPUs
	level  int             // 0 hosts, 1 a host's GPUs, 2 one GPU's chart
	host   string          // the open host
	filter widget.Filter
	// local holds the UUIDs of this machine's GPUs, as the Live tab
	// last told (localGPUsMsg).
	local map[string]bool
	top   int // body line of the first list row (mouse clicks)
}

// fleetHost is one row of the grid.
type fleetHost struct {
	name  string
	gpus  []*fleet.GPU
	sum   fleet.HostSummary
	pods  string
	local int // GPUs that are also on the Live tab
}

type fleetLatestMsg struct {
	seq  int
	f    *fleet.Fleet
	err  error
	took time.Duration
}

type fleetHistoryMsg struct {
	seq  int
	f    *fleet.Fleet
	err  error
	took time.Duration
}

type fleetTickMsg struct{ seq int }

var fleetSorts = []string{"used", "free", "imbalance", "name"}

var (
	fkSort    = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "sort hosts: used, free, imbalance, name"))
	fkFilter  = key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter by host, pod or model (esc clears)"))
	fkRefresh = key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh now"))
	fkOpen    = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open host, then GPU chart"))
	fkLive    = key.NewBinding(key.WithKeys("L"), key.WithHelp("L", "show a local GPU on the Live tab"))
)

func newFleetTab(src FleetSource) *fleetTab {
	return &fleetTab{src: src, filter: widget.NewFilter("host, pod, model…")}
}

func (t *fleetTab) id() tabID { return tabFleet }

func (t *fleetTab) name() string { return "Fleet" }

func (t *fleetTab) capturing() bool { return t.filter.Typing() }

func (t *fleetTab) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, fkOpen, widget.KeyBack, fkSort, fkFilter, fkRefresh, fkLive, kExport}
}

func (t *fleetTab) resize(w, h int) { t.w, t.h = w, h }

func (t *fleetTab) interval() time.Duration {
	if d := t.src.Options().Scrape; d > 0 {
		return d
	}
	return fleet.DefaultScrape
}

// fetch reads the latest figures off the UI goroutine.
func (t *fleetTab) fetch(c *tabContext) tea.Cmd {
	t.seq++
	t.busy = true
	seq, src, ctx := t.seq, t.src, c.ctx
	return func() tea.Msg {
		start := time.Now()
		f, err := src.Latest(ctx, time.Time{})
		return fleetLatestMsg{seq: seq, f: f, err: err, took: time.Since(start)}
	}
}

func (t *fleetTab) tick(seq int) tea.Cmd {
	return tea.Tick(t.interval(), func(time.Time) tea.Msg { return fleetTickMsg{seq: seq} })
}

func (t *fleetTab) onMsg(c *tabContext, msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case fleetTickMsg:
		if m.seq != t.seq || t.busy {
			return nil
		}
		return t.fetch(c)
	case fleetLatestMsg:
		if m.seq != t.seq {
			return nil
		}
		if m.err != nil {
			t.busy = false
			t.err, t.errAt = m.err, time.Now()
			return t.tick(t.seq)
		}
		t.err = nil
		t.took = m.took
		if t.data != nil {
			// Keep the sparklines until the new history arrives.
			old := make(map[string][]fleet.Point, len(t.data.GPUs))
			for i := range t.data.GPUs {
				old[t.data.GPUs[i].Key()] = t.data.GPUs[i].History
			}
			for i := range m.f.GPUs {
				m.f.GPUs[i].History = old[m.f.GPUs[i].Key()]
			}
		}
		t.setData(c, m.f)
		seq, src, ctx, f := t.seq, t.src, c.ctx, m.f.Clone()
		return func() tea.Msg {
			start := time.Now()
			err := src.History(ctx, f)
			return fleetHistoryMsg{seq: seq, f: f, err: err, took: time.Since(start)}
		}
	case fleetHistoryMsg:
		if m.seq != t.seq {
			return nil
		}
		t.busy = false
		t.took += m.took
		if m.err != nil {
			t.err, t.errAt = m.err, time.Now()
		} else {
			t.setData(c, m.f)
		}
		return t.tick(t.seq)
	}
	return nil
}

func (t *fleetTab) setData(c *tabContext, f *fleet.Fleet) {
	t.data, t.gotAt = f, time.Now()
	t.rebuild(c)
}

// rebuild groups, filters and sorts the hosts (on new data, a new sort or
// filter; never per frame).
func (t *fleetTab) rebuild(c *tabContext) {
	t.hosts = t.hosts[:0]
	if t.data == nil {
		return
	}
	local := t.local
	q := strings.ToLower(strings.TrimSpace(t.filter.Query()))
	gs := t.data.GPUs
	for i := 0; i < len(gs); {
		j := i
		for j < len(gs) && gs[j].Host == gs[i].Host {
			j++
		}
		h := fleetHost{name: gs[i].Host, sum: fleet.SummarizeHost(gs[i:j])}
		var pods []string
		match := q == "" || strings.Contains(strings.ToLower(h.name), q)
		for k := i; k < j; k++ {
			g := &gs[k]
			h.gpus = append(h.gpus, g)
			if g.Pod != "" && !slices.Contains(pods, g.Pod) {
				pods = append(pods, g.Pod)
			}
			if local[g.UUID] {
				h.local++
			}
			if !match && (strings.Contains(strings.ToLower(g.Pod), q) || strings.Contains(strings.ToLower(g.Namespace), q) ||
				strings.Contains(strings.ToLower(g.Model), q)) {
				match = true
			}
		}
		h.pods = strings.Join(pods, ",")
		if match {
			t.hosts = append(t.hosts, h)
		}
		i = j
	}
	free := func(h fleetHost) int64 { return h.sum.Total - h.sum.Used }
	slices.SortStableFunc(t.hosts, func(x, y fleetHost) int {
		switch fleetSorts[t.sortBy] {
		case "used":
			return cmp.Compare(y.sum.Used, x.sum.Used)
		case "free":
			return cmp.Compare(free(y), free(x))
		case "imbalance":
			return cmp.Compare(y.sum.Imbalance, x.sum.Imbalance)
		}
		return cmp.Compare(x.name, y.name)
	})
	t.list.SetN(len(t.hosts))
	if t.level > 0 {
		if h := t.openHost(); h == nil {
			t.level = 0
		} else {
			t.gpus.SetN(len(h.gpus))
		}
	}
}

func (t *fleetTab) openHost() *fleetHost {
	for i := range t.hosts {
		if t.hosts[i].name == t.host {
			return &t.hosts[i]
		}
	}
	return nil
}

func (t *fleetTab) update(c *tabContext, msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case localGPUsMsg:
		t.local = m.uuids
		t.rebuild(c)
		return nil
	case exportMsg:
		return exportFleet(c, t)
	}
	if t.filter.Typing() {
		cmd, changed := t.filter.Update(msg)
		if changed {
			t.list.Home()
			t.rebuild(c)
		}
		return cmd
	}
	cur := &t.list
	if t.level > 0 {
		cur = &t.gpus
	}
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		cur.Scroll(wheel(m))
	case tea.MouseClickMsg:
		if cur.Click(m.Y - t.top) {
			return nil
		}
	case tea.KeyPressMsg:
		switch {
		case key.Matches(m, fkOpen):
			switch {
			case t.level == 0 && len(t.hosts) > 0:
				t.host, t.level = t.hosts[t.list.Cursor].name, 1
				t.gpus = widget.Scroller{Height: t.gpus.Height}
				t.gpus.SetN(len(t.hosts[t.list.Cursor].gpus))
			case t.level == 1:
				t.level = 2
			}
		case key.Matches(m, widget.KeyBack):
			switch {
			case t.level > 0:
				t.level--
			case t.filter.Clear():
				t.rebuild(c)
			}
		case key.Matches(m, fkSort):
			t.sortBy = (t.sortBy + 1) % len(fleetSorts)
			t.rebuild(c)
			c.setStatus("hosts sorted by %s", fleetSorts[t.sortBy])
		case key.Matches(m, fkFilter):
			return t.filter.Start()
		case key.Matches(m, fkRefresh):
			if !t.busy {
				return t.fetch(c)
			}
		case key.Matches(m, fkLive):
			return t.showLocal(c)
		case key.Matches(m, kExport):
			return exportFleet(c, t)
		default:
			widget.ListMove(cur, m)
		}
	}
	return nil
}

// showLocal asks the Live tab to show the selected GPU (it says when the
// GPU is not local).
func (t *fleetTab) showLocal(c *tabContext) tea.Cmd {
	g := t.selectedGPU()
	if g == nil {
		c.setStatus("open a host and select a GPU first")
		return nil
	}
	c.send(focusGPUMsg{uuid: g.UUID, host: g.Host, index: g.Index})
	return nil
}

func (t *fleetTab) selectedGPU() *fleet.GPU {
	if t.level == 0 {
		return nil
	}
	h := t.openHost()
	if h == nil || t.gpus.Cursor >= len(h.gpus) {
		return nil
	}
	return h.gpus[t.gpus.Cursor]
}
