package trace

import "math"

// MinMax downsamples ys into at most 2*buckets points, keeping the smallest
// and largest value of each bucket in the order they occur, so every local
// peak and trough survives: a 100k-sample iteration drawn in 60 columns
// still shows its true peak. It returns the indices of the kept samples,
// ascending. NaN values are never kept.
func MinMax(ys []float64, buckets int) []int {
	n := len(ys)
	if buckets <= 0 || n == 0 {
		return nil
	}
	if n <= 2*buckets {
		out := make([]int, 0, n)
		for i, y := range ys {
			if !math.IsNaN(y) {
				out = append(out, i)
			}
		}
		return out
	}
	out := make([]int, 0, 2*buckets)
	for b := 0; b < buckets; b++ {
		lo, hi := b*n/buckets, (b+1)*n/buckets
		imin, imax := -1, -1
		for i := lo; i < hi; i++ {
			y := ys[i]
			if y != y { // NaN
				continue
			}
			if imin < 0 || y < ys[imin] {
				imin = i
			}
			if imax < 0 || y > ys[imax] {
				imax = i
			}
		}
		switch {
		case imin < 0:
		case imin == imax:
			out = append(out, imin)
		case imin < imax:
			out = append(out, imin, imax)
		default:
			out = append(out, imax, imin)
		}
	}
	return out
}

// Columns reduces ys to cols columns, each holding the min and max of the
// samples that fall in it (by index); columns with no sample hold NaN. It is
// what sparklines and heatmaps draw.
func Columns(ys []float64, cols int) (mins, maxs []float64) {
	mins, maxs = make([]float64, cols), make([]float64, cols)
	n := len(ys)
	for c := 0; c < cols; c++ {
		lo, hi := c*n/cols, (c+1)*n/cols
		if hi == lo && n > 0 && n < cols {
			// Fewer samples than columns: stretch each sample.
			lo = c * n / cols
			hi = lo + 1
		}
		mn, mx := math.NaN(), math.NaN()
		for i := lo; i < hi && i < n; i++ {
			y := ys[i]
			if y != y {
				continue
			}
			if mn != mn || y < mn {
				mn = y
			}
			if mx != mx || y > mx {
				mx = y
			}
		}
		mins[c], maxs[c] = mn, mx
	}
	return mins, maxs
}

// TimeColumns reduces a series to cols columns over time: column c covers
// [origin + c*span/cols, origin + (c+1)*span/cols) and holds the largest
// value the series takes there, the samples joined by straight lines (as a
// chart draws them). A plateau held for 40% of the time fills 40% of the
// columns however few samples it has, and a series that ends early leaves
// the columns after its end NaN, so two runs of different lengths on one
// span show their lengths. Samples with a NaN time or value are ignored;
// ts must be ascending.
func TimeColumns(ts, ys []float64, cols int, origin, span float64) []float64 {
	out := make([]float64, cols)
	for c := range out {
		out[c] = math.NaN()
	}
	type pt struct{ x, y float64 }
	pts := make([]pt, 0, len(ts))
	for i := range ts {
		if i < len(ys) && !math.IsNaN(ts[i]) && !math.IsNaN(ys[i]) && !math.IsInf(ys[i], 0) {
			pts = append(pts, pt{ts[i] - origin, ys[i]})
		}
	}
	if cols <= 0 || len(pts) == 0 {
		return out
	}
	if !(span > 0) {
		out[0] = pts[0].y
		for _, p := range pts {
			out[0] = math.Max(out[0], p.y)
		}
		return out
	}
	w := span / float64(cols)
	// at interpolates the series at x, given j with pts[j].x <= x.
	at := func(j int, x float64) float64 {
		if j+1 >= len(pts) || pts[j+1].x == pts[j].x {
			return pts[j].y
		}
		a, b := pts[j], pts[j+1]
		return a.y + (b.y-a.y)*(x-a.x)/(b.x-a.x)
	}
	first, last := pts[0].x, pts[len(pts)-1].x
	j := 0
	for c := 0; c < cols; c++ {
		lo, hi := float64(c)*w, float64(c+1)*w
		if hi <= first && !(c == 0 && first <= 0) {
			continue
		}
		if lo > last {
			break
		}
		m := math.NaN()
		take := func(v float64) {
			if math.IsNaN(m) || v > m {
				m = v
			}
		}
		for j+1 < len(pts) && pts[j+1].x <= lo {
			j++
		}
		if pts[j].x <= lo {
			take(at(j, lo))
		}
		k := j
		for k < len(pts) && pts[k].x < hi {
			if pts[k].x >= lo {
				take(pts[k].y)
			}
			k++
		}
		if k > 0 && hi <= last {
			take(at(k-1, hi))
		}
		out[c] = m
	}
	return out
}
