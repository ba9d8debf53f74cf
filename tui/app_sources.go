package tui

import "memscope/model"

// Which source each tab shows: the tab that fits what was opened, the
// trace and snapshot chosen or followed, and the newer snapshot announced.

// sameData reports whether s holds the data a tab already shows (cur,
// loaded at generation gen): the workspace copies a Source on every
// progress tick, change time or error, so pointers differ while the data
// does not. Tabs then keep everything and only take the new pointer.
func sameData(cur *model.Source, gen int, s *model.Source) bool {
	return cur != nil && s != nil && cur.ID == s.ID && s.Generation == gen &&
		cur.State == model.Loaded && s.State == model.Loaded
}

// fitTab is the tab that fits what was opened: Traces when there are
// traces, else Snapshot when there are snapshots or estimates, else Live.
// A lone snapshot must not open on an empty Traces tab.
func (a *App) fitTab() tabID {
	var traces, snaps, live bool
	for _, s := range a.c.sources {
		switch {
		case s.Kind.IsTrace():
			traces = true
		case s.Kind.IsSnapshot():
			snaps = true
		case s.Kind == model.KindLive:
			live = true
		}
	}
	switch {
	case traces:
		return tabTraces
	case snaps:
		return tabSnapshot
	case a.fleet != nil:
		return tabFleet // the cluster was asked for
	case live, a.c.opts.Live != nil, len(a.c.sources) == 0:
		return tabLive // nothing but GPUs (live or replayed), or nothing: Live says why
	}
	return a.active
}

// pickTrace keeps the chosen trace source while it exists, else takes
// the first loaded one (preferring comparisons). Snapshots have their own
// rule (pickSnapshot).
func (a *App) pickTrace(cur int, chosen bool) int {
	if s := a.source(cur); chosen && s != nil && s.Kind.IsTrace() {
		return cur
	}
	best := 0
	for _, s := range a.c.sources {
		if !s.Kind.IsTrace() || s.State != model.Loaded {
			continue
		}
		if best == 0 || (s.Kind == model.KindTraceCompare && a.source(best).Kind != model.KindTraceCompare) {
			best = s.ID
		}
	}
	if best == 0 {
		return cur
	}
	return best
}

// pickSnapshot keeps the chosen snapshot while it exists, else shows one
// of the loaded allocator snapshots (estimates and rank folders when none
// is loaded): a file named on the command line, the first named; else the
// newest file, the first listed of those written at the same instant (an
// archive unpacked). A folder where training writes a snapshot every few
// hundred steps opens on the last one and follows new ones as they
// arrive, until the user chooses. (The ranks of a dump open as one rank
// folder, not as snapshots.)
func (a *App) pickSnapshot(cur int, chosen bool) int {
	if s := a.source(cur); chosen && s != nil && s.Kind.IsSnapshot() {
		return cur
	}
	var cands []*model.Source
	for _, want := range []func(model.SourceKind) bool{
		func(k model.SourceKind) bool { return k == model.KindSnapshot },
		model.SourceKind.IsSnapshot,
	} {
		for _, s := range a.c.sources {
			if want(s.Kind) && s.State == model.Loaded {
				cands = append(cands, s)
			}
		}
		if len(cands) > 0 {
			break
		}
	}
	if len(cands) == 0 {
		return cur
	}
	newest := cands[0]
	for _, s := range cands {
		if s.Pinned {
			return s.ID // named on the command line: what the user asked to see
		}
		if s.ModTime.After(newest.ModTime) {
			newest = s
		}
	}
	return newest.ID
}

func (a *App) source(id int) *model.Source { return a.c.source(id) }

// keepShown makes the snapshot on screen the user's choice once they work
// in its tabs (a key or a click in Snapshot, Top or Timeline; switching
// tabs is not work in them): a newer snapshot that arrives then is
// announced, not shown in its place, so that a tree opened or a cursor
// placed is not taken away, as less +F stops following at a key.
func (a *App) keepShown() {
	switch a.active {
	case tabSnapshot, tabTop, tabTimeline:
		if a.c.snapSel != 0 {
			a.snapChosen = true
		}
	}
}

// announceNewer says, once for each, that a snapshot newer than the one
// the user keeps has loaded.
func (a *App) announceNewer() {
	cur := a.source(a.c.snapSel)
	if !a.snapChosen || cur == nil {
		return
	}
	var newest *model.Source
	for _, s := range a.c.sources {
		if s.Kind == model.KindSnapshot && s.State == model.Loaded && s.ModTime.After(a.started) &&
			s.ModTime.After(cur.ModTime) && (newest == nil || s.ModTime.After(newest.ModTime)) {
			newest = s
		}
	}
	if newest != nil && newest.ID != a.announced {
		a.announced = newest.ID
		a.setStatus("newer snapshot: %s (o to show it)", safe(newest.Name()))
	}
}

// selectSource points the tabs of its kind at a source.
func (a *App) selectSource(s *model.Source) {
	a.tabChosen = true
	switch {
	case s.Kind.IsTrace():
		a.c.traceSel, a.traceChosen = s.ID, true
		a.active = tabTraces
	case s.Kind.IsSnapshot():
		a.c.snapSel, a.snapChosen = s.ID, true
		if a.active != tabTop && a.active != tabTimeline {
			a.active = tabSnapshot
		}
	case s.Kind == model.KindLive:
		a.active = tabLive
	}
	a.refresh()
}
