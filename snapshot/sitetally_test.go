package snapshot

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSiteTallyAgreesWithNames: the tally by site number gives the same top
// sites as a map by site text, on real traces (Python stacks; C++ stacks,
// where overloads of one function are distinct frames of one site; blocks
// alive before the trace, which have no stack number and are tallied by
// name, merged with the numbered site of the same text), for subsets of
// every size, one tally reused across them as the stages reuse it.
func TestSiteTallyAgreesWithNames(t *testing.T) {
	merged := 0 // unnumbered intervals whose site a stack also has
	for _, path := range []string{
		"../testdata/snapshots/h100/gpt_adamw.pickle.gz",
		"../testdata/snapshots/h100/train_cpp_stacks.pickle.gz",
		"../testdata/snapshots/synthetic/base.pickle",
		"../testdata/snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle",
	} {
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		for _, dev := range s.Devices() {
			tl := Replay(s, dev, nil)
			if tl == nil || len(tl.Intervals) == 0 {
				continue
			}
			names := newSiteNames()
			for j := range tl.Intervals {
				if iv := &tl.Intervals[j]; iv.Stack == 0 {
					if id, _ := tl.siteNumber(iv, names); id >= 0 {
						merged++
					}
				}
			}
			rng := rand.New(rand.NewPCG(uint64(len(tl.Intervals)), 5))
			tally := newSiteTally(tl, names)
			for _, frac := range []int{0, 1, 10, 50, 100} {
				var subset []int
				m := map[string]*SiteBytes{}
				for j := range tl.Intervals {
					if rng.IntN(100) < frac {
						subset = append(subset, j)
						iv := &tl.Intervals[j]
						name := tl.siteOf(iv, newSiteNames())
						if m[name] == nil {
							m[name] = &SiteBytes{Site: name}
						}
						m[name].Bytes += iv.Size
						m[name].Count++
					}
				}
				for _, k := range []int{5, len(m) + 1} {
					for _, j := range subset {
						tally.add(&tl.Intervals[j])
					}
					if got, want := tally.top(k), topSites(m, k); !slices.Equal(got, want) {
						t.Errorf("%s dev %d, %d%% of %d intervals, k=%d:\n got %v\nwant %v",
							path, dev, frac, len(tl.Intervals), k, got, want)
					}
					if again := tally.top(k); len(again) != 0 {
						t.Fatalf("%s: the tally kept %v after top", path, again)
					}
				}
			}
		}
	}
	if merged == 0 {
		t.Error("no unnumbered interval shares a numbered site: the merge is untested")
	}
}
