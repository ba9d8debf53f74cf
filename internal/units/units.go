// Package units formats and parses byte sizes and percentages the way
// memscope shows them: binary units (KiB, MiB, GiB), as PyTorch tools mean
// them even when they write "MB".
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Binary unit sizes.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
	TiB = 1 << 40
)

// Bytes formats n with a binary unit and up to three significant decimals:
// "512 B", "1.50 KiB", "61.3 GiB".
func Bytes(n int64) string {
	neg := n < 0
	f := math.Abs(float64(n))
	var s string
	// Switch units at 1000 of the smaller one, so no figure needs four
	// digits before the point.
	switch {
	case f < 1000:
		s = fmt.Sprintf("%d B", int64(f))
	case f < 1000*KiB:
		s = trim(f/KiB) + " KiB"
	case f < 1000*MiB:
		s = trim(f/MiB) + " MiB"
	case f < 1000*GiB:
		s = trim(f/GiB) + " GiB"
	default:
		s = trim(f/TiB) + " TiB"
	}
	if neg {
		return "-" + s
	}
	return s
}

// BytesF formats a float byte count.
func BytesF(f float64) string { return Bytes(int64(math.Round(f))) }

func trim(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// Signed formats a byte delta with an explicit sign.
func Signed(n int64) string {
	if n > 0 {
		return "+" + Bytes(n)
	}
	return Bytes(n)
}

// MiBToBytes converts the "MB" (MiB) floats of Megatron traces to whole
// bytes.
func MiBToBytes(mib float64) int64 { return int64(math.Round(mib * MiB)) }

// Pct formats a percentage with one decimal.
func Pct(p float64) string {
	if math.IsNaN(p) || math.IsInf(p, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// ParseBytes parses "512", "4KiB", "1.5 GiB", "200MB" (MB read as MiB, as
// the PyTorch tools mean it).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	mult := 1.0
	for _, u := range []struct {
		suf string
		m   float64
	}{{"tib", TiB}, {"gib", GiB}, {"mib", MiB}, {"kib", KiB}, {"tb", TiB}, {"gb", GiB}, {"mb", MiB}, {"kb", KiB}, {"t", TiB}, {"g", GiB}, {"m", MiB}, {"k", KiB}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suf))
			mult = u.m
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int64(f * mult), nil
}

// Plural is an English noun's plural for the words memscope counts
// ("entry" → "entries", "block" → "blocks").
func Plural(word string) string {
	if n := len(word); n > 1 && word[n-1] == 'y' && !strings.ContainsRune("aeiou", rune(word[n-2])) {
		return word[:n-1] + "ies"
	}
	return word + "s"
}
