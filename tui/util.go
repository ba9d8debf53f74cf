package tui

import (
	"strconv"

	"memscope/internal/units"
)

func itoa(i int) string { return strconv.Itoa(i) }

func bytesStr(n int64) string { return units.Bytes(n) }

// mibStr formats MiB figures (traces) in binary units.
func mibStr(v float64) string {
	if v != v || v < 0 {
		return "—"
	}
	return units.BytesF(v * units.MiB)
}

func plural(n int, w string) string {
	if n == 1 {
		return "1 " + w
	}
	return itoa(n) + " " + units.Plural(w)
}
