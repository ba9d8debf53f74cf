package report

import "io"

// indentChunk is how many indented bytes writeIndented gathers before it
// writes them.
const indentChunk = 64 << 10

// writeIndented writes src, compact JSON as encoding/json's Marshal
// writes it, indented as json.Indent(dst, src, "", indent) would indent
// it, to w in pieces of about chunk bytes (indentFlush). The indented report (4 MB for 1,500
// stages) was a buffer of fresh pages, a fault each 4 KiB on one core:
// 3-4 ms of a 9 ms JSON.
func writeIndented(w io.Writer, src []byte, indent string, chunk int) error {
	var err error
	write := func(b []byte) {
		if err == nil {
			_, err = w.Write(b)
		}
	}
	write(indentFlush(make([]byte, 0, chunk+chunk/4), src, indent, chunk, write))
	return err
}

// indentFlush appends src, compact JSON, indented as json.Indent would
// indent it; with flush set, it hands dst to flush and starts it again
// each time it holds flushAt bytes or more. The standard library's indent
// pass steps its JSON scanner through every byte; this one copies strings
// and literals as runs. A stage-heavy report is 2.4 MB, and the pass was
// 12 of the 18 ms of its JSON.
func indentFlush(dst, src []byte, indent string, flushAt int, flush func([]byte)) []byte {
	depth := 0
	open := false // after { or [: a newline comes before the next value, unless it closes
	newline := func() {
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, indent...)
		}
	}
	for i := 0; i < len(src); i++ {
		if flush != nil && len(dst) >= flushAt {
			flush(dst)
			dst = dst[:0]
		}
		switch c := src[i]; c {
		case '{', '[':
			if open {
				newline()
			}
			dst = append(dst, c)
			depth++
			open = true
		case '}', ']':
			depth--
			if open {
				open = false // an empty object or array stays on its line
			} else {
				newline()
			}
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		case ' ', '\t', '\r', '\n':
			if depth == 0 && !open {
				dst = append(dst, c) // json.Indent keeps what follows the value
			}
		default:
			if open {
				newline()
				open = false
			}
			j := i + 1
			if c == '"' {
				for j < len(src) && src[j] != '"' {
					if src[j] == '\\' {
						j++
					}
					j++
				}
				j = min(j+1, len(src))
			} else {
				for j < len(src) && !structural(src[j]) {
					j++
				}
			}
			dst = append(dst, src[i:j]...)
			i = j - 1
		}
	}
	return dst
}

// structural reports whether c ends a literal (a number, true, false or
// null) in compact JSON.
func structural(c byte) bool {
	switch c {
	case '{', '}', '[', ']', ',', ':', '"', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
