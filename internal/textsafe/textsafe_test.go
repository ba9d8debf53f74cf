package textsafe

import "testing"

func TestSafe(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain/path.py:12 forward", "plain/path.py:12 forward"},
		{"ünïcode ✓ 模型", "ünïcode ✓ 模型"},
		{"\x1b]0;PWNED\x07", `\x1b]0;PWNED\x07`},
		{"\x1b[2Jclear", `\x1b[2Jclear`},
		{"tab\there\nnl", `tab\x09here\x0anl`},
		{"del\x7f", `del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"", ""},
	}
	for _, c := range cases {
		if got := Safe(c.in); got != c.want {
			t.Errorf("Safe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Lines("a\x1b\nb"); got != "a\\x1b\nb" {
		t.Errorf("Lines kept newlines? %q", got)
	}
}

func TestStyled(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain\ntext", "plain\ntext"},
		{"\x1b[1;38;2;10;20;30mbold\x1b[0m\n\x1b[m", "\x1b[1;38;2;10;20;30mbold\x1b[0m\n\x1b[m"},
		{"\x1b]0;PWNED\x07title", `\x1b]0;PWNED\x07title`},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"\x1b[31", `\x1b[31`},
		{"tab\there\r", `tab\x09here\x0d`},
		{"c1 \u009b31m del\x7f", `c1 \u009b31m del\x7f`},
		{"bad \xff utf8", `bad \xff utf8`},
		{"é ünïcode ✓", "é ünïcode ✓"},
	} {
		if got := Styled(c.in); got != c.want {
			t.Errorf("Styled(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
