package widget

import (
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

// Filter is a tab's "/" filter: a line of input that, while the user
// types in it, takes every key (the tab says so by its capturing), and
// the query it leaves. Enter keeps the query, esc clears it, and the tab
// filters again whenever Update says the query changed. The Top, Traces,
// Live and Fleet tabs each carried a copy of these rules.
type Filter struct {
	in     textinput.Model
	typing bool
	query  string
}

// NewFilter is an empty filter whose line shows placeholder until typed in.
func NewFilter(placeholder string) Filter {
	in := textinput.New()
	in.Prompt = "/"
	in.Placeholder = placeholder
	return Filter{in: in}
}

// Typing says whether the filter takes the keys.
func (f *Filter) Typing() bool { return f.typing }

// Query is the text rows are filtered by ("" for none).
func (f *Filter) Query() string { return f.query }

// SetWidth sets the input line's width in cells.
func (f *Filter) SetWidth(w int) { f.in.SetWidth(w) }

// Start begins typing, from the query kept.
func (f *Filter) Start() tea.Cmd {
	f.typing = true
	f.in.SetValue(f.query)
	return f.in.Focus()
}

// Clear empties the query (esc outside the line); false when it was
// empty already, so that esc can go back a level instead.
func (f *Filter) Clear() bool {
	if f.query == "" {
		return false
	}
	f.query = ""
	f.in.SetValue("")
	return true
}

// Update hands msg to the line while typing: enter stops, keeping the
// query; esc stops and clears it. changed says the query is not what it
// was.
func (f *Filter) Update(msg tea.Msg) (cmd tea.Cmd, changed bool) {
	if m, ok := msg.(tea.KeyPressMsg); ok {
		switch m.String() {
		case "esc":
			f.typing = false
			f.in.Blur()
			return nil, f.Clear()
		case "enter":
			f.typing = false
			f.in.Blur()
			return nil, false
		}
	}
	f.in, cmd = f.in.Update(msg)
	if v := f.in.Value(); v != f.query {
		f.query = v
		return cmd, true
	}
	return cmd, false
}

// View is the input line.
func (f *Filter) View() string { return f.in.View() }
