// Package textsafe makes strings from files safe to print on a terminal.
//
// Frame names, paths, annotations and labels come from files anyone can
// write. Printed raw, an ESC or C1 control character in them can set the
// window title, clear the screen or worse, so every such string passes
// through Safe before it reaches the terminal (JSON output stays exact: the
// encoder escapes control characters itself).
package textsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Safe returns s with every C0 control character (tab and newline
// included), DEL and C1 control character written as a visible escape such
// as \x1b or \u009b, and invalid UTF-8 bytes as \xNN. Strings with nothing
// to escape are returned as they are, without copying.
func Safe(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Lines is Safe for multi-line text: newlines stay, every other control
// character is escaped.
func Lines(s string) string {
	if clean(strings.ReplaceAll(s, "\n", "")) {
		return s
	}
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		parts[i] = Safe(p)
	}
	return strings.Join(parts, "\n")
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c >= 0x80 {
			if c >= 0x80 {
				return cleanUTF8(s[i:])
			}
			return false
		}
	}
	return true
}

func cleanUTF8(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
		i += n
	}
	return true
}
