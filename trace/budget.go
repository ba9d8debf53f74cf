package trace

import "fmt"

// Costs, in bytes, of what the readers keep against their budget
// (package budget): an iteration, a sample (its three floats), and a rank
// of a log (its series, map entries and Rank). 100 MB of empty iterations
// held 12.7 GB for 46 s before they counted.
const (
	iterationCost = 256
	sampleCost    = 24
	logRankCost   = 1024
)

// maxUnknown is how many distinct unknown field names a reader names in
// its warnings; the rest are counted (a file of 9M distinct keys made 9M
// warnings).
const maxUnknown = 32

// unknownFields collects the unknown field names a reader meets, naming at
// most maxUnknown of them.
type unknownFields struct {
	names map[string]bool
	more  int // distinct or not, past maxUnknown
}

func (u *unknownFields) add(name []byte) {
	if u.names == nil {
		u.names = map[string]bool{}
	}
	if u.names[string(name)] {
		return
	}
	if len(u.names) >= maxUnknown {
		u.more++
		return
	}
	u.names[string(name)] = true
}

// warnings are the lines for Rank.Warnings, say formatting one name.
func (u *unknownFields) warnings(say string) []string {
	var out []string
	for k := range u.names {
		out = append(out, fmt.Sprintf(say, k))
	}
	if u.more > 0 {
		out = append(out, fmt.Sprintf("and %d more unknown fields ignored", u.more))
	}
	return out
}
