package jsonscan

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestNumbers(t *testing.T) {
	cases := []struct {
		in     string
		f      float64
		i      int64
		isInt  bool
		rest   string
		errSub string
	}{
		{"0", 0, 0, true, "", ""},
		{"-12", -12, -12, true, "", ""},
		{"76202.1875,", 76202.1875, 0, false, ",", ""},
		{"26187.251953125}", 26187.251953125, 0, false, "}", ""},
		{"1e3", 1000, 0, false, "", ""},
		{"-2.5E-2", -0.025, 0, false, "", ""},
		{"12345678901234567890123", 12345678901234567890123, 0, false, "", ""},
		{"0.1", 0.1, 0, false, "", ""},
		{"123456789012345678", 123456789012345678, 123456789012345678, true, "", ""},
		{"NaN", math.NaN(), 0, false, "", ""},
		{"Infinity", math.Inf(1), 0, false, "", ""},
		{"-Infinity", math.Inf(-1), 0, false, "", ""},
		{"-", 0, 0, false, "", "expected a number"},
		{"1.", 0, 0, false, "", "digit expected"},
		{"x", 0, 0, false, "", "expected a number"},
	}
	for _, c := range cases {
		s := New([]byte(c.in))
		f, i, isInt, err := s.Number()
		if c.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSub) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.errSub)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		same := f == c.f || (math.IsNaN(f) && math.IsNaN(c.f))
		if !same || isInt != c.isInt || (isInt && i != c.i) || string(s.data[s.pos:]) != c.rest {
			t.Errorf("%q: got %v %v %v rest %q", c.in, f, i, isInt, s.data[s.pos:])
		}
		// The fast path must agree with Go's correctly rounded parser.
		if !math.IsNaN(c.f) && !math.IsInf(c.f, 0) {
			var want float64
			_ = json.Unmarshal([]byte(strings.TrimRight(c.in, ",}")), &want)
			if want != f {
				t.Errorf("%q: %v differs from encoding/json %v", c.in, f, want)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	cases := map[string]string{
		`"plain"`:                   "plain",
		`"a\"b\\c\/d\n\t"`:          "a\"b\\c/d\n\t",
		`"\u00e9\u4e2d"`:            "é中",
		`"\ud83d\ude00"`:            "😀",
		`"  File \"x.py\", line 3"`: `  File "x.py", line 3`,
	}
	for in, want := range cases {
		s := New([]byte(in))
		got, err := s.String()
		if err != nil || string(got) != want {
			t.Errorf("%s: got %q %v, want %q", in, got, err, want)
		}
		s = New([]byte(in))
		if err := s.Skip(); err != nil || s.pos != len(in) {
			t.Errorf("Skip %s: pos %d err %v", in, s.pos, err)
		}
	}
	for _, bad := range []string{`"abc`, `"ab\`, `"\q"`, `"\u12"`} {
		if _, err := New([]byte(bad)).String(); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestSkipAndErrors(t *testing.T) {
	in := `{"a": [1, 2.5, {"b": null, "c": [true, false, "x\"]"]}], "d": {}} tail`
	s := New([]byte(in))
	if err := s.Skip(); err != nil {
		t.Fatal(err)
	}
	if rest := string(s.data[s.pos:]); rest != " tail" {
		t.Errorf("rest %q", rest)
	}
	deep := strings.Repeat("[", 1000000) + strings.Repeat("]", 1000000)
	if err := New([]byte(deep)).Skip(); err != nil {
		t.Errorf("deep nesting: %v", err)
	}
	s = New([]byte("{\n  \"a\": "))
	_ = s.Expect('{')
	_, _ = s.String()
	_ = s.Expect(':')
	_, err := s.Literal()
	e, ok := err.(*Error)
	if !ok || e.Line != 2 || !strings.Contains(e.Msg, "truncated") {
		t.Errorf("error position: %#v", err)
	}
}

// FuzzSkip checks Skip against encoding/json: on valid JSON it must
// consume exactly the value; on anything it must not panic.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{`{"0": {"samples": [{"timestamp_s": 1.5}]}}`, `[1, "a\"b", null, true, {}]`, `"\u00e9"`, `-1.5e-3`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New(data)
		err := s.Skip()
		if json.Valid(data) && err != nil && !strings.Contains(string(data), "\\u") {
			t.Fatalf("valid JSON %q rejected: %v", data, err)
		}
		if err == nil && json.Valid(data) && strings.TrimSpace(string(data[s.pos:])) != "" {
			t.Fatalf("valid JSON %q: stopped at %d", data, s.pos)
		}
	})
}

func TestValue(t *testing.T) {
	s := New([]byte(`{"a": [1, "x", true, false, null, NaN, -Infinity], "b": {"c": 2.5}}`))
	v, err := s.Value()
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	a := m["a"].([]any)
	if a[0] != 1.0 || a[1] != "x" || a[2] != true || a[3] != false || a[4] != nil || !math.IsNaN(a[5].(float64)) || !math.IsInf(a[6].(float64), -1) {
		t.Errorf("array: %#v", a)
	}
	if m["b"].(map[string]any)["c"] != 2.5 {
		t.Errorf("object: %#v", m["b"])
	}
	deep := strings.Repeat("[", MaxValueDepth+1) + strings.Repeat("]", MaxValueDepth+1)
	if _, err := New([]byte(deep)).Value(); err != nil {
		t.Errorf("%d levels are accepted: %v", MaxValueDepth+1, err)
	}
	deeper := strings.Repeat("[", MaxValueDepth+2) + strings.Repeat("]", MaxValueDepth+2)
	if _, err := New([]byte(deeper)).Value(); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("%d levels are refused: %v", MaxValueDepth+2, err)
	}
	if _, err := New([]byte(`{"a": }`)).Value(); err == nil {
		t.Error("a missing value is an error")
	}
}

// TestValueWithin: a value is read within the least limit its Go form
// needs and refused one byte under it, with the limit named; the need
// grows with what the value holds.
func TestValueWithin(t *testing.T) {
	least := func(src string) int64 {
		lo, hi := int64(0), int64(1<<40) // fails at lo, reads at hi
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if _, err := New([]byte(src)).ValueWithin(mid); err == nil {
				hi = mid
			} else {
				lo = mid
			}
		}
		return hi
	}
	objects := func(n int) string { return "[" + strings.Repeat("{}, ", n) + "{}]" }
	for _, src := range []string{`1`, `"abc"`, `{"a": [1, 2, {"b": null}]}`, objects(1000)} {
		need := least(src)
		want, _ := New([]byte(src)).Value()
		got, err := New([]byte(src)).ValueWithin(need)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%.20s within %d: %v, %v", src, need, got, err)
		}
		if _, err := New([]byte(src)).ValueWithin(need - 1); err == nil || !strings.Contains(err.Error(), "in memory") {
			t.Errorf("%.20s within %d: %v", src, need-1, err)
		}
	}
	if a, b := least(objects(1000)), least(objects(2000)); b < a+1000*(costValue+costMap) {
		t.Errorf("1000 more empty objects need %d more bytes", b-a)
	}
}
