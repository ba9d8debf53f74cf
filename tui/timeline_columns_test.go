package tui

import (
	"testing"

	"memscope/snapshot"
)

// TestColumnsLinearInTime: with the x axis in time, columns are equal
// slices of time: ten events in the first 9 ms and ten more ten seconds
// later leave the columns between them on the level of the tenth event
// (the idle gap shows); by event index each column holds one event.
func TestColumnsLinearInTime(t *testing.T) {
	var trace []snapshot.TraceEntry
	for i := range 20 {
		us := int64(1_000_000 + i*1000)
		if i >= 10 {
			us += 10_000_000
		}
		trace = append(trace, snapshot.TraceEntry{Addr: uint64(0x1000 * (i + 1)), Size: int64(1 << (i % 5)), TimeUS: us}.With(snapshot.ActionAlloc))
	}
	tl := snapshot.Replay(&snapshot.Snapshot{Traces: [][]snapshot.TraceEntry{trace}}, 0, nil)
	byTime, ok := columnEvents(tl, 0, 20, 20, true)
	if !ok {
		t.Fatal("a trace with growing times gives columns by time")
	}
	gap := 0
	for c, e := range byTime {
		if e == 9 {
			gap++
		}
		if c > 0 && e < byTime[c-1] {
			t.Fatalf("columns go back in time: %v", byTime)
		}
	}
	if gap < 15 || byTime[0] > 9 || byTime[19] < 10 {
		t.Errorf("by time: %v; want the ten-second gap over most columns", byTime)
	}
	byIndex, ok := columnEvents(tl, 0, 20, 20, false)
	for c, e := range byIndex {
		if e != c || ok {
			t.Fatalf("by index each column holds its event: %v", byIndex)
		}
	}
	// Times that go back fall back to the index.
	trace[5].TimeUS = 1
	tl = snapshot.Replay(&snapshot.Snapshot{Traces: [][]snapshot.TraceEntry{trace}}, 0, nil)
	if _, ok := columnEvents(tl, 0, 20, 20, true); ok {
		t.Error("unsorted times still sliced by time")
	}
}
