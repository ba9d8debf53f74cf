package snapshot

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// LoadRules reads a user rules file: one rule a line, "Name: kw1, kw2, ..."
// for a category or "role Role: kw1, ..." for a role (Parameter, Gradient,
// Optimizer State, Activation, Input, Temporary, Workspace); '#' starts a
// comment. The file's rules come first, in file order; a
// default rule with the same name is replaced, the other defaults follow.
func LoadRules(path string) ([]Rule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rules, err := ParseRules(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rules, nil
}

// ParseRules parses the rules file format (see LoadRules) and merges it
// with the defaults.
func ParseRules(r io.Reader) ([]Rule, error) {
	var user []Rule
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, kws, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("line %d: expected \"Category: keyword, keyword\" or \"role Role: keyword, keyword\"", n)
		}
		isRole := false
		if len(name) > 5 && strings.EqualFold(name[:5], "role ") {
			role, ok := ParseRole(strings.TrimSpace(name[5:]))
			if !ok || role == RoleUnknown {
				return nil, fmt.Errorf("line %d: %q is not a role (%s)", n, strings.TrimSpace(name[5:]),
					strings.Join(RoleNames()[:len(RoleNames())-1], ", "))
			}
			name, isRole = role.String(), true
		}
		var kw []string
		for _, k := range strings.Split(kws, ",") {
			if k = strings.TrimSpace(k); k != "" {
				kw = append(kw, k)
			}
		}
		if len(kw) == 0 {
			return nil, fmt.Errorf("line %d: category %q has no keywords", n, name)
		}
		if strings.EqualFold(name, Unknown) && !isRole {
			return nil, fmt.Errorf("line %d: %q is the fallback category and takes no keywords", n, Unknown)
		}
		user = append(user, Rule{Name: name, Keywords: kw, Role: isRole})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := append([]Rule(nil), user...)
	for _, d := range defaultRules {
		replaced := false
		for _, u := range user {
			if !u.Role && strings.EqualFold(u.Name, d.Name) {
				replaced = true
			}
		}
		if !replaced {
			out = append(out, d)
		}
	}
	return out, nil
}
