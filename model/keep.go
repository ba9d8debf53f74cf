package model

import (
	"cmp"
	"io"
	"math"
	"os"
	"runtime/debug"
	"slices"
)

// DefaultKeep is the memory the explorer keeps in allocator snapshot
// analyses beside those on screen (Summary.Footprint's estimate). A
// watched folder where training writes a snapshot every few hundred
// steps, and keeps them all, otherwise grew the explorer by each file's
// analysis for as long as it ran; the bundled samples and most public
// snapshots (under 1 MB each) never reach it.
const DefaultKeep = 256 << 20

// KeepAll, given to SetKeep, keeps every analysis (a text report of all).
const KeepAll = math.MaxInt64

// SetKeep sets the memory of the allocator snapshot analyses kept (n <= 0
// restores DefaultKeep). Beyond it the least recently used analyses that
// Use does not name, but the last used, are let go (Unloaded): the Summary
// stays, and Use loads one again.
func (w *Workspace) SetKeep(n int64) {
	if n <= 0 {
		n = DefaultKeep
	}
	w.mu.Lock()
	w.keep = n
	w.mu.Unlock()
	w.evict()
}

// Use says which sources are in view (the snapshot shown, a diff's two):
// they are never unloaded, count as just used, and those Unloaded load
// again. Each call replaces the last one's set.
func (w *Workspace) Use(ids ...int) {
	var load []int
	w.mu.Lock()
	w.inView = map[int]bool{}
	for _, id := range ids {
		if id == 0 || w.inView[id] {
			continue
		}
		w.inView[id] = true
		w.tick++
		w.used[id] = w.tick
		for _, s := range w.sources {
			if s.ID == id && s.State == Unloaded && !w.reloading[id] {
				load = append(load, id)
			}
		}
	}
	w.mu.Unlock()
	for _, id := range load {
		w.startLoad(id)
	}
}

// deferLoad decides a lazy snapshot's first load (once): it waits for a
// use when the analyses held, the lazy loads in flight and this one's
// guess (guessFootprint) would pass keep, unless nothing is held or
// loading. A folder of hundreds of large snapshots otherwise had every one
// of them decoded at start, minutes of every core. A load not deferred
// holds its guess in guessed until it ends.
func (w *Workspace) deferLoad(src *Source) (wait bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.lazy[src.ID] {
		return false
	}
	delete(w.lazy, src.ID)
	if w.inView[src.ID] {
		return false
	}
	held := w.guessed
	for _, s := range w.sources {
		if s.Kind == KindSnapshot && s.State == Loaded && s.Analysis != nil {
			held += s.Summary.Footprint
		}
	}
	guess := guessFootprint(src.Paths[0])
	if held > 0 && held+guess > w.keep {
		return true
	}
	w.guessed += guess
	w.guesses[src.ID] += guess
	return false
}

// guessFootprint guesses the memory of a snapshot's analysis before it is
// loaded, from its file: the analyses measured 0.2-0.8 times a trace-heavy
// pickle's size (footprintPerEntry), and a gzip file holds 10-20 times its
// size.
func guessFootprint(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return footprintBase
	}
	n := st.Size()
	if f, err := os.Open(path); err == nil {
		var magic [2]byte
		if _, err := io.ReadFull(f, magic[:]); err == nil && magic == [2]byte{0x1f, 0x8b} {
			n *= 10
		}
		f.Close()
	}
	return max(n, footprintBase)
}

// evict unloads the least recently used allocator snapshots not in view
// (nor loading, nor the last used) while the analyses held take more than
// keep.
func (w *Workspace) evict() {
	w.mu.Lock()
	var resident []int // indices into w.sources
	var held int64
	for i, s := range w.sources {
		if s.Kind == KindSnapshot && s.State == Loaded && s.Analysis != nil {
			resident = append(resident, i)
			held += s.Summary.Footprint
		}
	}
	if held <= w.keep {
		w.mu.Unlock()
		return
	}
	// The last one used stays too: a snapshot whose analysis alone passes
	// keep would otherwise go as soon as it loaded, before the explorer
	// could show it.
	last := -1
	for _, i := range resident {
		if last < 0 || w.used[w.sources[i].ID] > w.used[w.sources[last].ID] {
			last = i
		}
	}
	victims := slices.DeleteFunc(resident, func(i int) bool {
		id := w.sources[i].ID
		return i == last || w.inView[id] || w.reloading[id]
	})
	slices.SortStableFunc(victims, func(a, b int) int { return cmp.Compare(w.used[w.sources[a].ID], w.used[w.sources[b].ID]) })
	n := 0
	for _, i := range victims {
		if held <= w.keep {
			break
		}
		held -= w.sources[i].Summary.Footprint
		c := *w.sources[i]
		c.Analysis, c.State, c.Progress = nil, Unloaded, 0
		w.sources[i] = &c
		n++
	}
	w.mu.Unlock()
	if n > 0 {
		w.poke()
		debug.FreeOSMemory() // the analyses' pages, now garbage
	}
}
