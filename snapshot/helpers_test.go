package snapshot

import "math"

func mathFloat64bits(f float64) uint64 { return math.Float64bits(f) }
