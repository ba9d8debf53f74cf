// Package jsonscan is a small, allocation-free JSON scanner for the large
// files memscope reads (per-rank traces of hundreds of MB, snapshot JSON).
// Readers drive it by schema, so values they do not need are skipped without
// being built. It accepts the NaN, Infinity and -Infinity literals that
// Python's json.dump writes.
package jsonscan

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// Scanner reads JSON from a byte slice.
type Scanner struct {
	data    []byte
	pos     int
	scratch []byte
}

// New returns a scanner over data.
func New(data []byte) *Scanner { return &Scanner{data: data} }

// Pos is the current byte offset.
func (s *Scanner) Pos() int { return s.pos }

// Bytes returns the input between two offsets (e.g. a value just skipped).
func (s *Scanner) Bytes(start, end int) []byte { return s.data[start:end] }

// Error is a syntax or type error at a byte offset, with line and column.
type Error struct {
	Offset, Line, Col int
	Msg               string
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d column %d (byte %d): %s", e.Line, e.Col, e.Offset, e.Msg)
}

// Errorf returns an *Error at the current position.
func (s *Scanner) Errorf(format string, args ...any) error {
	return s.ErrorAt(s.pos, format, args...)
}

// ErrorAt returns an *Error at offset off.
func (s *Scanner) ErrorAt(off int, format string, args ...any) error {
	if off > len(s.data) {
		off = len(s.data)
	}
	// Vectorised: an error at the end of a JSON file of gigabytes.
	before := s.data[:off]
	line := 1 + bytes.Count(before, []byte{'\n'})
	col := off - bytes.LastIndexByte(before, '\n')
	return &Error{Offset: off, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// Peek skips whitespace and returns the next byte, or 0 at the end.
func (s *Scanner) Peek() byte {
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; c {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return c
		}
	}
	return 0
}

// EOF reports whether only whitespace remains.
func (s *Scanner) EOF() bool { return s.Peek() == 0 && s.pos >= len(s.data) }

func (s *Scanner) unexpected(want string) error {
	if s.pos >= len(s.data) {
		return s.Errorf("unexpected end of data, expected %s (file truncated or still being written?)", want)
	}
	return s.Errorf("unexpected %q, expected %s", s.data[s.pos], want)
}

// Expect consumes byte c after whitespace.
func (s *Scanner) Expect(c byte) error {
	if s.Peek() != c {
		return s.unexpected(strconv.QuoteRune(rune(c)))
	}
	s.pos++
	return nil
}

// More is used inside an object or array after its opening byte: it reports
// whether another element follows, consuming the separating comma, or
// consumes the closing byte and returns false.
func (s *Scanner) More(close byte, first bool) (bool, error) {
	c := s.Peek()
	if c == close {
		s.pos++
		return false, nil
	}
	if first {
		return true, nil
	}
	if c != ',' {
		return false, s.unexpected(fmt.Sprintf("',' or %q", close))
	}
	s.pos++
	return true, nil
}

// String reads a string and returns its unescaped bytes. The result aliases
// the input or an internal buffer: copy it to keep it. Raw control
// characters inside strings are accepted (memscope reads, it does not
// validate), which lets the common case run on bytes.IndexByte.
func (s *Scanner) String() ([]byte, error) {
	if s.Peek() != '"' {
		return nil, s.unexpected("a string")
	}
	start := s.pos + 1
	rest := s.data[start:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil, s.ErrorAt(len(s.data), "unterminated string (file truncated?)")
	}
	if bytes.IndexByte(rest[:end], '\\') >= 0 {
		return s.slowString(start)
	}
	s.pos = start + end + 1
	return rest[:end], nil
}

func (s *Scanner) slowString(start int) ([]byte, error) {
	out := s.scratch[:0]
	i := start
	for i < len(s.data) {
		// Copy the run up to the next quote or backslash in one go.
		rest := s.data[i:]
		q := bytes.IndexByte(rest, '"')
		if q < 0 {
			break
		}
		if b := bytes.IndexByte(rest[:q], '\\'); b >= 0 {
			q = b
		}
		out = append(out, rest[:q]...)
		i += q
		if s.data[i] == '"' {
			s.pos = i + 1
			s.scratch = out
			return out, nil
		}
		if i+1 >= len(s.data) {
			return nil, s.ErrorAt(i, "unterminated escape")
		}
		e := s.data[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n, ok := s.hex4(i)
			if !ok {
				return nil, s.ErrorAt(i, "bad \\u escape")
			}
			i = n
			if utf16IsSurrogate(r) {
				if r2, n2, ok := s.hex4(i + 2); ok && i+1 < len(s.data) && s.data[i] == '\\' && s.data[i+1] == 'u' {
					if d := decodeSurrogates(r, r2); d != utf8.RuneError {
						r = d
						i = n2
					}
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, s.ErrorAt(i-2, "bad escape \\%c", e)
		}
	}
	return nil, s.ErrorAt(len(s.data), "unterminated string (file truncated?)")
}

// skipString moves past a string without unescaping it.
func (s *Scanner) skipString() error {
	if s.Peek() != '"' {
		return s.unexpected("a string")
	}
	start := s.pos + 1
	i := start
	for {
		j := bytes.IndexByte(s.data[i:], '"')
		if j < 0 {
			return s.ErrorAt(len(s.data), "unterminated string (file truncated?)")
		}
		k := i + j
		n := 0
		for p := k - 1; p >= start && s.data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			s.pos = k + 1
			return nil
		}
		i = k + 1
	}
}

func (s *Scanner) hex4(i int) (rune, int, bool) {
	if i+4 > len(s.data) {
		return 0, i, false
	}
	var r rune
	for _, c := range s.data[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, i, false
		}
	}
	return r, i + 4, true
}

func utf16IsSurrogate(r rune) bool { return r >= 0xd800 && r < 0xe000 }

func decodeSurrogates(r1, r2 rune) rune {
	if r1 >= 0xd800 && r1 < 0xdc00 && r2 >= 0xdc00 && r2 < 0xe000 {
		return (r1-0xd800)<<10 | (r2 - 0xdc00) + 0x10000
	}
	return utf8.RuneError
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// Number reads a number. isInt is true when the literal has no fraction or
// exponent and fits an int64; then i holds it exactly. NaN, Infinity and
// -Infinity are accepted.
func (s *Scanner) Number() (f float64, i int64, isInt bool, err error) {
	c := s.Peek()
	start := s.pos
	d := s.data
	p := start
	neg := false
	if c == '-' {
		neg = true
		p++
	}
	if p < len(d) && (d[p] == 'N' || d[p] == 'I') {
		return s.special(start, neg)
	}
	// Fast path: up to 19 significant digits with an optional fraction.
	var mant uint64
	digits := 0
	intStart := p
	for p < len(d) && d[p] >= '0' && d[p] <= '9' {
		if digits < 19 {
			mant = mant*10 + uint64(d[p]-'0')
		}
		digits++
		p++
	}
	if p == intStart {
		return 0, 0, false, s.unexpected("a number")
	}
	frac := 0
	if p < len(d) && d[p] == '.' {
		p++
		fs := p
		for p < len(d) && d[p] >= '0' && d[p] <= '9' {
			if digits < 19 {
				mant = mant*10 + uint64(d[p]-'0')
				frac++
			}
			digits++
			p++
		}
		if p == fs {
			return 0, 0, false, s.ErrorAt(p, "digit expected after decimal point")
		}
		if p < len(d) && (d[p] == 'e' || d[p] == 'E') {
			return s.slowNumber(start)
		}
		s.pos = p
		if digits <= 19 && mant < 1<<53 && frac < len(pow10) {
			f = float64(mant) / pow10[frac]
			if neg {
				f = -f
			}
			return f, 0, false, nil
		}
		return s.slowNumber(start)
	}
	if p < len(d) && (d[p] == 'e' || d[p] == 'E') {
		return s.slowNumber(start)
	}
	s.pos = p
	if digits <= 18 {
		i = int64(mant)
		if neg {
			i = -i
		}
		return float64(i), i, true, nil
	}
	return s.slowNumber(start)
}

func (s *Scanner) slowNumber(start int) (float64, int64, bool, error) {
	p := start
	d := s.data
	if p < len(d) && d[p] == '-' {
		p++
	}
	isInt := true
	for p < len(d) {
		c := d[p]
		if c >= '0' && c <= '9' || c == '-' || c == '+' {
			p++
			continue
		}
		if c == '.' || c == 'e' || c == 'E' {
			isInt = false
			p++
			continue
		}
		break
	}
	lit := unsafe.String(unsafe.SliceData(d[start:p]), p-start)
	s.pos = p
	if isInt {
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return float64(i), i, true, nil
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !isRangeErr(err) {
		return 0, 0, false, s.ErrorAt(start, "bad number %q", lit)
	}
	return f, 0, false, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func (s *Scanner) special(start int, neg bool) (float64, int64, bool, error) {
	p := start
	if neg {
		p++
	}
	rest := s.data[p:]
	switch {
	case hasPrefix(rest, "NaN") && !neg:
		s.pos = p + 3
		return math.NaN(), 0, false, nil
	case hasPrefix(rest, "Infinity"):
		s.pos = p + 8
		if neg {
			return math.Inf(-1), 0, false, nil
		}
		return math.Inf(1), 0, false, nil
	}
	return 0, 0, false, s.unexpected("a number")
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

// Literal kinds returned by Literal.
const (
	Null = iota
	True
	False
)

// Literal reads true, false or null.
func (s *Scanner) Literal() (int, error) {
	s.Peek()
	rest := s.data[s.pos:]
	switch {
	case hasPrefix(rest, "null"):
		s.pos += 4
		return Null, nil
	case hasPrefix(rest, "true"):
		s.pos += 4
		return True, nil
	case hasPrefix(rest, "false"):
		s.pos += 5
		return False, nil
	}
	return 0, s.unexpected("a value")
}

// Skip skips one value of any kind, iteratively (deep nesting cannot
// overflow the goroutine stack).
func (s *Scanner) Skip() error {
	var open []byte // brackets of the containers being skipped
	for {
		closed := true // whether a complete value was just read
		switch c := s.Peek(); c {
		case '{', '[':
			s.pos++
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			if s.Peek() == end {
				s.pos++
				break
			}
			open = append(open, c)
			closed = false
			if c == '{' {
				if err := s.key(); err != nil {
					return err
				}
			}
		case '"':
			if err := s.skipString(); err != nil {
				return err
			}
		case 't', 'f', 'n':
			if _, err := s.Literal(); err != nil {
				return err
			}
		case 0:
			return s.unexpected("a value")
		default:
			if _, _, _, err := s.Number(); err != nil {
				return err
			}
		}
		if !closed {
			continue
		}
		// A value is complete: close containers or move to the next element.
		for len(open) > 0 {
			top := open[len(open)-1]
			c := s.Peek()
			if (c == '}' && top == '{') || (c == ']' && top == '[') {
				s.pos++
				open = open[:len(open)-1]
				continue
			}
			if c != ',' {
				return s.unexpected("',' or a closing bracket")
			}
			s.pos++
			if top == '{' {
				if err := s.key(); err != nil {
					return err
				}
			}
			break
		}
		if len(open) == 0 {
			return nil
		}
	}
}

func (s *Scanner) key() error {
	if _, err := s.String(); err != nil {
		return err
	}
	return s.Expect(':')
}

// Object reads an object, calling fn for each member with the scanner at
// the member's value; fn must consume the value. The key aliases the input
// or a scratch buffer that the next String call reuses: copy it to keep it.
func (s *Scanner) Object(fn func(key []byte) error) error {
	if err := s.Expect('{'); err != nil {
		return err
	}
	for first := true; ; first = false {
		more, err := s.More('}', first)
		if err != nil || !more {
			return err
		}
		k, err := s.String()
		if err != nil {
			return err
		}
		if err := s.Expect(':'); err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
	}
}

// Array reads an array, calling fn for each element with the scanner at
// the element; fn must consume it.
func (s *Scanner) Array(fn func(i int) error) error {
	if err := s.Expect('['); err != nil {
		return err
	}
	for i := 0; ; i++ {
		more, err := s.More(']', i == 0)
		if err != nil || !more {
			return err
		}
		if err := fn(i); err != nil {
			return err
		}
	}
}

// MaxValueDepth bounds the nesting Value decodes: deeper input is refused
// rather than risking the goroutine stack.
const MaxValueDepth = 256

// Value decodes one value of any kind as encoding/json does into an any
// (map[string]any, []any, float64, string, bool, nil), but accepts NaN and
// the infinities, which Python's json module writes.
func (s *Scanner) Value() (any, error) { return s.value(0, &valueBudget{left: math.MaxInt64}) }

// ValueWithin is Value for a value whose Go form takes at most limit bytes
// (approximately: what maps, slices, strings and interfaces hold), and an
// error naming the limit past it: a file of 100 MB of empty objects would
// take gigabytes.
func (s *Scanner) ValueWithin(limit int64) (any, error) {
	return s.value(0, &valueBudget{left: limit, limit: limit})
}

// valueBudget is what the Go form of a value may still take.
type valueBudget struct{ left, limit int64 }

// Approximate sizes of the Go form: an interface holding a value (its
// header and the boxed value), a map entry, a new map, a new slice.
const (
	costValue    = 24
	costMapEntry = 48
	costMap      = 48
	costSlice    = 24
)

func (s *Scanner) spend(b *valueBudget, n int64) error {
	if b.left -= n; b.left < 0 {
		return s.Errorf("the value needs more than %d MiB in memory (memscope's limit for this input); a hostile or corrupt file?", b.limit>>20)
	}
	return nil
}

func (s *Scanner) value(depth int, b *valueBudget) (any, error) {
	if depth > MaxValueDepth {
		return nil, s.Errorf("nested deeper than %d levels", MaxValueDepth)
	}
	if err := s.spend(b, costValue); err != nil {
		return nil, err
	}
	switch c := s.Peek(); c {
	case '{':
		if err := s.spend(b, costMap); err != nil {
			return nil, err
		}
		m := map[string]any{}
		err := s.Object(func(k []byte) error {
			if err := s.spend(b, costMapEntry+int64(len(k))); err != nil {
				return err
			}
			key := string(k)
			v, err := s.value(depth+1, b)
			m[key] = v
			return err
		})
		return m, err
	case '[':
		if err := s.spend(b, costSlice); err != nil {
			return nil, err
		}
		l := []any{}
		err := s.Array(func(int) error {
			v, err := s.value(depth+1, b)
			l = append(l, v)
			return err
		})
		return l, err
	case '"':
		b2, err := s.String()
		if err == nil {
			err = s.spend(b, int64(len(b2)))
		}
		return string(b2), err
	case 't', 'f', 'n':
		lit, err := s.Literal()
		switch {
		case err != nil || lit == Null:
			return nil, err
		case lit == True:
			return true, nil
		}
		return false, nil
	}
	f, _, _, err := s.Number()
	return f, err
}
