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

	"memscope/tui/widget"
)

var kCommand = key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "command line (:timeline, :rank 3, :open PATH, :export; tab completes)"))

// command is one thing the command line does. It acts by sending
// messages, as tabs do; an error is shown in the status line.
type command struct {
	name, arg, help string
	run             func(a *App, c *tabContext, arg string) error
	// complete lists the completions of a partial argument (nil: none).
	complete func(a *App, arg string) []string
}

// quitMsg ends the program (the command line's :quit).
type quitMsg struct{}

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
	for _, t := range a.tabs {
		id := t.id()
		out = append(out, command{name: strings.ToLower(t.name()), help: "go to the " + t.name() + " tab",
			run: func(_ *App, c *tabContext, _ string) error { c.send(switchTabMsg{id}); return nil }})
	}
	out = append(out,
		command{name: "rank", arg: "N", help: "open rank N (a rank folder: in this iteration; Traces: its detail)",
			run: cmdRank, complete: completeRank},
		command{name: "open", arg: "PATH", help: "open a file or folder", run: cmdOpen, complete: completePath},
		command{name: "export", help: "export this view (as e does)", run: func(a *App, c *tabContext, _ string) error {
			if t := a.tab(a.active); slices.ContainsFunc(t.help(), func(b key.Binding) bool { return slices.Contains(b.Keys(), "e") }) {
				c.send(toTab{t.id(), exportMsg{}})
				return nil
			}
			return fmt.Errorf("the %s tab has nothing to export", a.tab(a.active).name())
		}},
		command{name: "stages", help: "the Timeline's annotated stages, leak suspects and pending frees", run: func(_ *App, c *tabContext, _ string) error {
			c.send(switchTabMsg{tabTimeline}, toTab{tabTimeline, showStagesMsg{}})
			return nil
		}},
		command{name: "sources", help: "the sources (pick, errors, diff)", run: func(a *App, c *tabContext, _ string) error {
			c.send(openOverlayMsg{newPicker(c, a.active == tabTraces)})
			return nil
		}},
		command{name: "help", help: "the keys of this view", run: func(_ *App, c *tabContext, _ string) error { c.send(showHelpMsg{}); return nil }},
		command{name: "quit", help: "leave memscope", run: func(_ *App, c *tabContext, _ string) error { c.send(quitMsg{}); return nil }},
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

func (l *cmdLine) update(a *App, c *tabContext, msg tea.KeyPressMsg) (done bool, cmd tea.Cmd) {
	switch msg.String() {
	case "esc", "ctrl+c":
		return true, nil
	case "enter":
		line := strings.TrimSpace(l.in.Value())
		if line == "" {
			return true, nil
		}
		name, arg, _ := strings.Cut(line, " ")
		cm, err := a.findCommand(name)
		if err == nil {
			err = cm.run(a, c, strings.TrimSpace(arg))
		}
		if err != nil {
			c.setStatus("%s", safe(err.Error()))
		}
		return true, nil
	case "tab":
		l.completeLine(a)
		return false, nil
	}
	l.cands = nil
	var tc tea.Cmd
	l.in, tc = l.in.Update(msg)
	return false, tc
}

// completeLine completes the command name, or its argument once the name
// is complete: the longest common prefix of the candidates goes into the
// line, and the candidates are shown.
func (l *cmdLine) completeLine(a *App) {
	line := l.in.Value()
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
	l.cands = cands
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
		l.in.SetValue(prefix + common)
		l.in.CursorEnd()
	}
}

func (l *cmdLine) view(c *tabContext, w int) string {
	s := l.in.View()
	if len(l.cands) > 0 {
		shown := l.cands
		more := ""
		if len(shown) > 12 {
			shown, more = shown[:12], fmt.Sprintf(" … %d more", len(l.cands)-12)
		}
		s += "   " + c.th.Dim.Render(safe(strings.Join(shown, "  "))+more)
	}
	return widget.Fit(s, w)
}

// cmdRank opens rank N: on a rank folder (or one of its ranks), the rank's
// snapshot in the iteration shown; on Traces, that rank's detail. The App
// asks the tab that fits (openRankMsg).
func cmdRank(_ *App, c *tabContext, arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil {
		return fmt.Errorf("rank wants a number, not %q", arg)
	}
	c.send(openRankMsg{n: n})
	return nil
}

// completeRank lists the ranks the Snapshot tab's rank folder has, else
// the Traces tab's.
func completeRank(a *App, arg string) []string {
	seen := map[string]bool{}
	var out []string
	ranks := a.snap.rankNumbers(&a.c)
	if ranks == nil {
		ranks = a.traces.rankNumbers()
	}
	for _, r := range ranks {
		s := strconv.Itoa(r)
		if strings.HasPrefix(s, arg) && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func cmdOpen(_ *App, c *tabContext, arg string) error {
	if arg == "" {
		return fmt.Errorf("open wants a path")
	}
	p := expandHome(arg)
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("open %s: %v", arg, err)
	}
	c.send(openPathMsg{p})
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
