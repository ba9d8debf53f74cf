package tui

import "charm.land/bubbles/v2/key"

type globalKeys struct {
	quit, forceQuit, suspend, help, next, prev, sources, tabs key.Binding
}

func newGlobalKeys(tabs int) globalKeys {
	var digits []string
	for i := 1; i <= tabs && i <= 9; i++ {
		digits = append(digits, itoa(i))
	}
	return globalKeys{
		quit:      key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
		forceQuit: key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
		suspend:   key.NewBinding(key.WithKeys("ctrl+z"), key.WithHelp("ctrl+z", "suspend (fg resumes)")),
		help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		next:      key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next tab")),
		prev:      key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous tab")),
		sources:   key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "sources (pick, errors, diff)")),
		tabs:      key.NewBinding(key.WithKeys(digits...), key.WithHelp("1-"+itoa(tabs), "go to tab")),
	}
}

func (k globalKeys) list() []key.Binding {
	return []key.Binding{k.tabs, k.next, k.prev, k.sources, kCommand, k.help, k.quit, k.forceQuit, k.suspend}
}

var kExport = key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "export picture + table"))
