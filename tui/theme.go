package tui

import (
	"image/color"
	"os"

	"charm.land/lipgloss/v2"

	"memscope/internal/palette"
)

// theme holds the styles. It adapts to the terminal background and honours
// NO_COLOR (then only bold/reverse mark things, never colour alone).
type theme struct {
	dark    bool
	noColor bool

	title, dim, bold, accent, warn, errS, ok, sel, header, tabOn, tabOff, status, key lipgloss.Style
}

func newTheme(dark bool) theme {
	t := theme{dark: dark, noColor: os.Getenv("NO_COLOR") != ""}
	ld := lipgloss.LightDark(dark)
	c := func(light, dk string) color.Color { return ld(lipgloss.Color(light), lipgloss.Color(dk)) }
	t.title = lipgloss.NewStyle().Bold(true)
	t.bold = lipgloss.NewStyle().Bold(true)
	t.dim = lipgloss.NewStyle().Foreground(c("#6C6C6C", "#8A8A8A"))
	t.accent = lipgloss.NewStyle().Foreground(c("#0060A0", "#5FAFFF"))
	t.warn = lipgloss.NewStyle().Foreground(c("#A05A00", "#FFAF00"))
	t.errS = lipgloss.NewStyle().Foreground(c("#C00000", "#FF5F5F")).Bold(true)
	t.ok = lipgloss.NewStyle().Foreground(c("#007A3D", "#5FD787"))
	t.sel = lipgloss.NewStyle().Reverse(true)
	t.header = lipgloss.NewStyle().Bold(true).Underline(true)
	t.tabOn = lipgloss.NewStyle().Bold(true).Reverse(true).Padding(0, 1)
	t.tabOff = lipgloss.NewStyle().Padding(0, 1).Foreground(c("#444444", "#B2B2B2"))
	t.status = lipgloss.NewStyle().Reverse(true)
	t.key = lipgloss.NewStyle().Bold(true)
	if t.noColor {
		plain := lipgloss.NewStyle()
		t.dim, t.accent, t.ok = plain, plain, plain
		t.warn = plain.Bold(true)
		t.errS = plain.Bold(true)
		t.tabOff = plain.Padding(0, 1)
	}
	return t
}

// fg is a style with a palette colour (plain under NO_COLOR).
func (t theme) fg(hex string) lipgloss.Style {
	if t.noColor {
		return lipgloss.NewStyle()
	}
	return lipgloss.NewStyle().Foreground(lipgloss.Color(hex))
}

func (t theme) category(name string) lipgloss.Style { return t.fg(palette.Category(name)) }
