package pickle

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime/debug"
	"slices"
)

// Running a large pickle on several cores. The pickle machine is inherently
// sequential (every opcode works on the stack the previous one left), but a
// snapshot is mostly one long list, the trace entries, which pickle.dump
// writes in batches: MARK, 1000 items, APPENDS. Batch boundaries are found
// cheaply (protocol 4 frames give opcode boundaries without running
// anything; in protocols 2 and 3, which have no frames, the bytes of a
// batch of dicts are searched, and the main machine confirms the place
// when it gets there), and other machines, the helpers, each run from one
// while the main machine runs up to the first:
//
//   - The helper first runs the start of the pickle (the prefix, 1/32 of it)
//     for the memo entries the rest reads most: dict keys and the strings of
//     frames. Memo entries made between its prefix and its region are not
//     known to it, nor are its own entries' absolute indices, so it reads
//     those (and the prefix's containers, which must be the main machine's
//     objects) as kRef placeholders.
//   - Its stack starts as kTop (the list the batches go to) under a mark it
//     may not pop. Items that APPENDS adds to kTop are kept aside; after
//     the last batch (the next opcode is not a MARK), or at the next
//     helper's start, the helper stops.
//   - PyTorch's C++ pickler writes a list's items in one batch, so there a
//     region starts at a dict inside it (inBatch): a second mark, the
//     batch's, lies above kTop, and only an APPENDS to kTop may pop it.
//     A region that ends with the batch still open leaves its items for
//     the main machine's stack, above the items it read before the region;
//     one that holds the APPENDS has the main machine add those first.
//   - A helper whose list ends well before the next helper's start (a
//     device's trace, the next device's after it) starts another one at
//     the next batch boundary, which the main machine joins next: a
//     snapshot of three devices' traces was otherwise decoded on one core
//     from the second's end on (see followPlan).
//   - When the main machine reaches the boundary it joins the helper's
//     work: strings, frames and stacks are interned into its own tables,
//     containers and trace records are copied with their references
//     renumbered, the helper's memo entries are appended to its memo (whose
//     size is exactly the index the helper's first entry had), placeholders
//     are replaced by the memo entries they name, and the kept items are
//     appended to the list on top of its stack. It then goes on after the
//     helper's region, to the next helper's start. A placeholder may name
//     an entry an earlier helper made: it is read through that join.
//
// A helper's region numbers its memo entries from its prefix's end; where
// the input numbers them (BINPUT, LONG_BINPUT), the helper learns from the
// first which index the main machine's memo will give its first entry,
// and the join checks it (see learnBase).
//
// Anything the helper cannot do exactly as the main machine would (an error,
// a put of another index than the next, a pop below its region, a
// placeholder that is not resolvable) makes it give up, and the main
// machine runs that part itself (and joins the next helper after it): the
// result is the same either way, only slower.

// errHelperStop ends a helper that meets something it cannot run; errPrefix
// and errRegion end the two stages of a helper that ran.
var (
	errHelperStop = errors.New("helper stops")
	errPrefix     = errors.New("prefix done")
	errRegion     = errors.New("region done")
)

// helper is the main machine's handle on a helper running on another core.
type helper struct {
	at     int           // where its region starts
	done   chan *decoder // the helper when it ran its region, or nil
	cancel context.CancelFunc
	// joined is set once done has been read.
	joined bool
}

// startHelpers plans d's helpers where split says and starts each on
// another goroutine; none when split says none or the input cannot be
// split (not framed, no batch boundary past a target).
func (d *decoder) startHelpers(split splitFunc) {
	prefix, targets := split(len(d.data))
	var plans []splitPlan
	for _, t := range targets {
		p, ok := planSplitRead(d.data, d.headers, prefix, t)
		if !ok {
			break // no batch boundary past t: none past later targets
		}
		if n := len(plans); n > 0 && p.at <= plans[n-1].at {
			continue // two targets in one batch
		}
		plans = append(plans, p)
	}
	if len(plans) == 0 {
		return
	}
	for i := range plans[1:] {
		plans[i].stop = plans[i+1].at
	}
	if d.drop != nil {
		// Planning read frame headers up to the last region: the machines
		// read those pages again when they get there.
		d.drop(plans[0].prefix, plans[len(plans)-1].at)
	}
	ctx := d.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	// decodeWith clears d.data while helpers may run.
	run := helperRun{data: d.data, drop: d.drop, pool: d.g.traces.pool, modes: d.modes(), followMin: d.followMin}
	for _, p := range plans {
		d.helpers = append(d.helpers, run.start(ctx, p))
	}
	d.joinAt, d.end = plans[0].at, plans[0].at
}

// helperRun is what every helper of one decode shares.
type helperRun struct {
	data      []byte
	drop      func(from, to int)
	pool      *offHeapPool
	modes     machineModes
	followMin int
}

// start runs a helper on plan p on another goroutine.
func (r helperRun) start(ctx context.Context, p splitPlan) *helper {
	hctx, cancel := context.WithCancel(ctx)
	h := &helper{at: p.at, done: make(chan *decoder, 1), cancel: cancel}
	go func() {
		// The input may be a mapped file that another program
		// truncates or rewrites meanwhile: a read past its new end
		// faults (SIGBUS), which must not kill the process from this
		// goroutine. A helper that faults, or fails in any way, just
		// does not join: the main machine decodes the region itself
		// and reports the error.
		var out *decoder
		defer func() {
			if e := recover(); e != nil {
				out = nil
			}
			h.done <- out
		}()
		debug.SetPanicOnFault(true)
		out = runHelper(hctx, r.data, p, r.drop, r.pool, r.modes)
		if out == nil {
			return
		}
		if next, ok := followPlan(r.data, p, out.pos, r.followMin); ok && framesRepeat(out.g.frames.len(), out.pos-p.at) {
			// Its list ended well short of its stop (a snapshot's next
			// device trace, which the main machine would otherwise run
			// alone): a helper of its own takes the rest, with the
			// core this one leaves. Cancelling this helper cancels it.
			out.follow = r.start(hctx, next)
		}
	}()
	return h
}

// followMin is the least input a helper whose list ended leaves to a
// helper that follows it (see followPlan): less is not worth another
// prefix.
const followMin = regionMin

// framesRepeat reports whether a helper that read frames distinct frames
// in a region of n bytes met them again and again, as real traces do: at
// most one per followFrameBytes. Where most frames are new, the join
// interns each of a follower's frames again, which costs about what
// decoding them did: a follower would hold its tables as long and save
// no time (three devices' traces over 1.6M distinct frames: 0.64 s
// either way, 243 MiB without one, 306 with).
func framesRepeat(frames, n int) bool {
	return frames <= n/followFrameBytes
}

// followFrameBytes is the fewest bytes of region per distinct frame for
// a helper to start a follower (a frame written out is about 60 bytes).
const followFrameBytes = 64

// followPlan plans the helper that follows one (plan p) whose batches
// ended at end, short of p.stop: the same prefix, a region from the next
// batch boundary past end (found as the planner finds one) to p.stop.
// false when less than least bytes would be left to it, or no boundary is
// near enough.
func followPlan(data []byte, p splitPlan, end, least int) (splitPlan, bool) {
	if p.stop-end < least {
		return splitPlan{}, false
	}
	search := data[:min(p.stop, end+batchSearchMax)]
	next := splitPlan{prefix: p.prefix, stop: p.stop, walk: p.walk}
	var ok bool
	if framed(data) {
		next.at, ok = batchStart(search, end)
	} else {
		next.at, next.inBatch, ok = regionStart(search, end)
	}
	return next, ok && p.stop-next.at >= least
}

// stopHelpers cancels the helpers still running and waits for them, so that
// nothing reads the input after the decoder returns (a mapped file is
// unmapped then).
func (d *decoder) stopHelpers() {
	for _, h := range d.helpers {
		h.cancel()
	}
	for _, h := range d.helpers {
		h.drain()
	}
}

// drain cancels a helper that has not joined, waits for it and for the
// helper that follows it, and drops their work.
func (h *helper) drain() {
	if h.joined {
		return
	}
	h.joined = true
	h.cancel()
	if out := <-h.done; out != nil {
		if out.follow != nil {
			out.follow.drain()
		}
		out.g.free()
	}
}

// joinNext is called when the main machine reaches the next helper's
// region start, or passed it (a start that was no opcode boundary, in a
// file whose frames do not hold whole opcodes): it joins the helper's work
// if it can, and goes on to the next helper.
func (d *decoder) joinNext() {
	h := d.helpers[d.nextHelper]
	d.nextHelper++
	if d.pos == h.at {
		out := <-h.done
		h.joined = true
		if out != nil && out.follow != nil {
			// Its region follows this one's, before the next helper's.
			d.helpers = slices.Insert(d.helpers, d.nextHelper, out.follow)
			out.follow = nil
		}
		if out != nil && !d.join(out) {
			out.g.free() // the main machine runs the region itself
		}
	} else {
		h.cancel() // its work is dropped; stopHelpers waits for it
	}
	d.joinAt, d.end = -1, len(d.data)
	if d.nextHelper < len(d.helpers) {
		// A join leaves d.pos at or before the next region's start (its
		// helper stopped there, or where its batches ended).
		at := d.helpers[d.nextHelper].at
		d.joinAt, d.end = at, at
	}
}

// machineModes is how a machine reads lists, which its helpers copy.
type machineModes struct{ noFast, noBlocks, exact, weakHashes bool }

func (d *decoder) modes() machineModes {
	return machineModes{noFast: d.noFast, noBlocks: d.noBlocks, exact: d.exact, weakHashes: d.g.stacks.weak}
}

// runHelper runs a helper: the prefix, then the region, reading lists as
// its main machine does (m). It returns nil when the helper gave up.
func runHelper(ctx context.Context, data []byte, p splitPlan, drop func(from, to int), pool *offHeapPool, m machineModes) (out *decoder) {
	if p.walk {
		// The walk reads on past the trace's first key (where splitCores
		// may end the prefix) through the rest of its entry, whose other
		// keys are first written there too: a helper without them made
		// each entry of its region a generic dict, 12 values where a
		// record is one (the C++ pickler's layout after 40k blocks: twice
		// the memory of one machine, and slower). Protocol 4's prefix
		// ends at a frame's end, up to 64 KiB past it.
		stop := p.prefix + walkPastKey
		if stop >= p.at {
			stop = p.prefix + 1
		}
		end, ok := boundaryAfter(data, 2, stop)
		if !ok || end >= p.at {
			return nil
		}
		p.prefix = end
	}
	h := newDecoder(data)
	h.noFast, h.noBlocks, h.exact, h.g.stacks.weak = m.noFast, m.noBlocks, m.exact, m.weakHashes
	h.ctx, h.end = ctx, p.prefix
	h.g.setPool(pool)
	defer func() {
		h.freeStack()   // the join reads what the helper appended, never its stack
		if out == nil { // gave up, or a panic passes
			h.g.free()
		}
	}()
	if !h.runPrefix(p) {
		return nil
	}
	if drop != nil {
		// Pages of the prefix the main machine had given back before this
		// helper read them would stay (a few MiB for each helper).
		drop(0, p.prefix)
	}
	if !h.enterRegion(p.at, p.stop, p.inBatch) {
		return nil
	}
	h.drop, h.dropped = drop, p.at
	if _, err := h.run(); err != errRegion || !h.g.stacks.settleClaims() {
		return nil // a wrong claim too: main runs the region itself
	}
	if drop != nil {
		drop(h.dropped, h.pos) // the last pages of the region
	}
	return h
}

// walkPastKey is how far a helper's walk of unframed input reads past
// where its prefix was planned to end (see runHelper).
const walkPastKey = 64 << 10

// runPrefix runs a helper's prefix. A trace entry's keys ("action" first)
// are memo reads after the first entry: a helper that has not read them
// would make every entry of its region a generic dict (3x the memory of a
// record, slower than one machine). A snapshot's segments come before its
// trace, and with many live blocks they reach past the prefix (4.5% of a
// generated 26 MiB file): the prefix grows, a 32nd of the input at a time,
// up to an eighth of it (and never past the region), until the helper has
// read them. A helper still without them gives up at the first entry of
// its region (see giveUpOnDict); one whose region holds no trace (a
// snapshot of segments alone) runs it. A prefix that splitCores ended at
// the keys, past walkPrefixMin 32nds, is decoded up to its head and walked
// after it (prefixHead): decoding the 20 MB of segments before poollive's
// trace took its helper 195 ms, the head and the walk 85.
func (d *decoder) runPrefix(p splitPlan) bool {
	n := len(d.data)
	if head, ok := prefixHead(d.data, p.prefix); ok {
		d.end = head
		if _, err := d.run(); err != errPrefix {
			return false
		}
		d.end = p.prefix
		return d.walkPuts(p.prefix)
	}
	limit := min(p.at, max(p.prefix, n/8))
	for {
		if _, err := d.run(); err != errPrefix {
			return false
		}
		if _, ok := d.strIndex["action"]; ok {
			return true
		}
		var next int
		var ok bool
		switch {
		case framed(d.data):
			next, ok = frameAfter(d.data, d.end+n/32)
			ok = ok && next <= limit
		case d.end < limit:
			// Opcodes end anywhere: the last step ends at the first
			// boundary past the limit, short of the region.
			next, ok = boundaryAfter(d.data, d.end, min(d.end+n/32, limit))
			ok = ok && next < p.at
		}
		if !ok {
			return true
		}
		d.end = next
	}
}

// prefixHead is where a helper whose prefix ends at prefix stops decoding
// and walks the rest (walkPuts): the first frame or opcode boundary past a
// 32nd of data, when prefix lies past walkPrefixMin 32nds (a snapshot's
// segments of many live blocks, see splitCores). The head holds the
// frames the segments' first blocks write, which a trace's frame lists
// then read; the frames first written past it are read as placeholders.
func prefixHead(data []byte, prefix int) (int, bool) {
	from := len(data) / 32
	if prefix < walkPrefixMin*from {
		return 0, false
	}
	var head int
	var ok bool
	if framed(data) {
		head, ok = frameAfter(data, from)
	} else {
		head, ok = boundaryAfter(data, 2, from)
	}
	return head, ok && head < prefix
}

// walkPrefixMin is, in 32nds of the input, the prefix from which a helper
// walks past all but its first 32nd.
const walkPrefixMin = 3

// giveUpOnDict reports whether a helper stops at a fresh dict whose first
// key it cannot read: a key first written after its prefix (a trace
// entry's, see runPrefix), so that every such dict would stay generic,
// where one machine makes records.
func (d *decoder) giveUpOnDict(c *container, kv []val) bool {
	return d.region && c.n == 0 && c.kind == cGeneric && len(kv) > 0 && kv[0].k == kRef
}

// frameAfter walks the protocol 4 frames of data to the first frame start
// at or past min (a few thousand frames in an eighth of a large input).
func frameAfter(data []byte, min int) (int, bool) {
	pos := 2
	for pos < min {
		if pos+9 > len(data) || data[pos] != opFrame {
			return 0, false
		}
		l := binary.LittleEndian.Uint64(data[pos+1:])
		if l > uint64(len(data)-pos-9) {
			return 0, false
		}
		pos += 9 + int(l)
	}
	return pos, true
}

// enterRegion turns a helper that ran its prefix into one that runs its
// region from at to at most stop; inBatch: the region starts inside a
// batch, between its MARK and its APPENDS.
func (d *decoder) enterRegion(at, stop int, inBatch bool) bool {
	m0 := d.memo.len()
	// The prefix's containers, trace records and interned lists are the
	// main machine's objects by the time it joins (and the tables that
	// number them are cleared below): read them as references. Holes
	// (pending dicts) too.
	for i := range uint32(m0) {
		if r := d.memo.at(i); *r < memoOther && *r&memoIDMask != 0 || prefixOnly(*r) {
			*r = 0
		}
	}
	for i := range d.small {
		if k := d.small[i].k; k >= kList && k <= kSet || k == kTrace || k == kStack || k == kBlock {
			d.small[i] = val{k: kUnset}
		}
	}
	d.pendPos, d.pendMemo = -1, -1
	d.spans.reset() // the stacks it names are in the table cleared below
	g := d.g
	pool := g.traces.pool
	// The prefix's containers are dropped; their chunks hold the region's.
	var conts chunked[container]
	var items chunked[val]
	conts.recycle(&g.conts)
	items.recycle(&g.items)
	g.free()
	g.conts, g.items, g.spills, g.stacks = conts, items, nil, stackTable{}
	g.traces, g.blocks = chunked[rawTrace]{}, chunked[rawBlock]{}
	g.setPool(pool)
	g.traces.lazy = true
	g.spilled = 0
	for d.memo.len() < binGetReach {
		// BINGET's one-byte indices reach past the prefix's entries: to
		// those the main machine makes before the region, or to the
		// region's own, whose indices the helper does not know (PyTorch's
		// C++ pickler puts only strings and shared frames, so a trace of
		// few frames makes few entries). The region's are numbered from
		// binGetReach instead, past every BINGET, and the indices between
		// are holes, read as placeholders as those past it (getMemo).
		d.memo.push(0)
	}
	d.region, d.refFrom, d.floor = true, int64(d.memo.len()), 1
	d.stack = append(d.stack[:0], val{k: kTop})
	d.marks = append(d.marks[:0], 1)
	if inBatch {
		// The batch's MARK, above the list (kTop) and under the region's
		// items; the main machine's items before the region lie between
		// them, unknown here.
		d.marks = append(d.marks, 1)
		d.floor, d.inBatch, d.openBatch = 2, true, true
	}
	d.pos, d.end = at, stop
	return true
}

// prefixOnly reports whether memo entry r names a trace or block record or
// an interned list by its number in a table a helper clears at its region.
func prefixOnly(r uint32) bool {
	return r >= memoTrace && r < memoFrame || r >= memoStack
}

// appendBelow keeps items a helper appends to the list below its region
// (d.stack is the stack after the APPENDS), and stops the helper after its
// last batch.
func (d *decoder) appendBelow(items []val) error {
	d.residN = append(d.residN, len(items))
	switch {
	case len(d.resid) > 0:
		d.resid = append(d.resid, items...)
	default:
		// While the items are consecutive trace records (a device's
		// trace), only the run is kept: half a real trace's entries
		// would otherwise take a 16-byte val each, in a slice grown by
		// doubling.
		if first, ok := d.traceRun(items, d.residRun[0]+d.residRun[1], d.residRun[1] == 0); ok {
			if d.residRun[1] == 0 {
				d.residRun[0] = first
			}
			d.residRun[1] += uint32(len(items))
			break
		}
		c := container{start: d.residRun[0], n: d.residRun[1]}
		d.resid = append(d.g.traceListItems(&c), items...)
		d.residRun = [2]uint32{}
	}
	if d.pos < len(d.data) && d.data[d.pos] == opMark {
		return nil
	}
	return errRegion
}

// atEnd is called when run reaches d.end (d.pos and d.stack are current):
// the end of the input, a helper's prefix, or the point where the main
// machine joins its helper.
func (d *decoder) atEnd() error {
	if d.stream != nil {
		if more, err := d.more(); err != nil || more {
			return err
		}
	}
	switch {
	case d.joinAt >= 0:
		d.joinNext()
		return nil
	case d.region:
		if d.pos == d.end && d.end < len(d.data) && len(d.marks) == d.floor {
			if d.openBatch {
				// The next helper's start, inside the batch the region
				// started in: its items go on the main machine's stack,
				// above its own (see join).
				if d.pendPos >= 0 {
					d.materialize(d.stack)
				}
				d.openItems = append([]val(nil), d.stack[1:]...)
				return errRegion
			}
			if len(d.stack) == 1 {
				// The next helper's start, after a batch: the main
				// machine goes on from here as from any end of this
				// helper's batches.
				return errRegion
			}
		}
		return errHelperStop // truncated, or mid-batch: the main machine runs it
	case d.end < len(d.data):
		if d.pos == d.end {
			return errPrefix
		}
		return errHelperStop
	}
	return d.errf(d.pos, "data ends before the STOP opcode (file truncated?)")
}
