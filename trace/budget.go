package trace

import "fmt"

// A trace reader holds at most what the snapshot decoder may, whatever the
// file claims: budgetPerByte bytes per input byte plus budgetBase. A real
// trace needs well under one (a sample of 60-90 bytes of JSON is 24 bytes
// of floats); 100 MB of empty iterations held 12.7 GB for 46 s before it.
const (
	budgetPerByte = 2
	budgetBase    = 128 << 20
)

// Costs, in bytes, of what the readers keep: an iteration, a sample (its
// three floats), and a rank of a log (its series, map entries and Rank).
const (
	iterationCost = 256
	sampleCost    = 24
	logRankCost   = 1024
)

// maxUnknown is how many distinct unknown field names a reader names in
// its warnings; the rest are counted (a file of 9M distinct keys made 9M
// warnings).
const maxUnknown = 32

// budget is what a reader may still hold of one input.
type budget struct{ used, limit int64 }

func newBudget(inputLen int) *budget {
	return &budget{limit: budgetPerByte*int64(inputLen) + budgetBase}
}

// take accounts for n more bytes; an error once the budget is spent.
func (b *budget) take(n int64) error {
	if b.used += n; b.used > b.limit {
		return fmt.Errorf("reading it needs more than %d MiB (memscope's limit: %d bytes per input byte + %d MiB); a hostile or corrupt file?",
			b.limit>>20, budgetPerByte, budgetBase>>20)
	}
	return nil
}

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
