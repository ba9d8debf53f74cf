package tui

import (
	"fmt"
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"memscope/internal/textsafe"
	"memscope/model"
	"memscope/snapshot"
	"memscope/snapshot/estimate"
	"memscope/tui/widget"
)

// estMode is how the estimate view shows a device.
type estMode int

const (
	emMerged  estMode = iota // merged modules (digits → *)
	emModules                // module tree
	emPhases                 // phase bars
	emGroups                 // tensors grouped by creation stack
	emVersus                 // estimate vs a measured snapshot, by category
)

// estView is the Snapshot tab's view of a PyTorch-Memory-Profiler
// estimate: merged modules, the module tree, phases, stack groups, or the
// estimate beside a measured allocator snapshot.
type estView struct {
	mode estMode
	// trees caches the module tree per device; kept holds what the trees
	// of the previous load had open, for a reload.
	trees  map[int]*widget.Tree
	kept   map[int]widget.TreeKeep
	groups widget.Scroller
	// versus holds the user's picks of a measured device per estimate
	// device (across files: keyed by source); choosing shows the list of
	// candidates (cands).
	versus   map[versusKey]versusPick
	choosing bool
	cands    widget.Scroller
}

// reset forgets the trees built for the previous load; a reload of the
// same file (sameFile) keeps what they had open, and the mode.
func (v *estView) reset(sameFile bool) {
	v.kept = map[int]widget.TreeKeep{}
	if sameFile {
		for k, tv := range v.trees {
			v.kept[k] = tv.Keep()
		}
	} else {
		v.mode = emMerged
	}
	v.trees = map[int]*widget.Tree{}
}

func (v *estView) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyExpand, widget.KeyCollapse, widget.KeyExpandAll, skGroup, skDevice, skVersus, skPick, skSearch, skNext, skStackUp, kExport}
}

// tree builds (once) the module tree of the device; nil in the other
// modes.
func (v *estView) tree(t *snapTab) *widget.Tree {
	e := t.estDev()
	if e == nil || v.mode != emModules {
		return nil
	}
	if tv := v.trees[t.devIx]; tv != nil {
		return tv
	}
	tv := widget.NewTree(e.ModuleTree, max(e.PeakBytes, e.ListedBytes))
	if keep, ok := v.kept[t.devIx]; ok {
		tv.Restore(keep)
	}
	v.trees[t.devIx] = tv
	return tv
}

func (v *estView) update(c *tabContext, t *snapTab, msg tea.Msg) tea.Cmd {
	e := t.estDev()
	if e == nil {
		return nil
	}
	if m, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case key.Matches(m, skGroup):
			order := []estMode{emMerged, emModules, emPhases, emGroups}
			i := slices.Index(order, v.mode)
			v.mode = order[(i+1)%len(order)]
			c.setStatus("view: %s", map[estMode]string{emMerged: "merged modules", emModules: "module tree", emPhases: "phases", emGroups: "stack groups"}[v.mode])
			return nil
		case key.Matches(m, skVersus):
			if v.mode == emVersus {
				v.mode = emMerged
			} else {
				v.mode = emVersus
				v.choosing = false
			}
			return nil
		case v.mode == emVersus:
			t.versusUpdate(c, m, e)
			return nil
		}
	}
	if v.mode == emModules {
		tv := v.tree(t)
		if m, ok := msg.(tea.MouseClickMsg); ok {
			tv.Click(m.Y - t.headerLines())
			return nil
		}
		tv.Update(msg)
		return nil
	}
	if m, ok := msg.(tea.KeyPressMsg); ok {
		if widget.ListMove(&v.groups, m) {
			return nil
		}
		if (key.Matches(m, skStackUp) || key.Matches(m, widget.KeyEnter)) && v.mode == emGroups && v.groups.Cursor < len(e.StackGroups) {
			g := e.StackGroups[v.groups.Cursor]
			// An estimated tensor's stack: the location rules of
			// estimates apply (Module set).
			c.send(openOverlayMsg{newAllocStackOverlay(fmt.Sprintf("%s in %s created here", bytesStr(g.Bytes), plural(g.Tensors, "tensor")),
				&snapshot.Allocation{Frames: g.Frames, Tensor: &snapshot.Tensor{Module: "(stack group)"}, CategoryFrame: -1})})
		}
	}
	if m, ok := msg.(tea.MouseWheelMsg); ok {
		v.groups.Scroll(wheel(m))
	}
	if m, ok := msg.(tea.MouseClickMsg); ok {
		v.groups.Click(m.Y - t.headerLines() - 1)
	}
	return nil
}

func (v *estView) view(c *tabContext, t *snapTab) string {
	th := c.th
	e := t.estDev()
	var b strings.Builder
	devs := ""
	if n := t.numDevices(); n > 1 {
		devs = fmt.Sprintf(" (%d/%d, d next)", t.devIx+1, n)
	}
	b.WriteString(widget.Fit(fmt.Sprintf("%s %s%s · %s · estimated peak %s · listed %s in %s · unlisted %s",
		th.Bold.Render(srcName(t.src)), e.Device, devs, th.Warn.Render("ESTIMATE"), bytesStr(e.PeakBytes),
		bytesStr(e.ListedBytes), plural(e.Tensors, "tensor"), bytesStr(e.UnlistedBytes)), t.w) + "\n")
	l2 := "unlisted = tensors under 1 MiB and the one that set the peak (the profiler does not list them)"
	if e.PeakBelowListed {
		l2 = th.Err.Render("the file's peak is below the listed tensors: it is inconsistent")
	}
	if n := len(t.src.Estimate.Estimate.Warnings); n > 0 {
		l2 += " · " + th.Warn.Render(plural(n, "note"))
	}
	b.WriteString(widget.Fit(l2, t.w) + "\n")
	names := map[estMode]string{emMerged: "merged modules (digits → *)", emModules: "module tree", emPhases: "phases",
		emGroups: "tensors grouped by creation stack", emVersus: "estimate vs measured, by category"}
	b.WriteString(th.Dim.Render(widget.Fit("view: "+names[t.est.mode]+" · g next view · c vs measured · Top tab lists tensors", t.w)) + "\n")
	h := t.h - 3
	switch t.est.mode {
	case emModules:
		b.WriteString(widget.Block(t.currentTree().View(th, t.w, h), t.w, h))
	case emPhases:
		b.WriteString(widget.Block(t.phaseView(c, e, h), t.w, h))
	case emGroups:
		b.WriteString(widget.Block(t.groupView(c, e, h), t.w, h))
	case emVersus:
		b.WriteString(widget.Block(t.versusView(c, e, h), t.w, h))
	default:
		b.WriteString(widget.Block(t.mergedView(c, e, h), t.w, h))
	}
	return b.String()
}

func (t *snapTab) frac(e *estimate.DeviceStats, v int64) float64 {
	d := max(e.PeakBytes, e.ListedBytes)
	if d <= 0 {
		return 0
	}
	return float64(v) / float64(d)
}

func (t *snapTab) mergedView(c *tabContext, e *estimate.DeviceStats, h int) string {
	th := c.th
	t.est.groups.SetHeight(h - 1)
	t.est.groups.SetN(len(e.Modules) + 1)
	var b strings.Builder
	b.WriteString(th.Header.Render(widget.Fit(fmt.Sprintf("%10s %6s %-12s %7s %9s  %s", "BYTES", "%", "", "TENSORS", "INSTANCES", "MODULE PATTERN"), t.w)) + "\n")
	from, to := t.est.groups.Visible()
	for i := from; i < to; i++ {
		var line string
		if i == len(e.Modules) {
			line = fmt.Sprintf("%10s %5.1f%% %s %7s %9s  %s", bytesStr(e.UnlistedBytes), 100*t.frac(e, e.UnlistedBytes),
				widget.HBar(t.frac(e, e.UnlistedBytes), 12, th.Dim), "", "", th.Dim.Render("(unlisted: tensors < 1 MiB and the peak-setting one)"))
		} else {
			m := e.Modules[i]
			// Keep the end of the pattern: the leaf module is what differs.
			line = fmt.Sprintf("%10s %5.1f%% %s %7d %9d  %s", bytesStr(m.Bytes), 100*t.frac(e, m.Bytes),
				widget.HBar(t.frac(e, m.Bytes), 12, th.Accent), m.Tensors, m.Instances, widget.FitTail(m.Pattern, max(8, t.w-51)))
		}
		if i == t.est.groups.Cursor {
			line = th.Sel.Render(widget.Fit(ansiStrip(line), t.w))
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	return b.String()
}

func (t *snapTab) phaseView(c *tabContext, e *estimate.DeviceStats, h int) string {
	th := c.th
	t.est.groups.SetHeight(h - 1)
	t.est.groups.SetN(len(e.Phases) + 1)
	nameW := 12
	for _, p := range e.Phases {
		nameW = max(nameW, len(p.Name))
	}
	nameW = min(nameW, t.w/3)
	barW := max(10, t.w-nameW-30)
	var b strings.Builder
	b.WriteString(th.Header.Render(widget.Fit(fmt.Sprintf("%-*s %10s %6s  %s", nameW, "PHASE", "BYTES", "%", "TENSORS"), t.w)) + "\n")
	from, to := t.est.groups.Visible()
	for i := from; i < to; i++ {
		name, bytes, n, st := "(unlisted)", e.UnlistedBytes, "", th.Dim
		if i < len(e.Phases) {
			p := e.Phases[i]
			name, bytes, n, st = p.Name, p.Bytes, fmt.Sprint(p.Tensors), th.Accent
		}
		line := fmt.Sprintf("%-*s %10s %5.1f%% %s %s", nameW, widget.Fit(name, nameW), bytesStr(bytes), 100*t.frac(e, bytes), widget.HBar(t.frac(e, bytes), barW, st), n)
		if i == t.est.groups.Cursor {
			line = th.Sel.Render(widget.Fit(ansiStrip(line), t.w))
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	return b.String()
}

func (t *snapTab) groupView(c *tabContext, e *estimate.DeviceStats, h int) string {
	th := c.th
	t.est.groups.SetHeight(h - 1)
	t.est.groups.SetN(len(e.StackGroups))
	var b strings.Builder
	b.WriteString(th.Header.Render(widget.Fit(fmt.Sprintf("%10s %6s %7s  %s", "BYTES", "%", "TENSORS", "CREATED AT (enter: whole stack)"), t.w)) + "\n")
	from, to := t.est.groups.Visible()
	for i := from; i < to; i++ {
		g := e.StackGroups[i]
		loc := snapshot.EstimateLocation(g.Frames)
		if loc == "" {
			loc = "(no creation stack)"
		}
		line := fmt.Sprintf("%10s %5.1f%% %7d  %s", bytesStr(g.Bytes), 100*t.frac(e, g.Bytes), g.Tensors, loc)
		if i == t.est.groups.Cursor {
			line = th.Sel.Render(widget.Fit(line, t.w))
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	return b.String()
}

// versusKey names one device of one estimate source.
type versusKey struct {
	est int
	dev string
}

// versusPick is a measured device: a source ID and a device number.
type versusPick struct{ src, dev int }

// measuredCandidates lists every device of every loaded allocator snapshot.
func measuredCandidates(c *tabContext) []versusPick {
	var out []versusPick
	for _, s := range c.sources {
		if s.Kind != model.KindSnapshot || s.State != model.Loaded || s.Analysis == nil {
			continue
		}
		for _, d := range s.Analysis.Devices {
			out = append(out, versusPick{s.ID, d.Device})
		}
	}
	return out
}

// measuredFor finds the allocator snapshot to set beside an estimate's
// device: the user's pick, else a snapshot whose file name has the same
// rank label. Device indices are never used to guess: they match unrelated
// runs. how says which rule paired them.
func (t *snapTab) measuredFor(c *tabContext, e *estimate.DeviceStats) (src *model.Source, d *snapshot.DeviceStats, how string) {
	if p, ok := t.est.versus[versusKey{t.src.ID, e.Device}]; ok {
		if s := c.source(p.src); s != nil && s.State == model.Loaded && s.Analysis != nil {
			if d := s.Analysis.Device(p.dev); d != nil {
				return s, d, "your pick"
			}
		}
	}
	rank := snapshot.ParseLabel(t.src.Path).Rank
	if rank < 0 {
		return nil, nil, ""
	}
	devN := -1
	fmt.Sscanf(e.Device[strings.LastIndexByte(e.Device, ':')+1:], "%d", &devN)
	for _, s := range c.sources {
		if s.Kind != model.KindSnapshot || s.State != model.Loaded || s.Analysis == nil || len(s.Analysis.Devices) == 0 {
			continue
		}
		if snapshot.ParseLabel(s.Path).Rank != rank {
			continue
		}
		// A rank's process may see its GPU as cuda:0 or as cuda:rank.
		if d := s.Analysis.Device(devN); d != nil {
			return s, d, fmt.Sprintf("rank %d in both file names", rank)
		}
		return s, &s.Analysis.Devices[0], fmt.Sprintf("rank %d in both file names", rank)
	}
	return nil, nil, ""
}

// versusUpdate handles keys of the estimate-vs-measured view: p opens the
// list of measured devices, enter there picks one.
func (t *snapTab) versusUpdate(c *tabContext, m tea.KeyPressMsg, e *estimate.DeviceStats) {
	cands := measuredCandidates(c)
	if _, d, _ := t.measuredFor(c, e); d == nil && len(cands) > 0 {
		t.est.choosing = true
	}
	if key.Matches(m, skPick) && len(cands) > 0 {
		t.est.choosing = true
		return
	}
	if !t.est.choosing {
		return
	}
	t.est.cands.SetN(len(cands))
	if widget.ListMove(&t.est.cands, m) {
		return
	}
	switch {
	case key.Matches(m, widget.KeyEnter) && t.est.cands.Cursor < len(cands):
		if t.est.versus == nil {
			t.est.versus = map[versusKey]versusPick{}
		}
		t.est.versus[versusKey{t.src.ID, e.Device}] = cands[t.est.cands.Cursor]
		t.est.choosing = false
	case key.Matches(m, widget.KeyBack):
		t.est.choosing = false
	}
}

func (t *snapTab) versusView(c *tabContext, e *estimate.DeviceStats, h int) string {
	th := c.th
	src, meas, how := t.measuredFor(c, e)
	cands := measuredCandidates(c)
	if len(cands) == 0 {
		return th.Dim.Render("No allocator snapshot is loaded to compare with.\n\nOpen one beside this estimate (memscope ESTIMATE.json SNAPSHOT.pickle). Files whose names\ncarry the same rank (rank3_…) pair by themselves; otherwise press c and pick one.")
	}
	if t.est.choosing || meas == nil {
		return t.pickView(c, cands, h)
	}
	rows := estimate.CompareByCategory(e, src.Analysis.PeakLive(meas))
	var b strings.Builder
	b.WriteString(widget.Fit(fmt.Sprintf("estimate  %s %s · estimated peak %s", textsafe.Safe(t.src.Path), e.Device, bytesStr(e.PeakBytes)), t.w) + "\n")
	at := "at the snapshot (no trace)"
	if meas.Peak.FromTrace {
		at = snapshot.PeakWhen(meas.Peak.EventIndex)
	}
	b.WriteString(widget.Fit(fmt.Sprintf("measured  %s cuda:%d · peak active %s %s", textsafe.Safe(src.Path), meas.Device, bytesStr(meas.Peak.Active), at), t.w) + "\n")
	b.WriteString(th.Dim.Render(widget.Fit("paired by "+how+" · p pick another · both sides are peaks (the measured one is what was live at it)", t.w)) + "\n")
	b.WriteString(th.Header.Render(widget.Fit(fmt.Sprintf("%-24s %12s %12s %13s", "CATEGORY", "ESTIMATED", "MEASURED", "MEAS − EST"), t.w)) + "\n")
	var te, tm int64
	for _, r := range rows {
		te += r.Estimated
		tm += r.Measured
		d := r.Measured - r.Estimated
		st := th.OK
		if d > 0 {
			st = th.Err // measured above the estimate: the estimate was short
		}
		b.WriteString(widget.Fit(fmt.Sprintf("%-24s %12s %12s %s", r.Category, bytesStr(r.Estimated), bytesStr(r.Measured),
			st.Render(fmt.Sprintf("%13s", signed(d)))), t.w) + "\n")
	}
	b.WriteString(th.Bold.Render(widget.Fit(fmt.Sprintf("%-24s %12s %12s %13s", "total", bytesStr(te), bytesStr(tm), signed(tm-te)), t.w)))
	return b.String()
}

// pickView lists the measured devices to choose from.
func (t *snapTab) pickView(c *tabContext, cands []versusPick, h int) string {
	th := c.th
	var b strings.Builder
	b.WriteString(widget.Fit("Which allocator snapshot did this estimate predict? (enter picks · esc back)", t.w) + "\n")
	b.WriteString(th.Dim.Render(widget.Fit("Only files whose names carry the same rank pair by themselves; device numbers are not a match.", t.w)) + "\n")
	b.WriteString(th.Header.Render(widget.Fit(fmt.Sprintf("%-8s %12s  %s", "DEVICE", "PEAK", "FILE"), t.w)) + "\n")
	t.est.cands.SetHeight(h - 3)
	t.est.cands.SetN(len(cands))
	from, to := t.est.cands.Visible()
	for i := from; i < to; i++ {
		p := cands[i]
		s := c.source(p.src)
		d := s.Analysis.Device(p.dev)
		// The path is cut from the left: files in one folder differ at
		// their names' ends (bf16 and fp32 variants), which must show.
		line := fmt.Sprintf("cuda:%-3d %12s  %s", p.dev, bytesStr(d.Peak.Active),
			strings.TrimRight(widget.FitTail(textsafe.Safe(s.Path), max(8, t.w-24)), " "))
		if i == t.est.cands.Cursor {
			line = th.Sel.Render(widget.Fit(line, t.w))
		}
		b.WriteString(widget.Fit(line, t.w) + "\n")
	}
	return b.String()
}

func signed(n int64) string {
	if n > 0 {
		return "+" + bytesStr(n)
	}
	return bytesStr(n)
}
