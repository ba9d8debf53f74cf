// Package palette holds the colours memscope gives to categories and
// series, shared by the TUI and the exported plots so a category looks the
// same everywhere.
package palette

// Category colours (hex), chosen to stay distinct on dark and light
// backgrounds and for common colour-vision deficiencies (Okabe-Ito based).
var categories = map[string]string{
	"Expert/MoE":      "#CC79A7",
	"Attention":       "#E69F00",
	"Linear/MatMul":   "#56B4E9",
	"Optimizer State": "#D55E00",
	"Communication":   "#009E73",
	"FSDP":            "#0072B2",
	"Gradient":        "#F0E442",
	"Activation":      "#8E7CC3",
	"Unknown":         "#999999",
}

// extra colours for user-defined categories, in order of first use.
var extra = []string{"#7FC97F", "#BEAED4", "#FDC086", "#386CB0", "#F0027F", "#BF5B17", "#666666"}

// Category returns the colour of a category name. Unknown names get a
// stable colour from their hash.
func Category(name string) string {
	if c, ok := categories[name]; ok {
		return c
	}
	h := 0
	for _, r := range name {
		h = h*31 + int(r)
	}
	if h < 0 {
		h = -h
	}
	return extra[h%len(extra)]
}

// Series colours for real vs simulated traces and the reference lines.
const (
	Real        = "#0072B2"
	Sim         = "#E69F00"
	Reserved    = "#999999"
	Static      = "#009E73"
	Theoretical = "#D55E00"
	Peak        = "#D55E00"
	OOM         = "#FF0000"
)

// States of allocator blocks, for segment maps.
const (
	Allocated   = "#56B4E9"
	PendingFree = "#F0E442"
	CachedFree  = "#555555"
	Rounding    = "#D55E00"
)

// bands are colours for bands that are not categories (call sites), in
// order: distinct on dark and light backgrounds.
var bands = []string{"#4E79A7", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#76B7B2", "#EDC948", "#9C755F", "#BAB0AC", "#FF9DA7"}

// Band returns the colour of the i-th band of a stacked chart.
func Band(i int) string { return bands[i%len(bands)] }
