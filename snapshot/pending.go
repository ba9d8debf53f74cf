package snapshot

import "context"

// Temporary definitions until the estimate and replay work lands.

type EstimateAnalysis struct{}
type Peak struct {
	Allocated  int64
	EventIndex int
	TimeUS     int64
	Live       []Allocation
}

func estimateJSON(e *EstimateAnalysis, topN int) any              { return []any{} }
func writeEstimateText(tw *textWriter, e *EstimateAnalysis, o ReportOptions) {}
func writePeakText(tw *textWriter, p *Peak, n int)                   {}

type Estimate struct{}

func OpenEstimate(ctx context.Context, path string) (*Estimate, error) { return nil, nil }
func AnalyzeEstimate(e *Estimate, c *Categorizer) *EstimateAnalysis   { return nil }
