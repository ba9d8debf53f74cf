package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsLinks: every relative link of the README and docs/ resolves to
// a file, and every #anchor to a heading of it; the README stays short.
func TestDocsLinks(t *testing.T) {
	pages, _ := filepath.Glob("docs/*.md")
	pages = append(pages, "README.md")
	reLink := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		body, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		links := 0
		for _, m := range reLink.FindAllStringSubmatch(string(body), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s: link %s: %v", page, target, err)
				continue
			}
			if anchor != "" && !st.IsDir() && !hasAnchor(path, anchor) {
				t.Errorf("%s: link %s: no heading %q in %s", page, target, anchor, path)
			}
		}
		if page == "README.md" && links < 8 {
			t.Errorf("README links %d pages of docs/; the rest of the documentation is unreachable", links)
		}
	}
	if b, _ := os.ReadFile("README.md"); strings.Count(string(b), "\n") > 250 {
		t.Errorf("README.md has %d lines; keep it under 250 and move the rest to docs/", strings.Count(string(b), "\n"))
	}
}

// hasAnchor reports whether a Markdown file has a heading whose GitHub
// anchor is anchor.
func hasAnchor(path, anchor string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var a strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				a.WriteRune(r)
			}
		}
		if a.String() == anchor {
			return true
		}
	}
	return false
}

// TestImportGraph: the packages import one way. Nothing but the root
// imports the UI, data packages import no UI library, and `model` (the
// loader) imports neither the UI nor the commands.
func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	ui := []string{"charm.land/", "github.com/NimbleMarkets/ntcharts"}
	n := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		n++
		if p.ImportPath == "memscope" || strings.HasPrefix(p.ImportPath, "memscope/tui") {
			continue
		}
		for _, d := range p.Deps {
			if d == "memscope/tui" || strings.HasPrefix(d, "memscope/tui/") {
				t.Errorf("%s imports the UI (%s)", p.ImportPath, d)
			}
			for _, u := range ui {
				if strings.HasPrefix(d, u) {
					t.Errorf("%s depends on a UI library (%s)", p.ImportPath, d)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("go list saw %d packages", n)
	}
}
