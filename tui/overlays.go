package tui

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"memscope/internal/textsafe"
	"memscope/model"
	"memscope/snapshot"
	"memscope/tui/widget"
)

// safe makes a string from a file printable (see textsafe).
func safe(s string) string { return textsafe.Safe(s) }

// srcName is a source's name as shown: a file's name, escaped.
func srcName(s *model.Source) string { return safe(s.Name()) }

// loadingView is a tab's view of a source still loading.
// notOneSnapshot is what a tab of one snapshot's allocations (Top,
// Timeline) shows instead while src is not one: none chosen, still
// loading, or a folder of per-rank snapshots; false when it is one.
func notOneSnapshot(c *tabContext, src *model.Source) (string, bool) {
	switch {
	case src == nil:
		return noSnapshotView(c), true
	case src.State != model.Loaded:
		return loadingView(c, src), true
	case src.Kind == model.KindRanks:
		return rankSetHint(c, src), true
	}
	return "", false
}

func loadingView(c *tabContext, s *model.Source) string {
	return c.th.Dim.Render("loading " + srcName(s) + "…")
}

// stackOverlay shows a whole stack trace (and a release stack for
// estimated tensors), outermost call last as PyTorch records it.
type stackOverlay struct {
	title  string
	lines  []string
	noise  []bool
	frames []*snapshot.Frame // the frame of each line (nil: not a frame)
	// code lists the lines that are a frame's line of code (estimates),
	// which the count of hidden frames leaves out.
	code      []int
	list      widget.Scroller
	showNoise bool
	// focus is the line of the allocation's location (the first user
	// frame), shown and highlighted when the overlay opens; -1 for none.
	focus  int
	placed bool
	// decision says which frame and keyword decided the category.
	decision string
}

var (
	okNoise = key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "show/hide interpreter and dispatcher frames"))
	okCopy  = key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "copy the selected frame's path:line (OSC 52: works over SSH)"))
	okEdit  = key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "open the selected frame in $EDITOR (when the file is on this machine)"))
)

// newAllocStackOverlay shows an allocation's stacks with the frame that
// decided its category and its location highlighted.
func newAllocStackOverlay(title string, al *snapshot.Allocation) *stackOverlay {
	o := &stackOverlay{title: safe(title), focus: -1}
	create, release := al.Frames, al.ReleaseFrames()
	loc := al.LocationIndex()
	if al.Category != "" {
		if al.CategoryFrame >= 0 {
			o.decision = fmt.Sprintf("category %s: keyword %q in the frame marked ◆", al.Category, al.CategoryKeyword)
		} else {
			o.decision = fmt.Sprintf("category %s: no rule's keyword is in a file or function name", al.Category)
		}
	}
	add := func(head string, st snapshot.Stack, mark bool) {
		o.lines = append(o.lines, head)
		o.noise = append(o.noise, false)
		o.frames = append(o.frames, nil)
		if st.Len() == 0 {
			o.lines = append(o.lines, "  (no frames recorded)")
			o.noise = append(o.noise, false)
			o.frames = append(o.frames, nil)
		}
		for i := range st.Len() {
			f := st.At(i)
			prefix := "  "
			if mark && i == loc {
				prefix = "▶ "
				o.focus = len(o.lines)
			}
			head, dir := frameLine(*f)
			line := prefix + safe(head)
			if mark && i == int(al.CategoryFrame) {
				line += "  ◆ " + al.Category
			}
			if dir != "" {
				line += "  · " + safe(dir)
			}
			noise := i != loc && (snapshot.IsNoise(*f) || snapshot.IsPlumbing(*f) || snapshot.IsProfilerFrame(*f) || isInterpreter(*f))
			o.lines = append(o.lines, line)
			o.noise = append(o.noise, noise)
			o.frames = append(o.frames, st.At(i))
			if src := st.Source(i); src != "" {
				// Hidden with its frame: alone, it is a line of code
				// under another frame's heading.
				o.lines = append(o.lines, "      "+safe(src))
				o.noise = append(o.noise, noise)
				o.frames = append(o.frames, st.At(i))
				o.code = append(o.code, len(o.lines)-1)
			}
		}
	}
	add("allocated at (innermost call first; ▶ the site: the user's own line):", create, true)
	if release.Len() > 0 {
		o.lines = append(o.lines, "")
		o.noise = append(o.noise, false)
		o.frames = append(o.frames, nil)
		add("released at:", release, false)
	}
	return o
}

// selected is the frame on the cursor's line (nil when it is none).
func (o *stackOverlay) selected() *snapshot.Frame {
	idx := o.shown()
	if o.list.Cursor < 0 || o.list.Cursor >= len(idx) {
		return nil
	}
	return o.frames[idx[o.list.Cursor]]
}

// framePath is a frame's "path:line" as an editor or a grep takes it,
// control characters removed.
func framePath(f *snapshot.Frame) string {
	p := safe(f.Filename)
	if f.Line > 0 {
		p += fmt.Sprintf(":%d", f.Line)
	}
	return p
}

// editFrame opens a frame's file at its line in $VISUAL or $EDITOR (vi
// without either), when the file is on this machine.
func editFrame(c *tabContext, f *snapshot.Frame) tea.Cmd {
	if _, err := os.Stat(f.Filename); err != nil || f.Filename == "" || f.Filename != safe(f.Filename) {
		c.setStatus("%s is not a file on this machine", safe(f.Filename))
		return nil
	}
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	args := strings.Fields(editor)
	if f.Line > 0 {
		args = append(args, fmt.Sprintf("+%d", f.Line))
	}
	args = append(args, f.Filename)
	cmd := exec.Command(args[0], args[1:]...)
	return tea.ExecProcess(cmd, func(err error) tea.Msg { return editorDoneMsg{err} })
}

// editorDoneMsg reports the end of an editor opened with e.
type editorDoneMsg struct{ err error }

func (o *stackOverlay) shown() []int {
	var idx []int
	for i := range o.lines {
		if o.showNoise || !o.noise[i] {
			idx = append(idx, i)
		}
	}
	return idx
}

func (o *stackOverlay) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, okNoise, okCopy, okEdit, widget.KeyBack}
}

func (o *stackOverlay) update(c *tabContext, msg tea.Msg) (bool, tea.Cmd) {
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		o.list.Scroll(wheel(m))
	case tea.KeyPressMsg:
		if widget.ListMove(&o.list, m) {
			return false, nil
		}
		switch {
		case key.Matches(m, okNoise):
			o.showNoise = !o.showNoise
		case key.Matches(m, okCopy):
			if f := o.selected(); f != nil {
				p := framePath(f)
				c.setStatus("copied %s", p)
				return false, tea.SetClipboard(p)
			}
			c.setStatus("the selected line is not a frame")
		case key.Matches(m, okEdit):
			if f := o.selected(); f != nil {
				return false, editFrame(c, f)
			}
			c.setStatus("the selected line is not a frame")
		case key.Matches(m, widget.KeyBack), m.String() == "q", m.String() == "enter":
			return true, nil
		}
	}
	return false, nil
}

func (o *stackOverlay) view(c *tabContext, w, h int) string {
	th := c.th
	idx := o.shown()
	o.list.SetHeight(h - 3)
	o.list.SetN(len(idx))
	hidden := len(o.lines) - len(idx) // frames, and their lines of code
	for _, i := range o.code {
		if o.noise[i] && !o.showNoise {
			hidden--
		}
	}
	var b strings.Builder
	b.WriteString(widget.Fit(th.Bold.Render("Stack trace")+" · "+o.title, w) + "\n")
	note := "esc close · ↑↓ select · y copy path:line · e edit"
	if hidden > 0 {
		note += fmt.Sprintf(" · %d interpreter/dispatcher frames hidden (n shows)", hidden)
	} else {
		note += " · n hides noise frames"
	}
	b.WriteString(th.Dim.Render(widget.Fit(note, w)) + "\n")
	if o.decision != "" {
		b.WriteString(widget.Fit(safe(o.decision), w) + "\n")
		o.list.SetHeight(h - 4)
	}
	if !o.placed && o.focus >= 0 {
		// Open with the first user frame in view, a few lines below the top
		// so its callee is visible too.
		o.placed = true
		for i, j := range idx {
			if j == o.focus {
				// Two lines of context above it.
				o.list.Offset = max(0, i-2)
				o.list.Cursor = i
				o.list.Clamp()
				break
			}
		}
	}
	from, to := o.list.Visible()
	for i := from; i < to; i++ {
		l := o.lines[idx[i]]
		if i == o.list.Cursor {
			b.WriteString(th.Sel.Render(widget.Fit(ansiStrip(l), w)) + "\n")
			continue
		}
		if idx[i] == o.focus {
			l = th.OK.Render(l)
		} else if o.noise[idx[i]] {
			l = th.Dim.Render(l)
		} else if strings.HasPrefix(l, "      ") {
			l = th.Dim.Render(l)
		} else if !strings.HasPrefix(l, "  ") {
			l = th.Bold.Render(l)
		}
		b.WriteString(widget.Fit(l, w) + "\n")
	}
	b.WriteString(th.Dim.Render(o.list.Hint()))
	return b.String()
}

// frameLine puts what tells frames apart first: "file.py:12 function",
// then the folder, which is long and mostly shared.
func frameLine(f snapshot.Frame) (head, folder string) {
	dir, base := "", f.Filename
	if i := strings.LastIndexAny(f.Filename, `/\`); i >= 0 {
		dir, base = f.Filename[:i+1], f.Filename[i+1:]
	}
	s := base
	if f.Line > 0 {
		s += fmt.Sprintf(":%d", f.Line)
	}
	if s == "" {
		s = "??"
	}
	return s + " " + f.Name, dir
}

// interpreterFiles are CPython's and PyTorch's binding layers: between a
// Python call and the kernel they say nothing about who allocated.
var interpreterFiles = []string{"Objects/", "Python/ceval", "Python/bltinmodule", "python_variable_methods.cpp",
	"python_torch_functions", "python_nn_functions", "VariableType", "ADInplaceOrView", "RegisterCUDA",
	"RegisterCompositeImplicit", "RegisterBackendSelect", "TraceType", "Functions.cpp"}

func isInterpreter(f snapshot.Frame) bool {
	for _, p := range interpreterFiles {
		if strings.Contains(f.Filename, p) {
			return true
		}
	}
	return false
}

// picker lists the sources: state, kind, errors; enter shows one in its
// tab, space marks snapshots for a diff.
type picker struct {
	list   widget.Scroller
	marked []int
}

var (
	okSelect = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "show this source"))
	okMark   = key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "mark a snapshot for diff (two)"))
	okDiff   = key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "diff the two marked snapshots"))
	okReload = key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload this source"))
)

// newPicker opens the list of sources on the one shown: the traces' when
// onTraces, else the snapshot's.
func newPicker(c *tabContext, onTraces bool) *picker {
	p := &picker{}
	p.list.SetN(len(c.sources))
	for i, s := range c.sources {
		if s.ID == c.snapSel && !onTraces || s.ID == c.traceSel && onTraces {
			p.list.Cursor = i
		}
	}
	return p
}

func (p *picker) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, okSelect, okMark, okDiff, okReload, widget.KeyBack}
}

func (p *picker) update(c *tabContext, msg tea.Msg) (bool, tea.Cmd) {
	p.list.SetN(len(c.sources))
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		p.list.Scroll(wheel(m))
	case tea.MouseClickMsg:
		before := p.list.Cursor
		if p.list.Click((m.Y - 2) / 2); before == p.list.Cursor {
			return p.choose(c)
		}
	case tea.KeyPressMsg:
		if widget.ListMove(&p.list, m) {
			return false, nil
		}
		switch {
		case key.Matches(m, widget.KeyBack), m.String() == "o", m.String() == "q":
			return true, nil
		case key.Matches(m, okSelect):
			return p.choose(c)
		case key.Matches(m, okMark):
			if s := p.cur(c); s != nil && s.Kind.IsSnapshot() && s.Kind != model.KindRanks {
				if i := indexOf(p.marked, s.ID); i >= 0 {
					p.marked = append(p.marked[:i], p.marked[i+1:]...)
				} else {
					p.marked = append(p.marked, s.ID)
					if len(p.marked) > 2 {
						p.marked = p.marked[1:]
					}
				}
			}
		case key.Matches(m, okDiff):
			if len(p.marked) != 2 {
				c.setStatus("mark two snapshots with space first")
				return false, nil
			}
			x, y := c.source(p.marked[0]), c.source(p.marked[1])
			switch {
			case x == nil || y == nil || x.State == model.Failed || y.State == model.Failed:
				c.setStatus("both marked snapshots must load without errors")
			case x.State == model.Loaded && y.State == model.Loaded:
				c.send(openOverlayMsg{newDiffOverlay(x, y)})
			default:
				// Loading, or let go to bound memory: the diff opens
				// once both are in.
				c.send(diffWhenLoadedMsg{x.ID, y.ID})
				c.setStatus("the diff opens once %s and %s are loaded", safe(x.Name()), safe(y.Name()))
				return true, nil
			}
			return false, nil
		case key.Matches(m, okReload):
			if s := p.cur(c); s != nil && s.Kind != model.KindUnknown && s.Kind != model.KindLive {
				c.send(reloadMsg{s.ID})
				c.setStatus("reloading %s", s.Name())
			}
		}
	}
	return false, nil
}

func indexOf(v []int, x int) int {
	for i, y := range v {
		if y == x {
			return i
		}
	}
	return -1
}

func (p *picker) cur(c *tabContext) *model.Source {
	if p.list.Cursor < 0 || p.list.Cursor >= len(c.sources) {
		return nil
	}
	return c.sources[p.list.Cursor]
}

func (p *picker) choose(c *tabContext) (bool, tea.Cmd) {
	s := p.cur(c)
	if s == nil {
		return false, nil
	}
	if s.State != model.Loaded && s.State != model.Unloaded {
		c.setStatus("%s is %s", s.Name(), s.State)
		return false, nil
	}
	switch {
	case s.State == model.Unloaded && s.Generation == 0:
		c.setStatus("loading %s", safe(s.Name()))
	case s.State == model.Unloaded:
		c.setStatus("loading %s again (let go to bound memory: --keep)", safe(s.Name()))
	}
	c.send(selectSourceMsg{s.ID})
	return true, nil
}

func (p *picker) view(c *tabContext, w, h int) string {
	th := c.th
	p.list.SetN(len(c.sources))
	p.list.SetHeight(max(1, (h-4)/2))
	var b strings.Builder
	b.WriteString(widget.Fit(th.Bold.Render("Sources")+fmt.Sprintf(" · %d opened · enter show · space mark · d diff marked · r reload · esc close", len(c.sources)), w) + "\n\n")
	from, to := p.list.Visible()
	for i := from; i < to; i++ {
		s := c.sources[i]
		icon := th.OK.Render("✓")
		switch s.State {
		case model.Loading, model.Pending:
			icon = th.Warn.Render(fmt.Sprintf("⟳ %3.0f%%", 100*s.Progress))
		case model.Failed:
			icon = th.Err.Render("✗")
		case model.Unloaded:
			icon = th.Dim.Render("○")
		}
		if s.State == model.Loaded && s.ErrorCount() > 0 {
			icon = th.Warn.Render("!")
		}
		mark := " "
		if indexOf(p.marked, s.ID) >= 0 {
			mark = th.Accent.Render("●")
		}
		cur := " "
		if s.ID == c.traceSel || s.ID == c.snapSel {
			cur = th.Accent.Render("▶")
		}
		head := fmt.Sprintf("%s%s %s %-11s ", cur, mark, icon, s.Kind)
		tail := ""
		if s.Demo {
			tail += th.Dim.Render("  (demo)")
		}
		if !s.ChangedAt.IsZero() {
			tail += th.Dim.Render("  changed " + s.ChangedAt.Format("15:04:05"))
		}
		// Cut in the middle: names that share a long prefix differ at
		// the end (…_bf16_128.pickle against …_fp32_128.pickle).
		room := max(8, w-lipgloss.Width(head)-lipgloss.Width(tail))
		line := head + strings.TrimRight(widget.FitMiddle(safe(s.Name()), room), " ") + tail
		if i == p.list.Cursor {
			line = th.Sel.Render(widget.Fit(ansiStrip(line), w))
		}
		b.WriteString(widget.Fit(line, w) + "\n")
		detail := th.Dim.Render("      " + safe(sourceSummary(s)))
		if probs := s.Problems(); len(probs) > 0 {
			detail = th.Err.Render("      " + safe(probs[0]))
			if len(probs) > 1 {
				detail += th.Dim.Render(fmt.Sprintf(" (+%d more)", len(probs)-1))
			}
		}
		b.WriteString(widget.Fit(detail, w) + "\n")
	}
	if s := p.cur(c); s != nil {
		if probs := s.Problems(); len(probs) > 1 {
			b.WriteString("\n" + th.Bold.Render("Problems of "+srcName(s)) + "\n")
			for _, pr := range probs {
				b.WriteString(widget.Fit(th.Err.Render("  ✗ ")+pr, w) + "\n")
			}
		}
	}
	return b.String()
}

// sourceSummary is the picker's second line for a healthy source.
func sourceSummary(s *model.Source) string {
	switch {
	case s.State == model.Loading || s.State == model.Pending:
		return "loading " + s.Path
	case s.State == model.Unloaded && s.Generation == 0:
		return "not loaded yet (enter loads it)" + written(s, time.Now()) + " · " + s.Path
	case s.State == model.Unloaded:
		m := s.Summary
		return fmt.Sprintf("%s · %s · reserved %s · not in memory (enter loads it)%s · %s", m.Format, plural(m.Devices, "device"), bytesStr(m.Reserved), written(s, time.Now()), s.Path)
	case s.Analysis != nil:
		var res int64
		for _, d := range s.Analysis.Devices {
			res += d.ReservedBytes
		}
		return fmt.Sprintf("%s · %s · reserved %s%s · %s", s.Analysis.Snapshot.Format, plural(len(s.Analysis.Devices), "device"), bytesStr(res), written(s, time.Now()), s.Path)
	case s.Estimate != nil:
		return fmt.Sprintf("estimate · %s · %s", plural(len(s.Estimate.Devices), "device"), s.Path)
	case s.Comparison != nil:
		return fmt.Sprintf("%d ranks, %d paired · %s", s.Comparison.Summary.Ranks, s.Comparison.Summary.Paired, s.Path)
	case s.Real != nil:
		return fmt.Sprintf("%s · %s", plural(len(s.Real.Ranks), "rank"), s.Path)
	}
	return s.Path
}

// written says how long before now a snapshot's file was written, as
// " · written 5m ago" (empty when not known): which of a dump folder's
// snapshots is the newest, the one shown until the user chooses.
func written(s *model.Source, now time.Time) string {
	if s.ModTime.IsZero() {
		return ""
	}
	return " · written " + age(now.Sub(s.ModTime))
}

// age is d as the largest whole unit a person reads at a glance: "12s
// ago", "5m ago", "3h ago" (up to two days), "4d ago"; a time ahead of the
// clock (another host's, on a shared filesystem) is "just now".
func age(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// textOverlay shows lines of text in full (wrapped), scrolling: the
// recommendations, which the tab can only show a line of each.
type textOverlay struct {
	title string
	items []string
	list  widget.Scroller
}

func (o *textOverlay) help() []key.Binding {
	return []key.Binding{widget.KeyUp, widget.KeyDown, widget.KeyPgUp, widget.KeyPgDn, widget.KeyBack}
}

func (o *textOverlay) update(c *tabContext, msg tea.Msg) (bool, tea.Cmd) {
	return scrollOverlay(&o.list, msg, "R"), nil
}

// scrollOverlay is the keys of a read-only scrolling overlay: the list
// keys and the wheel scroll; esc, q (and the keys in closers, such as
// the one that opened it) close it.
func scrollOverlay(list *widget.Scroller, msg tea.Msg, closers ...string) (closed bool) {
	switch m := msg.(type) {
	case tea.MouseWheelMsg:
		list.Scroll(wheel(m))
	case tea.KeyPressMsg:
		if widget.ListMove(list, m) {
			return false
		}
		return key.Matches(m, widget.KeyBack) || m.String() == "q" || slices.Contains(closers, m.String())
	}
	return false
}

func (o *textOverlay) view(c *tabContext, w, h int) string {
	var lines []string
	for _, it := range o.items {
		for i, l := range wrapWords(it, max(20, w-4)) {
			if i == 0 {
				lines = append(lines, l)
			} else {
				lines = append(lines, "    "+l)
			}
		}
		lines = append(lines, "")
	}
	o.list.SetHeight(h - 2)
	o.list.SetN(len(lines))
	o.list.Cursor = o.list.Offset
	var b strings.Builder
	b.WriteString(widget.Fit(c.th.Bold.Render(o.title)+c.th.Dim.Render(" · esc closes"), w) + "\n")
	from, to := o.list.Visible()
	for i := from; i < to; i++ {
		b.WriteString(widget.Fit(lines[i], w) + "\n")
	}
	b.WriteString(c.th.Dim.Render(o.list.Hint()))
	return b.String()
}
