package widget

import "charm.land/bubbles/v2/key"

// Shared list keys.
var (
	KeyUp    = key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up"))
	KeyDown  = key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down"))
	KeyPgUp  = key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up"))
	KeyPgDn  = key.NewBinding(key.WithKeys("pgdown", "ctrl+d"), key.WithHelp("pgdn", "page down"))
	KeyHome  = key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("home/g", "first"))
	KeyEnd   = key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("end/G", "last"))
	KeyEnter = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open"))
	KeyBack  = key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back"))
)

// ListMove applies the shared list keys to a scroller; false if the key is
// not one of them.
func ListMove(s *Scroller, msg any) bool {
	k, ok := msg.(interface{ String() string })
	if !ok {
		return false
	}
	switch {
	case key.Matches(k, KeyUp):
		s.Move(-1)
	case key.Matches(k, KeyDown):
		s.Move(1)
	case key.Matches(k, KeyPgUp):
		s.Page(-1)
	case key.Matches(k, KeyPgDn):
		s.Page(1)
	case key.Matches(k, KeyHome):
		s.Home()
	case key.Matches(k, KeyEnd):
		s.End()
	default:
		return false
	}
	return true
}
