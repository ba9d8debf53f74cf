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
		i += writeRune(&b, s, i)
	}
	return b.String()
}

// writeRune writes the rune at s[i:] to b, escaped when it is a control
// character or invalid UTF-8, and returns its length in s.
func writeRune(b *strings.Builder, s string, i int) int {
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && n <= 1:
		fmt.Fprintf(b, `\x%02x`, s[i])
	case r < 0x20 || r == 0x7f:
		fmt.Fprintf(b, `\x%02x`, r)
	case r >= 0x80 && r < 0xa0:
		fmt.Fprintf(b, `\u%04x`, r)
	default:
		b.WriteString(s[i : i+n])
	}
	return n
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

// Styled is Lines for text the program has already styled: SGR sequences
// (ESC [ digits ; : m), which only set colours and attributes, are kept,
// and every other control character, other escape sequences included, is
// written visibly. It is the last safety net before a frame reaches the
// terminal; strings from files are still escaped where they are placed
// (Safe), so a file cannot even change colours.
func Styled(s string) string {
	if clean(strings.ReplaceAll(strings.ReplaceAll(s, "\n", ""), "\x1b", "")) && !hasNonSGR(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		if s[i] == '\n' {
			b.WriteByte('\n')
			i++
			continue
		}
		if n := sgrLen(s[i:]); n > 0 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		i += writeRune(&b, s, i)
	}
	return b.String()
}

// sgrLen is the length of the SGR sequence s starts with, or 0.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9' || c == ';' || c == ':':
		case c == 'm':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}

// hasNonSGR reports whether s holds an ESC that does not start an SGR
// sequence.
func hasNonSGR(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			n := sgrLen(s[i:])
			if n == 0 {
				return true
			}
			i += n - 1
		}
	}
	return false
}
