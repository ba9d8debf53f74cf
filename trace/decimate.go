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
