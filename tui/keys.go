package tui

import "charm.land/bubbles/v2/key"

type globalKeys struct {
	quit, forceQuit, help, next, prev, sources, tabs key.Binding
}

func newGlobalKeys(tabs int) globalKeys {
	var digits []string
	for i := 1; i <= tabs && i <= 9; i++ {
		digits = append(digits, itoa(i))
	}
	return globalKeys{
		quit:      key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
		forceQuit: key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
		help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		next:      key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next tab")),
		prev:      key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous tab")),
		sources:   key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "sources (pick, errors, diff)")),
		tabs:      key.NewBinding(key.WithKeys(digits...), key.WithHelp("1-"+itoa(tabs), "go to tab")),
	}
}

func (k globalKeys) list() []key.Binding {
	return []key.Binding{k.tabs, k.next, k.prev, k.sources, kCommand, k.help, k.quit, k.forceQuit}
}

// Shared list keys.
var (
	kUp     = key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up"))
	kDown   = key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down"))
	kPgUp   = key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up"))
	kPgDn   = key.NewBinding(key.WithKeys("pgdown", "ctrl+d"), key.WithHelp("pgdn", "page down"))
	kHome   = key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("home/g", "first"))
	kEnd    = key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end/G", "last"))
	kEnter  = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open"))
	kBack   = key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back"))
	kExport = key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "export picture + table"))
)

// listMove applies the shared list keys to a scroller; false if the key is
// not one of them.
func listMove(s *scroller, msg any) bool {
	k, ok := msg.(interface{ String() string })
	if !ok {
		return false
	}
	switch {
	case key.Matches(k, kUp):
		s.move(-1)
	case key.Matches(k, kDown):
		s.move(1)
	case key.Matches(k, kPgUp):
		s.page(-1)
	case key.Matches(k, kPgDn):
		s.page(1)
	case key.Matches(k, kHome):
		s.home()
	case key.Matches(k, kEnd):
		s.end()
	default:
		return false
	}
	return true
}
