package snapshot

// siteTally sums bytes and allocations by site: by site number in arrays
// for the sites of the snapshot's stacks, by name for any other. A stage
// of a trace of distinct stacks has tens of thousands of live allocations
// at its peak; a map of names allocated a quarter of the analysis' garbage.
// One tally serves many stages (reset by top); it is not safe for
// concurrent use.
type siteTally struct {
	t       *Timeline
	names   *siteNames
	bytes   []int64
	count   []int32
	touched []int32 // the site numbers added to since the last reset
	other   map[string]*SiteBytes
}

func newSiteTally(t *Timeline, names *siteNames) *siteTally {
	return &siteTally{t: t, names: names}
}

// add counts iv at its site.
func (s *siteTally) add(iv *Interval) {
	id, name := s.t.siteNumber(iv, s.names)
	if id < 0 {
		if s.other == nil {
			s.other = map[string]*SiteBytes{}
		}
		sb := s.other[name]
		if sb == nil {
			sb = &SiteBytes{Site: name}
			s.other[name] = sb
		}
		sb.Bytes += iv.Size
		sb.Count++
		return
	}
	if s.bytes == nil {
		s.bytes = make([]int64, len(s.t.siteName))
		s.count = make([]int32, len(s.t.siteName))
	}
	if s.count[id] == 0 {
		s.touched = append(s.touched, id)
	}
	s.bytes[id] += iv.Size
	s.count[id]++
}

// top returns the k largest sites, ties by name, and empties the tally.
func (s *siteTally) top(k int) []SiteBytes {
	sel := topK{k: k, out: make([]SiteBytes, 0, min(k, len(s.touched)+len(s.other)))}
	for _, id := range s.touched {
		sel.offer(SiteBytes{Site: s.t.siteName[id], Bytes: s.bytes[id], Count: int(s.count[id])})
		s.bytes[id], s.count[id] = 0, 0
	}
	s.touched = s.touched[:0]
	for name, sb := range s.other {
		sel.offer(*sb)
		delete(s.other, name)
	}
	return sel.out
}
