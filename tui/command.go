package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"memscope/model"
	"memscope/snapshot"
)

var kCommand = key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "command line (:timeline, :rank 3, :open PATH, :export; tab completes)"))

// command is one thing the command line does.
type command struct {
	name, arg, help string
	run             func(a *App, arg string) error
	// complete lists the completions of a partial argument (nil: none).
	complete func(a *App, arg string) []string
}

// cmdLine is the k9s-style command line: ":" opens it in the status line,
// tab completes, enter runs, esc closes.
type cmdLine struct {
	in    textinput.Model
	cands []string // completions of the last tab, shown beside the input
}

func newCmdLine() *cmdLine {
	in := textinput.New()
	in.Prompt = ":"
	in.Placeholder = "command (tab completes)"
	in.Focus()
	return &cmdLine{in: in}
}

// commands lists what the command line knows, tabs first.
func (a *App) commands() []command {
	var out []command
	for i, t := range a.tabs {
		i := i
		out = append(out, command{name: strings.ToLower(t.name()), help: "go to the " + t.name() + " tab",
			run: func(a *App, _ string) error { a.active, a.tabChosen = i, true; return nil }})
	}
	out = append(out,
		command{name: "rank", arg: "N", help: "open rank N (a rank folder: in this iteration; Traces: its detail)",
			run: cmdRank, complete: completeRank},
		command{name: "open", arg: "PATH", help: "open a file or folder", run: cmdOpen, complete: completePath},
		command{name: "export", help: "export this view (as e does)", run: func(a *App, _ string) error {
			if t := a.tabs[a.active]; slices.ContainsFunc(t.help(), func(b key.Binding) bool { return slices.Contains(b.Keys(), "e") }) {
				a.pending = t.update(a, tea.KeyPressMsg(tea.Key{Code: 'e', Text: "e"}))
				return nil
			}
			return fmt.Errorf("the %s tab has nothing to export", a.tabs[a.active].name())
		}},
		command{name: "stages", help: "the Timeline's annotated stages, leak suspects and pending frees", run: func(a *App, _ string) error {
			a.active, a.tabChosen = 4, true
			if a.timeline.tl == nil {
				return fmt.Errorf("no allocation trace to take stages from")
			}
			a.pending = a.timeline.update(a, tea.KeyPressMsg(tea.Key{Code: 's', Text: "s"}))
			return nil
		}},
		command{name: "sources", help: "the sources (pick, errors, diff)", run: func(a *App, _ string) error { a.overlay = newPicker(a); return nil }},
		command{name: "help", help: "the keys of this view", run: func(a *App, _ string) error { a.showHelp = true; return nil }},
		command{name: "quit", help: "leave memscope", run: func(a *App, _ string) error { a.quitting = true; return nil }},
	)
	return out
}

// findCommand resolves a typed name: exact, else the only command it
// begins.
func (a *App) findCommand(name string) (command, error) {
	var hits []command
	for _, c := range a.commands() {
		if c.name == name {
			return c, nil
		}
		if strings.HasPrefix(c.name, name) {
			hits = append(hits, c)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return command{}, fmt.Errorf("no command %q (tab lists them)", name)
	}
	var names []string
	for _, h := range hits {
		names = append(names, h.name)
	}
	return command{}, fmt.Errorf("%q could be %s", name, strings.Join(names, ", "))
}

func (c *cmdLine) update(a *App, msg tea.KeyPressMsg) (done bool, cmd tea.Cmd) {
	switch msg.String() {
	case "esc", "ctrl+c":
		return true, nil
	case "enter":
		line := strings.TrimSpace(c.in.Value())
		if line == "" {
			return true, nil
		}
		name, arg, _ := strings.Cut(line, " ")
		cm, err := a.findCommand(name)
		if err == nil {
			err = cm.run(a, strings.TrimSpace(arg))
		}
		if err != nil {
			a.setStatus("%s", safe(err.Error()))
		}
		cmd, a.pending = a.pending, nil
		if a.quitting {
			return true, tea.Quit
		}
		return true, cmd
	case "tab":
		c.completeLine(a)
		return false, nil
	}
	c.cands = nil
	var tc tea.Cmd
	c.in, tc = c.in.Update(msg)
	return false, tc
}

// completeLine completes the command name, or its argument once the name
// is complete: the longest common prefix of the candidates goes into the
// line, and the candidates are shown.
func (c *cmdLine) completeLine(a *App) {
	line := c.in.Value()
	name, arg, hasArg := strings.Cut(line, " ")
	var cands []string
	prefix := ""
	if !hasArg {
		for _, cm := range a.commands() {
			if strings.HasPrefix(cm.name, name) {
				cands = append(cands, cm.name)
			}
		}
	} else if cm, err := a.findCommand(name); err == nil && cm.complete != nil {
		cands = cm.complete(a, strings.TrimLeft(arg, " "))
		prefix = cm.name + " "
	}
	c.cands = cands
	if len(cands) == 0 {
		return
	}
	common := cands[0]
	for _, s := range cands[1:] {
		for !strings.HasPrefix(s, common) {
			common = common[:len(common)-1]
		}
	}
	if len(cands) == 1 && !hasArg {
		common += " "
	}
	if prefix+common != line && len(prefix+common) >= len(line) {
		c.in.SetValue(prefix + common)
		c.in.CursorEnd()
	}
}

func (c *cmdLine) view(a *App, w int) string {
	s := c.in.View()
	if len(c.cands) > 0 {
		shown := c.cands
		more := ""
		if len(shown) > 12 {
			shown, more = shown[:12], fmt.Sprintf(" … %d more", len(c.cands)-12)
		}
		s += "   " + a.th.dim.Render(safe(strings.Join(shown, "  "))+more)
	}
	return fit(s, w)
}

// cmdRank opens rank N: on a rank folder (or one of its ranks), the rank's
// snapshot in the iteration shown; on Traces, that rank's detail.
func cmdRank(a *App, arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil {
		return fmt.Errorf("rank wants a number, not %q", arg)
	}
	if a.active == 0 || a.source(a.snapSel) == nil {
		for i, r := range a.traces.rows {
			if r.rank == n {
				a.active, a.tabChosen = 0, true
				a.traces.list.cursor = i
				a.traces.list.clamp()
				a.pending = a.traces.update(a, tea.KeyPressMsg(tea.Key{Code: tea.KeyEnter}))
				return nil
			}
		}
		if a.active == 0 {
			return fmt.Errorf("no rank %d among the traces", n)
		}
	}
	rs := a.source(a.snapSel)
	step, exit := -1, false
	if rs != nil && rs.Kind != model.KindRanks && a.snap.back != 0 && len(rs.Paths) > 0 {
		l := snapshot.ParseLabel(rs.Paths[0])
		step, exit = l.Step, l.Exit
		rs = a.source(a.snap.back)
	} else if rs != nil && rs.Kind == model.KindRanks && a.snap.ranks.iter < len(a.snap.ranks.iters) {
		k := a.snap.ranks.iters[a.snap.ranks.iter]
		step, exit = k.Step, k.Exit
	}
	if rs == nil || rs.Kind != model.KindRanks {
		return fmt.Errorf("no rank folder or traces open: memscope DIR opens a folder of per-rank snapshots")
	}
	for _, r := range (snapshot.IterationKey{Step: step, Exit: exit}).Of(rs.Ranks) {
		if r.Label.Rank == n {
			if r.Err != nil {
				return fmt.Errorf("rank %d could not be read: %v", n, r.Err)
			}
			a.active, a.tabChosen = 1, true
			a.snap.drill(a, rs.ID, r.Path)
			return nil
		}
	}
	return fmt.Errorf("no rank %d in this iteration", n)
}

func completeRank(a *App, arg string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(r int) {
		s := strconv.Itoa(r)
		if strings.HasPrefix(s, arg) && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	if s := a.source(a.snapSel); s != nil && s.Kind == model.KindRanks {
		for _, r := range a.snap.ranks.rows {
			add(r.Label.Rank)
		}
	} else if s := a.source(a.snap.back); s != nil {
		for _, r := range s.Ranks {
			add(r.Label.Rank)
		}
	} else {
		for _, r := range a.traces.rows {
			add(r.rank)
		}
	}
	return out
}

func cmdOpen(a *App, arg string) error {
	if arg == "" {
		return fmt.Errorf("open wants a path")
	}
	p := expandHome(arg)
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("open %s: %v", arg, err)
	}
	before := len(a.ws.Sources())
	a.ws.Open(p)
	a.refresh()
	a.setStatus("opening %s (%d new sources; o lists them)", arg, len(a.ws.Sources())-before)
	return nil
}

func expandHome(p string) string {
	if strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, p[2:])
		}
	}
	return p
}

// completePath lists the entries that begin arg (folders end in /).
func completePath(_ *App, arg string) []string {
	dir, base := filepath.Split(arg)
	look := expandHome(dir)
	if look == "" {
		look = "."
	}
	es, err := os.ReadDir(look)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		name := e.Name()
		if !strings.HasPrefix(name, base) || (strings.HasPrefix(name, ".") && !strings.HasPrefix(base, ".")) {
			continue
		}
		if e.IsDir() {
			name += string(filepath.Separator)
		}
		out = append(out, dir+name)
	}
	slices.Sort(out)
	return out
}
