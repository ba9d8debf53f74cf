package report

import "io"

// indentChunk is how many indented bytes an indentWriter gathers before
// it writes them: the indented report (4 MB for 1,500 stages) was a buffer
// of fresh pages, a fault each 4 KiB on one core, 3-4 ms of a 9 ms JSON.
const indentChunk = 64 << 10

// indenter indents compact JSON given in pieces, each ending between two
// tokens, as json.Indent indents the whole. The standard library's indent
// pass steps its JSON scanner through every byte; this one copies strings
// and literals as runs. A stage-heavy report is 2.4 MB, and the pass was
// 12 of the 18 ms of its JSON.
type indenter struct {
	indent  string
	depth   int
	open    bool // after { or [: a newline comes before the next value, unless it closes
	dst     []byte
	flushAt int
	flush   func([]byte) // nil: dst grows
	lines   []byte       // a newline, then indents
}

// indentWriter is an indenter that writes to w in pieces of about chunk
// bytes, and keeps the first error.
type indentWriter struct {
	indenter
	err error
}

func newIndentWriter(w io.Writer, indent string, chunk int) *indentWriter {
	in := &indentWriter{}
	in.indenter = indenter{indent: indent, dst: make([]byte, 0, chunk+chunk/4), flushAt: chunk, flush: func(b []byte) {
		if in.err == nil {
			_, in.err = w.Write(b)
		}
	}}
	return in
}

// raw writes b, already indented.
func (in *indentWriter) raw(b []byte) {
	if len(in.dst)+len(b) < in.flushAt {
		in.dst = append(in.dst, b...)
		return
	}
	if len(in.dst) > 0 {
		in.flush(in.dst)
		in.dst = in.dst[:0]
	}
	in.flush(b)
}

// close writes what is left and returns the first error.
func (in *indentWriter) close() error {
	if len(in.dst) > 0 {
		in.flush(in.dst)
		in.dst = in.dst[:0]
	}
	return in.err
}

// newline starts a line at the depth: a newline and the indents, from
// one string of them (a byte at a time was a third of the pass).
func (in *indenter) newline() {
	n := 1 + in.depth*len(in.indent)
	for len(in.lines) < n {
		if len(in.lines) == 0 {
			in.lines = append(in.lines, '\n')
		}
		in.lines = append(in.lines, in.indent...)
	}
	in.dst = append(in.dst, in.lines[:n]...)
}

// write indents src, which begins and ends between tokens.
func (in *indenter) write(src []byte) {
	for i := 0; i < len(src); i++ {
		if in.flush != nil && len(in.dst) >= in.flushAt {
			in.flush(in.dst)
			in.dst = in.dst[:0]
		}
		switch c := src[i]; c {
		case '{', '[':
			if in.open {
				in.newline()
			}
			in.dst = append(in.dst, c)
			in.depth++
			in.open = true
		case '}', ']':
			in.depth--
			if in.open {
				in.open = false // an empty object or array stays on its line
			} else {
				in.newline()
			}
			in.dst = append(in.dst, c)
		case ',':
			in.dst = append(in.dst, c)
			in.newline()
		case ':':
			in.dst = append(in.dst, ':', ' ')
		case ' ', '\t', '\r', '\n':
			if in.depth == 0 && !in.open {
				in.dst = append(in.dst, c) // json.Indent keeps what follows the value
			}
		default:
			if in.open {
				in.newline()
				in.open = false
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
			in.dst = append(in.dst, src[i:j]...)
			i = j - 1
		}
	}
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
