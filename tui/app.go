// Package tui is memscope's terminal explorer: a Bubble Tea program with one
// tab per view (Traces, Snapshot, Top consumers, Live, Timeline) over the
// shared workspace of package model.
package tui

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/model"
	"memscope/nvml"
	"memscope/snapshot"
	"memscope/tui/widget"
)

// Options configure the explorer.
type Options struct {
	// Demo says the data is bundled sample data (shown in the status line).
	Demo bool
	// Live is the GPU source for the Live tab; nil shows why there is none.
	Live nvml.Source
	// LiveErr explains why there is no live source.
	LiveErr error
	// Interval is the live sampling interval; History how much of it the
	// Live charts keep (0: 30 minutes).
	Interval time.Duration
	History  time.Duration
	// ExportDir is where `e` writes pictures and tables.
	ExportDir string
	// Fleet, when set, adds the Fleet tab: the cluster from Prometheus.
	Fleet FleetSource
}

// tab is one view of the explorer. It sees the program only through the
// context it is handed, and reaches anything outside itself by sending
// messages (context.go).
type tab interface {
	id() tabID
	name() string
	resize(w, h int)
	// update handles keys, mouse messages (mouse Y relative to the body)
	// and the messages sent to the tab.
	update(c *tabContext, msg tea.Msg) tea.Cmd
	// view draws the tab; it changes nothing.
	view(c *tabContext) string
	help() []key.Binding
	// capturing is true while the tab takes text input (a filter): global
	// single-letter keys go to the tab then.
	capturing() bool
}

// overlay is a modal view over the body (help, picker, stack, diff).
type overlay interface {
	update(c *tabContext, msg tea.Msg) (closed bool, cmd tea.Cmd)
	view(c *tabContext, w, h int) string
	help() []key.Binding
}

// App is the root Bubble Tea model.
type App struct {
	// c is what the tabs see: the theme, the sources, the selection.
	c      tabContext
	ws     *model.Workspace
	w, h   int
	active tabID
	// tabChosen is set once the user picks a tab; until then the explorer
	// follows what was opened (fitTab).
	tabChosen bool
	tabs      []tab // in the tab bar's order

	traces   *tracesTab
	snap     *snapTab
	top      *topTab
	live     *liveTab
	timeline *timelineTab
	fleet    *fleetTab // nil without --prometheus

	overlay  overlay
	showHelp bool
	// helpOff is the first line of the help shown (it scrolls when the
	// window is shorter than the help).
	helpOff int
	keys    globalKeys

	// chosen marks selections the user made (kept); others follow the
	// default preference as sources finish loading.
	traceChosen, snapChosen bool
	status                  string
	statusUntil             time.Time
	internalErr             string
	// panics counts the panics Update and View caught (tests fail on any).
	panics int
	// cmd is the open command line (nil: closed).
	cmd *cmdLine
	// pendingDiff holds the two snapshots of a diff asked for while one
	// was not loaded (0s: none); it opens when both are.
	pendingDiff [2]int
	// started is when the explorer opened: a snapshot written after it
	// arrived while the user watched (see pickSnapshot).
	started time.Time
	// announced is the newer snapshot the status line last announced
	// while the user kept another (keepShown).
	announced int
}

type wsChangedMsg struct{}

// New builds the explorer over a workspace.
func New(ctx context.Context, ws *model.Workspace, opts Options) *App {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	a := &App{c: tabContext{ctx: ctx, opts: opts, th: widget.NewTheme(true)}, ws: ws, w: 80, h: 24, started: time.Now()}
	a.traces = newTracesTab()
	a.snap = newSnapTab()
	a.top = newTopTab()
	a.live = newLiveTab(opts)
	a.timeline = newTimelineTab()
	a.tabs = []tab{a.traces, a.snap, a.top, a.live, a.timeline}
	if opts.Fleet != nil {
		a.fleet = newFleetTab(opts.Fleet)
		a.tabs = append(a.tabs, a.fleet)
	}
	a.keys = newGlobalKeys(len(a.tabs))
	a.c.sources = ws.Sources()
	a.refresh()
	a.resize()
	a.prepareActive()
	return a
}

// Run runs the explorer until the user quits. The terminal is restored on
// every exit, panics included (Bubble Tea catches them and restores it).
func Run(ctx context.Context, ws *model.Workspace, opts Options) error {
	a := New(ctx, ws, opts)
	p := tea.NewProgram(a, tea.WithContext(ctx))
	_, err := p.Run()
	if err != nil && ctx.Err() != nil {
		return nil // interrupted: a normal way out
	}
	return err
}

func waitChange(ws *model.Workspace) tea.Cmd {
	return func() tea.Msg {
		<-ws.Changed()
		return wsChangedMsg{}
	}
}

// Init starts listening to the workspace, asks for the background colour
// and starts the live sampler.
func (a *App) Init() tea.Cmd {
	cmds := []tea.Cmd{waitChange(a.ws), tea.RequestBackgroundColor, a.call(a.live.init)}
	if a.fleet != nil {
		cmds = append(cmds, a.call(a.fleet.fetch))
	}
	return tea.Batch(cmds...)
}

func (a *App) bodyHeight() int { return max(1, a.h-2) }

func (a *App) resize() {
	for _, t := range a.tabs {
		t.resize(a.w, a.bodyHeight())
	}
}

// setStatus shows a transient message in the status line.
func (a *App) setStatus(format string, args ...any) {
	// Statuses name files and carry errors about them: escaped here, as
	// everything from a file is where it is placed.
	a.status = safe(fmt.Sprintf(format, args...))
	a.statusUntil = time.Now().Add(6 * time.Second)
}

// call runs f (a tab's or overlay's method) with the tabs' context, then
// delivers the messages f sent, in order; what they start comes back as
// one command.
func (a *App) call(f func(c *tabContext) tea.Cmd) tea.Cmd {
	a.c.out = nil
	cmds := []tea.Cmd{f(&a.c)}
	for len(a.c.out) > 0 {
		msgs := a.c.out
		a.c.out = nil
		for _, m := range msgs {
			cmds = append(cmds, a.handle(m))
		}
	}
	return tea.Batch(cmds...)
}

// handle acts on a message a tab, overlay or command sent.
func (a *App) handle(msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case statusMsg:
		a.setStatus("%s", string(m))
	case switchTabMsg:
		if a.tab(m.id) != nil {
			a.active, a.tabChosen = m.id, true
		}
	case toTab:
		if t := a.tab(m.id); t != nil {
			return a.call(func(c *tabContext) tea.Cmd { return t.update(c, m.msg) })
		}
	case selectSourceMsg:
		if s := a.source(m.id); s != nil {
			a.selectSource(s)
		}
	case selectDeviceMsg:
		a.c.sel.dev = m.dev
		a.refresh()
	case openSnapshotMsg:
		a.c.snapSel, a.snapChosen = a.ws.OpenSnapshot(m.path), true
		a.refresh()
	case openPathMsg:
		before := len(a.ws.Sources())
		a.ws.Open(m.path)
		a.refresh()
		a.setStatus("opening %s (%d new sources; o lists them)", safe(m.path), len(a.ws.Sources())-before)
	case reloadMsg:
		if s := a.source(m.id); s != nil && s.State == model.Unloaded {
			a.ws.Use(append(a.inView(), m.id)...) // loads it; Reload waits for a use
			return nil
		}
		a.ws.Reload(m.id)
	case diffWhenLoadedMsg:
		a.pendingDiff = [2]int{m.x, m.y}
		a.refresh()
	case openOverlayMsg:
		a.overlay = m.o
	case showHelpMsg:
		a.showHelp, a.helpOff = true, 0
	case quitMsg:
		return tea.Quit
	case focusGPUMsg:
		return a.handle(toTab{tabLive, m})
	case localGPUsMsg:
		return a.handle(toTab{tabFleet, m})
	case openRankMsg:
		// Traces first when it is in front or no snapshot is open, else
		// the Snapshot tab (a rank folder or one of its ranks).
		if a.active == tabTraces || a.source(a.c.snapSel) == nil {
			if a.active != tabTraces {
				m.orElse = ptr(tabSnapshot)
			}
			return a.handle(toTab{tabTraces, m})
		}
		if a.source(a.c.traceSel) != nil {
			m.orElse = ptr(tabTraces) // no rank folder there: the traces' rank
		}
		return a.handle(toTab{tabSnapshot, m})
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// tab is the tab with the id, nil when the explorer has none (Fleet
// without --prometheus).
func (a *App) tab(id tabID) tab {
	for _, t := range a.tabs {
		if t.id() == id {
			return t
		}
	}
	return nil
}

// refresh re-reads the sources and hands changed ones to the tabs.
func (a *App) refresh() {
	a.c.sources = a.ws.Sources()
	a.c.traceSel = a.pickTrace(a.c.traceSel, a.traceChosen)
	prev := a.c.snapSel
	a.c.snapSel = a.pickSnapshot(prev, a.snapChosen)
	if s, p := a.source(a.c.snapSel), a.source(prev); s != nil && p != nil && s.ID != p.ID && s.ModTime.After(a.started) {
		a.setStatus("now showing %s, the newest (o: choose one)", safe(s.Name()))
	}
	a.announceNewer()
	a.ws.Use(a.inView()...)
	a.openPendingDiff()
	snap := a.source(a.c.snapSel)
	// The Snapshot tab first: a new file may change the device the
	// others then follow.
	a.call(func(c *tabContext) tea.Cmd {
		a.traces.setSource(c, a.source(a.c.traceSel))
		a.snap.setSource(c, snap)
		return nil
	})
	a.call(func(c *tabContext) tea.Cmd {
		a.top.setSource(c, snap)
		a.timeline.setSource(c, snap)
		return nil
	})
	if !a.tabChosen {
		a.active = a.fitTab()
	}
	a.ws.Released() // the tabs hold the new data only
}

// inView lists the sources the explorer shows or waits for, which the
// workspace keeps in memory (Workspace.Use): the snapshot tabs' source, a
// pending diff's two and, for an estimate, the snapshots of its rank that
// its view sets beside it.
func (a *App) inView() []int {
	ids := []int{a.c.snapSel, a.pendingDiff[0], a.pendingDiff[1]}
	if s := a.source(a.c.snapSel); s != nil && s.Kind == model.KindEstimate {
		if rank := snapshot.ParseLabel(s.Path).Rank; rank >= 0 {
			for _, o := range a.c.sources {
				if o.Kind == model.KindSnapshot && snapshot.ParseLabel(o.Path).Rank == rank {
					ids = append(ids, o.ID)
				}
			}
		}
	}
	return ids
}

// openPendingDiff opens the diff asked for once both its snapshots are
// loaded, and forgets it when one failed or went away.
func (a *App) openPendingDiff() {
	if a.pendingDiff[0] == 0 {
		return
	}
	x, y := a.source(a.pendingDiff[0]), a.source(a.pendingDiff[1])
	switch {
	case x == nil || y == nil || x.State == model.Failed || y.State == model.Failed:
		a.pendingDiff = [2]int{}
		a.setStatus("diff cancelled: a marked snapshot failed to load or went away")
	case x.State == model.Loaded && y.State == model.Loaded:
		a.pendingDiff = [2]int{}
		a.overlay = newDiffOverlay(x, y)
	}
}

// Update handles one message. A panic in a view's code is caught and shown
// instead of ending the program.
func (a *App) Update(msg tea.Msg) (m tea.Model, cmd tea.Cmd) {
	defer func() {
		if r := recover(); r == nil {
			a.prepareActive()
		} else {
			a.panics++
			a.internalErr = fmt.Sprintf("internal error: %v", r)
			if os.Getenv("MEMSCOPE_DEBUG") != "" {
				a.internalErr += "\n" + string(debug.Stack())
			}
			m, cmd = a, nil
		}
	}()
	switch msg := msg.(type) {
	case editorDoneMsg:
		if msg.err != nil {
			a.setStatus("editor: %v", msg.err)
		}
		return a, nil
	case tea.WindowSizeMsg:
		a.w, a.h = msg.Width, msg.Height
		a.resize()
		return a, nil
	case tea.BackgroundColorMsg:
		a.c.th = widget.NewTheme(msg.IsDark())
		return a, nil
	case wsChangedMsg:
		a.refresh()
		return a, waitChange(a.ws)
	case statusMsg:
		a.setStatus("%s", string(msg))
		return a, nil
	case liveMsg:
		return a, a.call(func(c *tabContext) tea.Cmd { return a.live.onSample(c, msg) })
	case fleetLatestMsg, fleetHistoryMsg, fleetTickMsg:
		if a.fleet != nil {
			return a, a.call(func(c *tabContext) tea.Cmd { return a.fleet.onMsg(c, msg) })
		}
		return a, nil
	case stateTick:
		return a, a.timeline.onStateTick(msg)
	case stateMsg:
		a.timeline.onState(msg)
		return a, nil
	case tea.KeyPressMsg:
		return a, a.onKey(msg)
	case tea.MouseClickMsg:
		return a, a.onMouse(msg, msg.Mouse())
	case tea.MouseWheelMsg:
		return a, a.onMouse(msg, msg.Mouse())
	}
	return a, nil
}

func (a *App) onKey(msg tea.KeyPressMsg) tea.Cmd {
	if a.internalErr != "" {
		a.internalErr = ""
		return nil
	}
	if key.Matches(msg, a.keys.forceQuit) {
		return tea.Quit
	}
	if key.Matches(msg, a.keys.suspend) {
		// Back to the shell as any terminal program (SIGTSTP); `fg`
		// resumes and Bubble Tea repaints.
		return tea.Suspend
	}
	if a.cmd != nil {
		var done bool
		cmd := a.call(func(c *tabContext) (cmd tea.Cmd) {
			done, cmd = a.cmd.update(a, c, msg)
			return cmd
		})
		if done {
			a.cmd = nil
		}
		return cmd
	}
	if a.showHelp {
		// Scroll keys scroll a help taller than the window; any other
		// key closes it.
		switch msg.String() {
		case "up", "k":
			a.helpOff = max(0, a.helpOff-1)
			return nil
		case "down", "j":
			a.helpOff++
			return nil
		case "pgup":
			a.helpOff = max(0, a.helpOff-a.bodyHeight()/2)
			return nil
		case "pgdown", "space":
			a.helpOff += a.bodyHeight() / 2
			return nil
		case "home":
			a.helpOff = 0
			return nil
		}
		a.showHelp = false
		if key.Matches(msg, a.keys.quit) && msg.String() == "q" {
			return tea.Quit
		}
		return nil
	}
	if a.overlay != nil {
		// No overlay takes text, so ? is the help here too, as the footer
		// says: it lists the overlay's keys ("This view").
		if key.Matches(msg, a.keys.help) {
			a.showHelp, a.helpOff = true, 0
			return nil
		}
		return a.overlayUpdate(msg)
	}
	t := a.tab(a.active)
	if t.capturing() {
		a.keepShown()
		return a.call(func(c *tabContext) tea.Cmd { return t.update(c, msg) })
	}
	// A message about one tab's action ("exported …") does not follow the
	// user to another tab.
	before := a.active
	defer func() {
		if a.active != before {
			a.status = ""
		}
	}()
	switch {
	case key.Matches(msg, a.keys.quit):
		return tea.Quit
	case key.Matches(msg, a.keys.help):
		a.showHelp, a.helpOff = true, 0
		return nil
	case key.Matches(msg, a.keys.next):
		a.active, a.tabChosen = a.tabs[(a.position()+1)%len(a.tabs)].id(), true
		return nil
	case key.Matches(msg, a.keys.prev):
		a.active, a.tabChosen = a.tabs[(a.position()+len(a.tabs)-1)%len(a.tabs)].id(), true
		return nil
	case key.Matches(msg, a.keys.sources):
		a.overlay = newPicker(&a.c, a.active == tabTraces)
		return nil
	case key.Matches(msg, kCommand):
		a.cmd = newCmdLine()
		return nil
	}
	if s := msg.String(); len(s) == 1 && s[0] >= '1' && s[0] <= '0'+byte(len(a.tabs)) {
		a.active, a.tabChosen = a.tabs[s[0]-'1'].id(), true
		return nil
	}
	a.keepShown()
	return a.call(func(c *tabContext) tea.Cmd { return t.update(c, msg) })
}

// preparer is a tab that does the work of its next frame in prepare, which
// the App calls after each message while the tab is in front (views only
// draw).
type preparer interface{ prepare() }

func (a *App) prepareActive() {
	if p, ok := a.tab(a.active).(preparer); ok {
		p.prepare()
	}
}

// position is the active tab's place in the tab bar.
func (a *App) position() int {
	for i, t := range a.tabs {
		if t.id() == a.active {
			return i
		}
	}
	return 0
}

// overlayUpdate hands a message to the overlay, closing it when it says.
func (a *App) overlayUpdate(msg tea.Msg) tea.Cmd {
	o := a.overlay
	var closed bool
	cmd := a.call(func(c *tabContext) (cmd tea.Cmd) {
		closed, cmd = o.update(c, msg)
		return cmd
	})
	// The overlay may have opened another in its place (the picker's
	// diff): only close the one that said so.
	if closed && a.overlay == o {
		a.overlay = nil
	}
	return cmd
}

func (a *App) activeSource() *model.Source {
	switch a.active {
	case tabTraces:
		return a.source(a.c.traceSel)
	case tabSnapshot, tabTop, tabTimeline:
		return a.source(a.c.snapSel)
	}
	return nil
}
