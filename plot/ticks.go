package plot

import (
	"math"
	"strconv"

	gplot "gonum.org/v1/plot"
)

// niceTicker places labelled ticks at round steps (1, 2, 2.5 or 5 times a
// power of ten, at most about six intervals, as matplotlib's MaxNLocator does) with
// unlabelled minor ticks between. Integer axes (event indices, counts)
// never get a fractional step, and labels carry no trailing zeros: "2500",
// not "2500.00"; from 10,000 up they take an SI suffix ("12.5k", "1.5M").
type niceTicker struct {
	integer bool
}

// tickTarget is about how many intervals an axis is cut into.
const tickTarget = 6

// NiceStep is the smallest round step (1, 2, 2.5 or 5 times a power of
// ten; never a fraction when integer) that cuts span into at most about
// target intervals. The explorer's axes use it too.
func NiceStep(span float64, target int, integer bool) float64 {
	raw := span / float64(target)
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		s := m * mag
		if integer && s != math.Trunc(s) {
			// 2.5 (or any fraction) is not a step of an integer axis.
			continue
		}
		if s >= raw*(1-1e-9) {
			return s
		}
	}
	return 10 * mag
}

// Ticks implements gplot.Ticker.
func (t niceTicker) Ticks(lo, hi float64) []gplot.Tick {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	if hi <= lo {
		return []gplot.Tick{{Value: lo, Label: TickLabel(lo, 1, math.Abs(lo))}}
	}
	step := NiceStep(hi-lo, tickTarget, t.integer)
	if t.integer && step < 1 {
		step = 1
	}
	// Minor ticks as matplotlib's AutoMinorLocator: four between steps of
	// 1, 2.5 and 5, three between steps of 2.
	minor := step / 5
	if m := step / mantissaMag(step); math.Abs(m-2) < 1e-9 {
		minor = step / 4
	}
	if t.integer && (minor < 1 || minor != math.Trunc(minor)) {
		minor = step
	}
	scale := math.Max(math.Abs(lo), math.Abs(hi))
	var ticks []gplot.Tick
	eps := step * 1e-9
	for k := math.Ceil((lo - eps) / minor); ; k++ {
		v := k * minor
		if v > hi+eps {
			break
		}
		if len(ticks) > 1000 {
			break // a degenerate range; never loop for ever
		}
		major := math.Abs(math.Remainder(v, step)) < minor*1e-6
		if major {
			ticks = append(ticks, gplot.Tick{Value: v, Label: TickLabel(v, step, scale)})
		} else {
			ticks = append(ticks, gplot.Tick{Value: v})
		}
	}
	return ticks
}

func mantissaMag(v float64) float64 {
	if v <= 0 {
		return 1
	}
	return math.Pow(10, math.Floor(math.Log10(v)))
}

// decimals is how many digits after the point x needs (at most 6).
func decimals(x float64) int {
	x = math.Abs(x)
	for d := 0; d < 6; d++ {
		p := x * math.Pow(10, float64(d))
		if math.Abs(p-math.Round(p)) < 1e-6*math.Max(1, p) {
			return d
		}
	}
	return 6
}

// TickLabel writes v for an axis whose step is step and whose largest
// magnitude is scale: as short as it can be, with an SI suffix from 10,000
// up ("2.5k", "1.5M").
func TickLabel(v, step, scale float64) string {
	if math.Abs(v) < math.Abs(step)*1e-9 {
		return "0"
	}
	div, suffix := 1.0, ""
	switch {
	case scale >= 1e9:
		div, suffix = 1e9, "G"
	case scale >= 1e6:
		div, suffix = 1e6, "M"
	case scale >= 1e4:
		div, suffix = 1e3, "k"
	}
	// Each label as short as it can be: "1", "1.5", "2.5k".
	return strconv.FormatFloat(v/div, 'f', decimals(v/div), 64) + suffix
}
