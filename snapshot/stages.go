package snapshot

import (
	"cmp"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"memscope/internal/par"
)

// Stage is one annotated range of the trace: a record_function range
// (ProfilerStep#N, Optimizer.step#AdamW.step, a user's own name) from its
// START to its END annotation, as Mosaic measures memory per stage.
type Stage struct {
	Name string
	// Occurrence counts the earlier stages of the same name (0 for the
	// first), so "Optimizer.step #3" can be told from the others.
	Occurrence int
	// Depth is how many stages enclose this one.
	Depth          int
	StartUS, EndUS int64
	// First and Last are the trace events inside the stage, [First, Last);
	// First == Last when no event fell inside it.
	First, Last int
	// OpenStart is set when the trace began inside the stage (an END with no
	// START); OpenEnd when it ended inside it (a START with no END).
	OpenStart, OpenEnd bool
	// StartActive is the active memory when the stage began, EndActive when
	// it ended, and Peak the highest within it, reached after event
	// PeakEvent (-1: at the start).
	StartActive, EndActive, Peak int64
	PeakEvent                    int
	// Allocated is the bytes and count of allocations made in the stage.
	Allocated      int64
	AllocatedCount int
	// Top are the stage's own allocations live at its peak, by call site,
	// largest first: what the stage added to reach it.
	Top []SiteBytes
}

// Delta is the active memory the stage left behind (end minus start).
func (s *Stage) Delta() int64 { return s.EndActive - s.StartActive }

// SiteBytes is memory attributed to one call site (see Location).
type SiteBytes struct {
	Site  string
	Bytes int64
	Count int
}

// stageTopSites is how many call sites a stage lists.
const stageTopSites = 5

// noStack names the call site of an allocation recorded without frames.
const noStack = "(no stack)"

// siteNames caches Location by the stack's backing array: stacks are shared
// between events of the same call path. A snapshot of distinct stacks still
// has hundreds of thousands of them over a few thousand distinct frames, so
// the frame tests (noise, plumbing: a dozen substring searches each) and the
// formatted location are cached per frame too.
type siteNames struct {
	byStack map[stackKey]string
	kind    map[frameName]siteKind
	kindOf  *frameCache[siteKind]
	textOf  *frameCache[string]
}

type frameName struct{ file, name string }

// stackKey names a stack by its backing array and length (a shorter stack
// may share the start of a longer one's array).
type stackKey struct {
	first StackKey
	n     int
}

func newSiteNames() *siteNames {
	return &siteNames{byStack: map[stackKey]string{}, kind: map[frameName]siteKind{}, kindOf: newFrameCache[siteKind](), textOf: newFrameCache[string]()}
}

func (m *siteNames) of(st Stack) string {
	if st.Len() == 0 {
		return noStack
	}
	k := stackKey{st.Key(), st.Len()}
	if s, ok := m.byStack[k]; ok {
		return s
	}
	s := noStack
	if i := m.locationIndex(st); i >= 0 {
		s = m.frameText(st.At(i))
	}
	m.byStack[k] = s
	return s
}

// locationIndex is SiteIndex with the frame tests cached.
func (m *siteNames) locationIndex(st Stack) int {
	return siteIndex(st, m.siteKind)
}

// siteKind is classifySite cached by frame (a snapshot's stacks point at
// its table of distinct frames) and by file and function.
func (m *siteNames) siteKind(f *Frame) siteKind {
	if k, ok := m.kindOf.Get(f); ok {
		return k
	}
	k := m.classify(f)
	m.kindOf.Put(f, k)
	return k
}

// classify is siteKind without the cache by frame: by file and function.
func (m *siteNames) classify(f *Frame) siteKind {
	key := frameName{f.Filename, f.Name}
	k, ok := m.kind[key]
	if !ok {
		k = classifySite(*f)
		m.kind[key] = k
	}
	return k
}

// frameText is format cached by frame: stacks point into the snapshot's
// table of distinct frames.
func (m *siteNames) frameText(f *Frame) string {
	if s, ok := m.textOf.Get(f); ok {
		return s
	}
	s := SiteText(*f)
	m.textOf.Put(f, s)
	return s
}

// useTable keeps what is read from t's frames in arrays by index.
func (m *siteNames) useTable(t *FrameTable) {
	m.kindOf.useTable(t)
}

// byStart is the timeline's intervals ordered by their start event (ties
// in index order). Replay appends them in the order of their allocs,
// except those whose alloc came before the trace (Start -1), so one pass
// usually finds the order: those first, then the rest as they are. Sorting
// a million intervals that were nearly in order took 10 ms.
func (t *Timeline) byStart() []int32 {
	idx := make([]int32, 0, len(t.Intervals))
	pre, last, inOrder := 0, int32(-1), true
	for i := range t.Intervals {
		switch s := t.Intervals[i].Start; {
		case s == -1:
			pre++
		case s < last:
			inOrder = false
		default:
			last = s
		}
	}
	if inOrder {
		idx = idx[:len(t.Intervals)]
		p, q := 0, pre
		for i := range t.Intervals {
			if t.Intervals[i].Start == -1 {
				idx[p] = int32(i)
				p++
			} else {
				idx[q] = int32(i)
				q++
			}
		}
		return idx
	}
	for i := range t.Intervals {
		idx = append(idx, int32(i))
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(t.Intervals[a].Start, t.Intervals[b].Start) })
	return idx
}

// eventAt is the first event at or after time us (len(events) when none).
func (t *Timeline) eventAt(us int64) int {
	return sort.Search(len(t.Events), func(i int) bool { return t.Events[i].TimeUS >= us })
}

// Stages pairs the device's START and END annotations into stages, in the
// order they began. A START is closed by the next END of the same name
// (innermost first, as record_function ranges nest). Annotations of other
// devices, and every annotation when the trace has no timestamps, are
// ignored: a stage is placed on the trace by time.
func (t *Timeline) Stages(anns []Annotation) []Stage {
	out := t.stageRanges(anns)
	t.measureStages(out)
	return out
}

// stageRanges pairs the annotations into stages placed on the trace
// (First, Last), without measuring them.
func (t *Timeline) stageRanges(anns []Annotation) []Stage {
	if len(t.Events) == 0 || t.Events[len(t.Events)-1].TimeUS == 0 {
		return nil
	}
	mine := make([]Annotation, 0, len(anns))
	for _, a := range anns {
		if a.Device == t.Device && a.TimeUS != 0 {
			mine = append(mine, a)
		}
	}
	slices.SortStableFunc(mine, func(a, b Annotation) int { return cmp.Compare(a.TimeUS, b.TimeUS) })
	out := make([]Stage, 0, len(mine)) // a stage for every START, and for an END alone
	open := map[string][]int{}         // name -> indices in out of its open stages
	depth := 0
	firstUS := t.Events[0].TimeUS
	for _, a := range mine {
		switch strings.ToUpper(a.Stage) {
		case "START":
			open[a.Name] = append(open[a.Name], len(out))
			out = append(out, Stage{Name: a.Name, StartUS: a.TimeUS, Depth: depth, OpenEnd: true})
			depth++
		case "END":
			if st := open[a.Name]; len(st) > 0 {
				k := st[len(st)-1]
				open[a.Name] = st[:len(st)-1]
				out[k].EndUS, out[k].OpenEnd = a.TimeUS, false
				depth = max(0, depth-1)
				continue
			}
			// The trace began inside this stage.
			out = append(out, Stage{Name: a.Name, StartUS: min(firstUS, a.TimeUS), EndUS: a.TimeUS, OpenStart: true})
		}
	}
	lastUS := t.Events[len(t.Events)-1].TimeUS
	out = slices.DeleteFunc(out, func(s Stage) bool {
		return s.StartUS > lastUS || (!s.OpenEnd && s.EndUS < firstUS)
	})
	slices.SortStableFunc(out, func(a, b Stage) int { return cmp.Compare(a.StartUS, b.StartUS) })
	seen := map[string]int{}
	for i := range out {
		s := &out[i]
		s.Occurrence = seen[s.Name]
		seen[s.Name]++
		s.First = t.eventAt(s.StartUS)
		s.Last = len(t.Events)
		if s.OpenEnd {
			s.EndUS = max(s.EndUS, lastUS)
		} else {
			s.Last = t.eventAt(s.EndUS + 1)
		}
	}
	return out
}

// measureStages measures the stages on every core: each stage reads the
// replay alone and writes only itself (a run of 242 steps over 150k
// distinct stacks took 22 ms on one core).
func (t *Timeline) measureStages(stages []Stage) {
	order := t.byStart()
	var next atomic.Int64
	var wg par.Group
	for range min(runtime.GOMAXPROCS(0), len(stages)) {
		wg.Go(func() {
			tally := newSiteTally(t, newSiteNames()) // not safe for concurrent use: one each
			for {
				i := int(next.Add(1)) - 1
				if i >= len(stages) {
					return
				}
				t.measureStage(&stages[i], order, tally)
			}
		})
	}
	wg.Wait()
}

// measureStage fills a stage's memory figures from the replay.
func (t *Timeline) measureStage(s *Stage, order []int32, tally *siteTally) {
	s.StartActive = t.ActiveAt(s.First - 1)
	s.EndActive = t.ActiveAt(s.Last - 1)
	s.Peak, s.PeakEvent = s.StartActive, -1
	for i := s.First; i < s.Last; i++ {
		if v := t.Active[i]; v > s.Peak {
			s.Peak, s.PeakEvent = v, i
		}
	}
	peakAt := int32(s.First - 1)
	if s.PeakEvent >= 0 {
		peakAt = int32(s.PeakEvent)
	}
	lo := sort.Search(len(order), func(k int) bool { return t.Intervals[order[k]].Start >= int32(s.First) })
	for _, j := range order[lo:] {
		iv := &t.Intervals[j]
		if iv.Start >= int32(s.Last) {
			break
		}
		s.Allocated += iv.Size
		s.AllocatedCount++
		if iv.Start <= peakAt && iv.End > peakAt {
			tally.add(iv)
		}
	}
	s.Top = tally.top(stageTopSites)
}

// topSites returns the k largest sites, ties by name.
func topSites(m map[string]*SiteBytes, k int) []SiteBytes {
	sel := topK{k: k, out: make([]SiteBytes, 0, min(k, len(m)))}
	for _, v := range m {
		sel.offer(*v)
	}
	return sel.out
}

// topK keeps the k largest sites offered, ties by name. Only the k best are
// kept as they come: a stage of a trace of distinct stacks has tens of
// thousands of sites, and sorting them all for five was a third of the
// stage's cost.
type topK struct {
	k   int
	out []SiteBytes
}

func (s *topK) offer(v SiteBytes) {
	better := func(a, b *SiteBytes) bool {
		return a.Bytes > b.Bytes || (a.Bytes == b.Bytes && a.Site < b.Site)
	}
	k := s.k
	if k <= 0 || (len(s.out) == k && !better(&v, &s.out[k-1])) {
		return
	}
	if len(s.out) < k {
		s.out = append(s.out, v)
	} else {
		s.out[k-1] = v
	}
	for i := len(s.out) - 1; i > 0 && better(&s.out[i], &s.out[i-1]); i-- {
		s.out[i], s.out[i-1] = s.out[i-1], s.out[i]
	}
}

// StageGroup gathers the stages of one name across the trace; numbered
// names (ProfilerStep#12) share the group of their stem (ProfilerStep#N).
type StageGroup struct {
	Name  string
	Count int
	// Peak is the highest peak of the group, in stage Stages[PeakStage].
	Peak      int64
	PeakStage int
	// MeanDelta is the average active memory a stage of the group left
	// behind; MaxDelta the largest.
	MeanDelta, MaxDelta int64
	// Allocated is the bytes allocated by all of them.
	Allocated int64
	Stages    []int
}

var stageNumber = regexp.MustCompile(`#\d+$`)

// GroupStages groups stages by name (see StageGroup), in the order each
// name first appears.
func GroupStages(stages []Stage) []StageGroup {
	var out []StageGroup
	idx := map[string]int{}
	for i := range stages {
		s := &stages[i]
		name := stageNumber.ReplaceAllString(s.Name, "#N")
		k, ok := idx[name]
		if !ok {
			k = len(out)
			idx[name] = k
			out = append(out, StageGroup{Name: name, PeakStage: i, Peak: s.Peak, MaxDelta: s.Delta()})
		}
		g := &out[k]
		g.Count++
		g.Stages = append(g.Stages, i)
		g.Allocated += s.Allocated
		if s.Peak > g.Peak {
			g.Peak, g.PeakStage = s.Peak, i
		}
		g.MaxDelta = max(g.MaxDelta, s.Delta())
		g.MeanDelta += s.Delta()
	}
	for i := range out {
		out[i].MeanDelta /= int64(out[i].Count)
	}
	return out
}
