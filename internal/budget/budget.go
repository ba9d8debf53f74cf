// Package budget is the memory budget every reader of an input holds to,
// whatever the input claims: PerByte bytes per input byte plus Base. Real
// inputs need well under one byte per byte (bigtrain's 181 MiB pickle
// 0.9, a trace's sample of 60-90 bytes of JSON 24); hostile ones of 100 MB
// held gigabytes before each reader counted against it.
package budget

import (
	"fmt"
	"sync/atomic"
)

const (
	PerByte = 2
	Base    = 128 << 20
)

// Limit is the budget of an input of n bytes.
func Limit(n int) int64 { return PerByte*int64(n) + Base }

// Meter counts what a reader holds against a limit. Take may be called
// from several goroutines at once.
type Meter struct {
	used  atomic.Int64
	limit int64
}

// NewMeter returns a meter of limit bytes (Limit, or less in tests).
func NewMeter(limit int64) *Meter { return &Meter{limit: limit} }

// Take accounts for n more bytes; an error once the limit is passed.
func (m *Meter) Take(n int64) error {
	if m.used.Add(n) > m.limit {
		return Exceeded(m.limit)
	}
	return nil
}

// Exceeded is the error of a reader that would hold more than limit.
func Exceeded(limit int64) error {
	return fmt.Errorf("reading it needs more than %d MiB (memscope's limit: %d bytes per input byte + %d MiB); a hostile or corrupt file?",
		limit>>20, PerByte, Base>>20)
}
