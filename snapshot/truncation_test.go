package snapshot

import "testing"

// TestTraceWindow: frees of allocations the trace never saw are counted and
// make the trace incomplete unless the allocator says whether it
// overflowed; a trace of max_entries entries is full; OOMs are listed in
// order with their sizes.
func TestTraceWindow(t *testing.T) {
	cases := []struct {
		name      string
		unseen    int // frees of addresses never allocated (a pair, then a lone completion)
		settings  Settings
		wantTrunc string // the reason's start; "" for a complete trace
	}{
		{name: "every free seen", wantTrunc: ""},
		{name: "one unseen free", unseen: 1, wantTrunc: "the trace frees memory it never saw"},
		{name: "two unseen frees", unseen: 2, wantTrunc: "the trace frees memory it never saw"},
		{name: "the allocator says it did not overflow", unseen: 2,
			settings: Settings{Present: true, TraceOverflowedKnown: true}, wantTrunc: ""},
		{name: "the allocator says it overflowed", settings: Settings{Present: true, TraceOverflowedKnown: true, TraceOverflowed: true},
			wantTrunc: "the allocator reports that the trace ring buffer overflowed"},
		{name: "max_entries entries", settings: Settings{Present: true, TraceMaxEntries: 8}, wantTrunc: "the trace holds exactly trace_alloc_max_entries"},
		{name: "fewer than max_entries", settings: Settings{Present: true, TraceMaxEntries: 100}, wantTrunc: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProgram()
			p.alloc(0x1000, 1<<20, "a")
			p.ev(TraceEntry{Size: 3 << 30}.With(ActionOOM))
			if c.unseen > 0 {
				p.sizes[0x9000] = 4096
				p.free(0x9000)
			}
			if c.unseen > 1 {
				p.sizes[0xa000] = 8192
				p.freeComplete(0xa000)
			}
			p.free(0x1000)
			p.ev(TraceEntry{Size: 5 << 30}.With(ActionOOM))
			for len(p.trace) < 8 {
				p.alloc(uint64(0x100000+len(p.trace)), 512, "b")
			}
			p.s.Settings = c.settings
			st := p.analyze()
			if st.FreesBeforeWindow != c.unseen {
				t.Errorf("%d frees before the window, want %d", st.FreesBeforeWindow, c.unseen)
			}
			if st.TraceTruncated != (c.wantTrunc != "") || len(st.TruncationReason) < len(c.wantTrunc) || st.TruncationReason[:len(c.wantTrunc)] != c.wantTrunc {
				t.Errorf("truncated %v (%q), want %q", st.TraceTruncated, st.TruncationReason, c.wantTrunc)
			}
			if len(st.OOMs) != 2 || st.OOMs[0].Size != 3<<30 || st.OOMs[1].Size != 5<<30 || st.OOMs[0].Index != 1 || st.OOMs[1].Index <= st.OOMs[0].Index ||
				p.trace[st.OOMs[1].Index].Action() != ActionOOM {
				t.Errorf("OOMs %+v", st.OOMs)
			}
		})
	}
}
