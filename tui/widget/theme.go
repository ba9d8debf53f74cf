package widget

import (
	"image/color"
	"os"

	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
)

// Theme holds the styles. It adapts to the terminal background and honours
// NO_COLOR (then only bold/reverse mark things, never colour alone).
type Theme struct {
	Dark    bool
	NoColor bool

	Title, Dim, Bold, Accent, Warn, Err, OK, Sel, Header, TabOn, TabOff, Status, Key lipgloss.Style
}

// NewTheme builds the styles for a dark or light background (NO_COLOR
// read from the environment).
func NewTheme(dark bool) Theme {
	t := Theme{Dark: dark, NoColor: os.Getenv("NO_COLOR") != ""}
	ld := lipgloss.LightDark(dark)
	c := func(light, dk string) color.Color { return ld(lipgloss.Color(light), lipgloss.Color(dk)) }
	t.Title = lipgloss.NewStyle().Bold(true)
	t.Bold = lipgloss.NewStyle().Bold(true)
	t.Dim = lipgloss.NewStyle().Foreground(c("#6C6C6C", "#8A8A8A"))
	t.Accent = lipgloss.NewStyle().Foreground(c("#0060A0", "#5FAFFF"))
	t.Warn = lipgloss.NewStyle().Foreground(c("#A05A00", "#FFAF00"))
	t.Err = lipgloss.NewStyle().Foreground(c("#C00000", "#FF5F5F")).Bold(true)
	t.OK = lipgloss.NewStyle().Foreground(c("#007A3D", "#5FD787"))
	t.Sel = lipgloss.NewStyle().Reverse(true)
	t.Header = lipgloss.NewStyle().Bold(true).Underline(true)
	t.TabOn = lipgloss.NewStyle().Bold(true).Reverse(true).Padding(0, 1)
	t.TabOff = lipgloss.NewStyle().Padding(0, 1).Foreground(c("#444444", "#B2B2B2"))
	t.Status = lipgloss.NewStyle().Reverse(true)
	t.Key = lipgloss.NewStyle().Bold(true)
	if t.NoColor {
		plain := lipgloss.NewStyle()
		t.Dim, t.Accent, t.OK = plain, plain, plain
		t.Warn = plain.Bold(true)
		t.Err = plain.Bold(true)
		t.TabOff = plain.Padding(0, 1)
	}
	return t
}

// Fg is a style with a palette colour (plain under NO_COLOR).
func (t Theme) Fg(hex string) lipgloss.Style {
	if t.NoColor {
		return lipgloss.NewStyle()
	}
	return lipgloss.NewStyle().Foreground(lipgloss.Color(hex))
}

// Category is the style of a category or role, in the palette the pictures
// use too.
func (t Theme) Category(name string) lipgloss.Style { return t.Fg(palette.Category(name)) }
