package tui

import (
	"context"
	"fmt"

	tea "charm.land/bubbletea/v2"

	"memscope/model"
	"memscope/tui/widget"
)

// tabContext is all a tab or overlay sees of the program (gh-dash's
// ProgramContext): the theme, the workspace's sources, what the user
// selected, the options, and send, the one way to reach anything outside
// itself. The App owns it and refreshes it before each call; a tab reads
// it and never keeps it.
type tabContext struct {
	ctx     context.Context
	th      widget.Theme
	opts    Options
	sources []*model.Source
	// sel is the selection the snapshot tabs share.
	sel selection
	// traceSel and snapSel are the IDs of the sources the Traces and the
	// snapshot tabs show (0: none).
	traceSel, snapSel int
	// out holds the messages sent during one call; the App delivers
	// them, in order, as soon as the call returns.
	out []tea.Msg
}

// selection is what the user chose that several tabs follow.
type selection struct {
	// dev is the index of the chosen device in the snapshot's devices.
	dev int
}

// send posts a message to the App, which handles it (or routes it to the
// tab it names) once the current call returns.
func (c *tabContext) send(msgs ...tea.Msg) { c.out = append(c.out, msgs...) }

// setStatus shows a transient message in the status line.
func (c *tabContext) setStatus(format string, args ...any) {
	c.send(statusMsg(fmt.Sprintf(format, args...)))
}

// source is the source with the ID, nil if there is none.
func (c *tabContext) source(id int) *model.Source {
	for _, s := range c.sources {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// tabID names a tab; tabs are never known by their position.
type tabID int

const (
	tabTraces tabID = iota
	tabSnapshot
	tabTop
	tabLive
	tabTimeline
	tabFleet
)

// The messages tabs, overlays and the command line send. The App handles
// each, or hands it to the tab it is for (toTab).
type (
	// statusMsg shows a transient message in the status line.
	statusMsg string
	// switchTabMsg brings a tab to the front (as if the user chose it).
	switchTabMsg struct{ id tabID }
	// toTab delivers msg to one tab's update, whichever tab is in front.
	toTab struct {
		id  tabID
		msg tea.Msg
	}
	// selectSourceMsg points the tabs of the source's kind at it, and
	// brings one of them to the front.
	selectSourceMsg struct{ id int }
	// selectDeviceMsg makes dev the device the snapshot tabs show.
	selectDeviceMsg struct{ dev int }
	// openSnapshotMsg opens one snapshot file (a rank of a rank folder)
	// and shows it on the Snapshot tab.
	openSnapshotMsg struct{ path string }
	// openPathMsg adds a file or folder to the workspace.
	openPathMsg struct{ path string }
	// reloadMsg reads a source again.
	reloadMsg struct{ id int }
	// diffWhenLoadedMsg opens the diff of two snapshots once both are
	// loaded (one may be loading, or not in memory).
	diffWhenLoadedMsg struct{ x, y int }
	// openOverlayMsg shows a modal view over the tabs.
	openOverlayMsg struct{ o overlay }
	// showHelpMsg opens the help.
	showHelpMsg struct{}
	// focusGPUMsg asks the Live tab to show one GPU (by UUID); host and
	// index name it in the answer when it is not local.
	focusGPUMsg struct{ uuid, host, index string }
	// localGPUsMsg tells the Fleet tab the UUIDs of this machine's GPUs.
	localGPUsMsg struct{ uuids map[string]bool }
	// exportMsg asks a tab to export its view (as its e key does).
	exportMsg struct{}
	// showStagesMsg asks the Timeline for its stages view.
	showStagesMsg struct{}
	// seekEventMsg moves the Timeline's cursor to an event.
	seekEventMsg struct{ at int }
	// openRankMsg asks a tab to open rank n: Traces its detail, Snapshot
	// the rank's snapshot in the iteration shown. When the tab has no
	// such rank and orElse is set, it passes the message on to orElse.
	openRankMsg struct {
		n      int
		orElse *tabID
	}
)
