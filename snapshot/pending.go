package snapshot

import "context"

// Temporary definitions until the estimate and replay work lands.

type EstimateAnalysis struct{}

func estimateJSON(e *EstimateAnalysis, topN int) any                         { return []any{} }
func writeEstimateText(tw *textWriter, e *EstimateAnalysis, o ReportOptions) {}

type Estimate struct{}

func OpenEstimate(ctx context.Context, path string) (*Estimate, error) { return nil, nil }
func AnalyzeEstimate(e *Estimate, c *Categorizer) *EstimateAnalysis    { return nil }
