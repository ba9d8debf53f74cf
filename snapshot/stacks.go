package snapshot

// A timeline's stacks: their numbers, their sites, the frames of an
// interval, and the stacks of the blocks alive before the trace.

import (
	"hash/maphash"
	"runtime"
	"slices"

	"memscope/internal/par"
)

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
	if id, ok := t.siteIndex.find(name); ok {
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
	index siteLookup
}

// siteLookup finds a site's number by its text. Its maps are shards, by
// the text's hash, so that several goroutines fill them at once: a text
// maps to its place in site, which holds the number.
type siteLookup struct {
	seed   maphash.Seed
	shards []map[string]int32
	site   []int32
}

// find is the number of the site whose text is name.
func (x *siteLookup) find(name string) (int32, bool) {
	if len(x.shards) == 0 {
		return 0, false
	}
	i, ok := x.shards[x.shard(name)][name]
	if !ok {
		return 0, false
	}
	return x.site[i], true
}

func (x *siteLookup) shard(name string) int {
	return int(maphash.String(x.seed, name) % uint64(len(x.shards)))
}

// len is the number of texts it holds.
func (x *siteLookup) len() int {
	n := 0
	for _, m := range x.shards {
		n += len(m)
	}
	return n
}

// sitesPerWorker is the fewest site frames worth a goroutine of their own;
// maxSiteShards bounds the goroutines (and shards), whose numbers are
// kept in a byte.
const (
	sitesPerWorker = 1 << 13
	maxSiteShards  = 64
)

var _ [255 - maxSiteShards]struct{} // a shard's number fits in a uint8

func numberSites(byStack []stackTraits, stacks []Stack) siteNumbers {
	return numberSitesOn(byStack, stacks, runtime.GOMAXPROCS(0), sitesPerWorker)
}

// numberSitesOn is numberSites on up to procs goroutines, each given
// perWorker site frames at least.
func numberSitesOn(byStack []stackTraits, stacks []Stack, procs, perWorker int) siteNumbers {
	n := siteNumbers{id: make([]int32, len(byStack))}
	// The distinct frames that name a site first (n.id holds 1 + each
	// stack's), then their texts.
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
	// Frames of one text (C++ overloads) share a site. The texts and the
	// first frame of each are found on every core, each goroutine
	// filling the shard of the texts whose hashes are its own: on one,
	// made and hashed one by one into a map, they were 20 ms of the
	// analysis of w8 (200k frames, most of them sites) and 90 ms of one
	// of 1.6M distinct frames, while the other core waited.
	workers := min(procs, maxSiteShards, max(1, len(frames)/perWorker))
	x := siteLookup{seed: maphash.MakeSeed(), shards: make([]map[string]int32, workers), site: make([]int32, len(frames)+1)}
	texts := make([]string, len(frames)+1) // by 1 + frame; 0 is noStack
	texts[0] = noStack
	shard := make([]uint8, len(frames)+1)
	shard[0] = uint8(x.shard(noStack))
	par.Each(workers, func(w int) {
		for i := 1 + w*len(frames)/workers; i < 1+(w+1)*len(frames)/workers; i++ {
			texts[i] = SiteText(*frames[i-1])
			shard[i] = uint8(x.shard(texts[i]))
		}
	})
	first := make([]int32, len(frames)+1) // by 1 + frame: where its text is first
	par.Each(workers, func(w int) {
		m := make(map[string]int32, len(frames)/workers+1)
		for i, t := range texts { // noStack first, number 0
			if int(shard[i]) != w || t == "" {
				continue
			}
			j, ok := m[t]
			if !ok {
				j = int32(i)
				m[t] = j
			}
			first[i] = j
		}
		x.shards[w] = m
	})
	// The numbers, in the order the frames came; the names written over
	// the texts (a site's number is never past its frame's place).
	names := texts[:1]
	for i := 1; i < len(texts); i++ {
		switch t := texts[i]; {
		case t == "":
			// site 0
		case first[i] == int32(i):
			x.site[i] = int32(len(names))
			names = append(names, t)
		default:
			x.site[i] = x.site[first[i]]
		}
	}
	clear(texts[len(names):]) // what is left past the names is not kept alive
	n.name, n.index = slices.Clip(names), x
	for k, i := range n.id {
		n.id[k] = x.site[i]
	}
	return n
}

// stackNumber is ref (a TraceEntry.Stack or Block.Stack) when it names
// one of the snapshot's stacks, else 0: the numbers intervals keep, which
// every reader then indexes the stacks by without checking again.
func (t *Timeline) stackNumber(ref uint32) uint32 {
	if int(ref) <= len(t.stacks) {
		return ref
	}
	return 0
}

// FramesOf returns the call stack of iv's alloc (that of its free for an
// interval whose alloc came before the trace; the block's for a block alive
// before it).
func (t *Timeline) FramesOf(iv *Interval) Stack {
	if k := iv.Stack; k != 0 && int(k) <= len(t.stacks) {
		return t.stacks[k-1]
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
