package widget

import (
	"testing"

	tea "charm.land/bubbletea/v2"
)

// keyPress is a key press as the terminal sends it: "enter", "esc",
// "backspace", or one printable character.
func keyPress(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	}
	return tea.KeyPressMsg{Code: []rune(k)[0], Text: k}
}

// TestFilter drives a filter as the tabs do: "/" (Start), keys while it
// types, and esc outside it (Clear). Each step says whether it types
// after, the query, and whether the tab must filter again.
func TestFilter(t *testing.T) {
	type step struct {
		do      string // "start", "clear", or a key while typing
		typing  bool
		query   string
		changed bool // the tab filters again (Update's changed; Clear's result)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"typed, kept by enter", []step{
			{"start", true, "", false}, {"a", true, "a", true}, {"b", true, "ab", true},
			{"enter", false, "ab", false},
		}},
		{"esc while typing clears", []step{
			{"start", true, "", false}, {"x", true, "x", true}, {"esc", false, "", true},
		}},
		{"esc with nothing typed changes nothing", []step{
			{"start", true, "", false}, {"esc", false, "", false},
		}},
		{"a kept query is where typing starts again", []step{
			{"start", true, "", false}, {"g", true, "g", true}, {"enter", false, "g", false},
			{"start", true, "g", false}, {"p", true, "gp", true}, {"backspace", true, "g", true},
			{"enter", false, "g", false},
		}},
		{"esc outside the line clears once, then says there was nothing", []step{
			{"start", true, "", false}, {"z", true, "z", true}, {"enter", false, "z", false},
			{"clear", false, "", true}, {"clear", false, "", false},
			{"start", true, "", false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFilter("anything")
			for i, s := range tc.steps {
				var changed bool
				switch s.do {
				case "start":
					f.Start()
				case "clear":
					changed = f.Clear()
				default:
					if !f.Typing() {
						t.Fatalf("step %d: %q typed into a filter that is not typing", i, s.do)
					}
					_, changed = f.Update(keyPress(s.do))
				}
				if f.Typing() != s.typing || f.Query() != s.query || changed != s.changed {
					t.Errorf("step %d (%s): typing %v, query %q, changed %v; want %v, %q, %v",
						i, s.do, f.Typing(), f.Query(), changed, s.typing, s.query, s.changed)
				}
			}
		})
	}
}
