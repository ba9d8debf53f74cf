package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// indentJSON is the indenter on src in one piece.
func indentJSON(dst, src []byte, indent string) []byte {
	in := indenter{indent: indent, dst: dst}
	in.write(src)
	return in.dst
}

// writeIndented is an indentWriter on src in one piece, written in pieces
// of about chunk bytes.
func writeIndented(w io.Writer, src []byte, indent string, chunk int) error {
	in := newIndentWriter(w, indent, chunk)
	in.write(src)
	return in.close()
}

// checkIndent compares indentJSON with json.Indent on src (valid JSON,
// made compact first, as Marshal writes it).
func checkIndent(t *testing.T, src []byte) {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, src); err != nil {
		return // not JSON: Marshal never writes it
	}
	compact.WriteByte('\n') // as Encoder.Encode ends a value
	var want bytes.Buffer
	if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	if got := indentJSON(nil, compact.Bytes(), "  "); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("indent of %q:\n%s\nwant:\n%s", compact.Bytes(), got, want.Bytes())
	}
	// Written in pieces: the same bytes whatever the piece's size, in one
	// write when the whole fits in one piece.
	for _, chunk := range []int{1, 7, 64, want.Len(), want.Len() + 1} {
		var w countingWriter
		if err := writeIndented(&w, compact.Bytes(), "  ", chunk); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), want.Bytes()) {
			t.Fatalf("written in pieces of %d, indent of %q:\n%s\nwant:\n%s", chunk, compact.Bytes(), w.Bytes(), want.Bytes())
		}
		if chunk > want.Len() && w.writes != 1 {
			t.Fatalf("%d bytes in pieces of %d: %d writes, want 1", want.Len(), chunk, w.writes)
		}
		if chunk < want.Len()/2 && w.writes < 2 {
			t.Fatalf("%d bytes in pieces of %d: %d writes", want.Len(), chunk, w.writes)
		}
	}
}

// countingWriter is a bytes.Buffer that counts the writes it gets.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(b)
}

// failingWriter fails every write.
type failingWriter struct{ writes int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("disk full")
}

// TestWriteIndentedStopsAtError: the first failed write is the error
// returned, and nothing more is written after it.
func TestWriteIndentedStopsAtError(t *testing.T) {
	var w failingWriter
	src := []byte(`{"a":[1,2,3,4,5,6,7,8,9],"b":"` + strings.Repeat("x", 100) + `"}`)
	if err := writeIndented(&w, src, "  ", 8); err == nil || err.Error() != "disk full" {
		t.Fatalf("error %v, want disk full", err)
	}
	if w.writes != 1 {
		t.Errorf("%d writes after the first failed", w.writes-1)
	}
}

// TestIndentJSONIsIndent: indentJSON gives json.Indent's bytes on values
// of every kind and nesting: empty objects and arrays (kept on one line),
// strings with escaped quotes, backslashes and unicode, numbers in every
// form, a report's own JSON, and random nested values.
func TestIndentJSONIsIndent(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":{}}`, `[[],[[]],{}]`, `"x"`, `1`, `-0.5e+10`, `true`, `null`,
		`{"a":"b\"c\\","d":[1,2.5,-3e-2,true,false,null],"e":{"f":"\u00e9\u2028<>&"}}`,
		`{"":"","\\":"\\\\","q\"":"\""}`, `[{"a":[{"b":[]}]}]`, `{"stages":[{"name":"ProfilerStep#1","top_sites":[]}]}`,
	} {
		checkIndent(t, []byte(s))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		v := randomValue(rng, 0)
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		checkIndent(t, b)
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(8)
	if depth > 4 {
		k = rng.IntN(4)
	}
	switch k {
	case 0:
		return rng.IntN(2000) - 1000
	case 1:
		return rng.Float64() * 1e6
	case 2:
		var sb strings.Builder
		for range rng.IntN(6) {
			sb.WriteString([]string{"a", `"`, `\`, "é", "\n", "<", " ", ",", ":", "{", "]", "\u2028"}[rng.IntN(12)])
		}
		return sb.String()
	case 3:
		return []any{nil, true, false}[rng.IntN(3)]
	case 4, 5:
		out := []any{}
		for range rng.IntN(4) {
			out = append(out, randomValue(rng, depth+1))
		}
		return out
	default:
		out := map[string]any{}
		for i := range rng.IntN(4) {
			out["k"+strconv.Itoa(i)+[]string{"", `"`, " ", ":"}[rng.IntN(4)]] = randomValue(rng, depth+1)
		}
		return out
	}
}

// FuzzIndentJSON: for any valid JSON, compacted, indentJSON gives
// json.Indent's bytes.
func FuzzIndentJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[1,{"a":"b\"c"},[]]`, `"\\"`, `{"x":[{"y":null}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkIndent(t, src) })
}

// BenchmarkIndent indents a report's JSON of 1,500 stages (2 MB compact,
// as the frame-pool snapshot's), with json.Indent and with indentJSON.
func BenchmarkIndent(b *testing.B) {
	type site struct {
		Site        string `json:"site"`
		Bytes       int64  `json:"bytes"`
		Allocations int    `json:"allocations"`
	}
	type stage struct {
		Name        string `json:"name"`
		Occurrence  int    `json:"occurrence"`
		StartUS     int64  `json:"start_us"`
		PeakBytes   int64  `json:"peak_bytes"`
		Allocations int    `json:"allocations"`
		TopSites    []site `json:"top_sites"`
	}
	var stages []stage
	for i := range 1500 {
		st := stage{Name: "ProfilerStep#" + strconv.Itoa(i), Occurrence: i, StartUS: 1700000000000000 + int64(i)*977, PeakBytes: int64(i) << 20}
		for k := range 5 {
			st.TopSites = append(st.TopSites, site{Site: "/workspace/megatron/core/transformer/mlp.py:" + strconv.Itoa(100+k) + " forward", Bytes: int64(k) << 24, Allocations: k})
		}
		stages = append(stages, st)
	}
	src, err := json.Marshal(map[string]any{"files": []any{map[string]any{"devices": []any{map[string]any{"stages": stages}}}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("json.Indent", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		var out bytes.Buffer
		for range b.N {
			out.Reset()
			_ = json.Indent(&out, src, "", "  ")
		}
	})
	b.Run("indentJSON", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		var out []byte
		for range b.N {
			out = indentJSON(out[:0], src, "  ")
		}
	})
}
