package snapshot

// A timeline's stacks: their numbers, their sites, the frames of an
// interval, and the stacks of the blocks alive before the trace.

import "unsafe"

// siteOf is the site of iv's stack: read by stack number when it has one,
// else from names.
func (t *Timeline) siteOf(iv *Interval, names *siteNames) string {
	if k := int(iv.Stack); k != 0 && k <= len(t.siteID) {
		return t.siteName[t.siteID[k-1]]
	}
	return names.of(t.FramesOf(iv))
}

// siteNumber is siteOf as a site number, or -1 with the site's text for a
// site no stack of the snapshot has.
func (t *Timeline) siteNumber(iv *Interval, names *siteNames) (int32, string) {
	if k := int(iv.Stack); k != 0 && k <= len(t.siteID) {
		return t.siteID[k-1], ""
	}
	name := names.of(t.FramesOf(iv))
	if id, ok := t.siteIndex[name]; ok {
		return id, ""
	}
	return -1, name
}

// numberSites numbers the sites of the snapshot's stacks: sites are frames,
// a few thousand, where stacks may be hundreds of thousands, so tallies by
// site add into arrays instead of hashing a name per allocation. A
// timeline that shares its stacks' facts (stackShare) takes the numbers
// made for the first device.
func (t *Timeline) numberSites(byStack []stackTraits) {
	if t.share != nil {
		t.share.sitesOnce.Do(func() { t.share.sites = numberSites(byStack, t.stacks) })
		t.siteID, t.siteName, t.siteIndex = t.share.sites.id, t.share.sites.name, t.share.sites.index
		return
	}
	n := numberSites(byStack, t.stacks)
	t.siteID, t.siteName, t.siteIndex = n.id, n.name, n.index
}

// siteNumbers is the site of each stack by stack number less one (id),
// each site's text (name) and the number of each text (index).
type siteNumbers struct {
	id    []int32
	name  []string
	index map[string]int32
}

func numberSites(byStack []stackTraits, stacks []Stack) siteNumbers {
	n := siteNumbers{id: make([]int32, len(byStack)), name: []string{noStack}}
	// The distinct frames that name a site first (n.id holds 1 + each
	// stack's), then their texts: the map of texts is made once at its
	// size. Grown as they came, its rehashing was half of this on w8
	// (200k frames, most of them sites).
	byFrame := newFrameCache[int32]()
	byFrame.useTable(tableOf(stacks))
	var frames []*Frame
	for k := range byStack {
		p := byStack[k].sitePos
		if p == 0 {
			continue // site 0
		}
		f := stacks[k].At(int(p - 1))
		i, ok := byFrame.Get(f)
		if !ok {
			i = int32(len(frames))
			frames = append(frames, f)
			byFrame.Put(f, i)
		}
		n.id[k] = i + 1
	}
	n.index = make(map[string]int32, len(frames)+1)
	n.index[noStack] = 0
	site := make([]int32, len(frames)+1) // by 1 + frame: its site
	for i, f := range frames {
		// Frames of one text (C++ overloads) share a site.
		name := SiteText(*f)
		if name == "" {
			continue // site 0
		}
		id, ok := n.index[name]
		if !ok {
			id = int32(len(n.name))
			n.name = append(n.name, name)
			n.index[name] = id
		}
		site[i+1] = id
	}
	for k, i := range n.id {
		n.id[k] = site[i]
	}
	return n
}

// stackID is e's stack number when it names one of the snapshot's stacks,
// else 0.
func (t *Timeline) stackID(e *TraceEntry) uint32 {
	if int(e.Stack) <= len(t.stacks) {
		return e.Stack
	}
	return 0
}

// blockStackCache remembers, by stack, the blockStacks entry of the
// stacks added last: a table of sets of two, keyed as categorize keys
// stacks (stackKeyOf), so its memory is fixed. A stack it has forgotten is
// added again, which costs a decision, not a wrong one: 300k blocks on
// distinct stacks kept in a table that grows were 23 MiB more at the
// peak, for nothing. A set holds two stacks, the one found last first:
// with one, two stacks of the same slot (20 stacks in 8,192 slots, one
// time in 40, by where the heap put them) took turns and added themselves
// again at each turn, 600 entries for 12k blocks.
type blockStackCache struct {
	keys [blockStackWays]uint64
	at   [blockStackWays]uint32
}

// blockStackWays is the stacks blockStackCache remembers at most.
const (
	blockStackBits = 13
	blockStackWays = 1 << blockStackBits
)

// blockStack is 1 + the index of st in blockStacks, added unless recent
// has it.
func (t *Timeline) blockStack(st Stack, recent *blockStackCache) uint32 {
	k, keyed := stackKeyOf(uintptr(unsafe.Pointer(st.Key())), st.Len())
	set := ((k * 0x9e3779b97f4a7c15) >> (64 - blockStackBits)) &^ 1
	if keyed {
		if recent.keys[set] == k && recent.at[set] != 0 {
			return recent.at[set]
		}
		if at := recent.at[set|1]; recent.keys[set|1] == k && at != 0 {
			recent.keys[set|1], recent.at[set|1] = recent.keys[set], recent.at[set]
			recent.keys[set], recent.at[set] = k, at
			return at
		}
	}
	t.blockStacks = append(t.blockStacks, st)
	if keyed {
		recent.keys[set|1], recent.at[set|1] = recent.keys[set], recent.at[set]
		recent.keys[set], recent.at[set] = k, uint32(len(t.blockStacks))
	}
	return uint32(len(t.blockStacks))
}

// FramesOf returns the call stack of iv's alloc (that of its free for an
// interval whose alloc came before the trace; the block's for a block alive
// before it).
func (t *Timeline) FramesOf(iv *Interval) Stack {
	if k := iv.Stack; k != 0 && int(k) <= len(t.stacks) {
		return t.stacks[k-1]
	}
	if k := iv.block; k != 0 && int(k) <= len(t.blockStacks) {
		return t.blockStacks[k-1]
	}
	return Stack{}
}

// FramesAt returns the call stack of event i.
func (t *Timeline) FramesAt(i int) Stack {
	if k := t.Events[i].Stack; k != 0 && int(k) <= len(t.stacks) {
		return t.stacks[k-1]
	}
	return Stack{}
}
