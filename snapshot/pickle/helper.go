package pickle

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"runtime/debug"
)

// Running a large pickle on two cores. The pickle machine is inherently
// sequential (every opcode works on the stack the previous one left), but a
// snapshot is mostly one long list, the trace entries, which pickle.dump
// writes in batches: MARK, 1000 items, APPENDS. A batch boundary past the
// middle of the file is found cheaply (protocol 4 frames give opcode
// boundaries without running anything), and a second machine, the helper,
// runs from there while the main machine runs up to it:
//
//   - The helper first runs the start of the pickle (the prefix, 1/32 of it)
//     for the memo entries the rest reads most: dict keys and the strings of
//     frames. Memo entries made between its prefix and its region are not
//     known to it, nor are its own entries' absolute indices, so it reads
//     those (and the prefix's containers, which must be the main machine's
//     objects) as kRef placeholders.
//   - Its stack starts as kTop (the list the batches go to) under a mark it
//     may not pop. Items that APPENDS adds to kTop are kept aside; after
//     the last batch (the next opcode is not a MARK) the helper stops.
//   - When the main machine reaches the boundary it joins the helper's
//     work: strings, frames and stacks are interned into its own tables,
//     containers and trace records are copied with their references
//     renumbered, the helper's memo entries are appended to its memo (whose
//     size is exactly the index the helper's first entry had), placeholders
//     are replaced by the memo entries they name, and the kept items are
//     appended to the list on top of its stack. It then goes on after the
//     helper's region.
//
// Anything the helper cannot do exactly as the main machine would (an error,
// an explicit memo index, a pop below its region, a placeholder that is not
// resolvable) makes it give up, and the main machine runs that part itself:
// the result is the same either way, only slower.

// parallelMin is the smallest input run on two machines: below it the
// helper's start-up is not worth it.
const parallelMin = 8 << 20

// errHelperStop ends a helper that meets something it cannot run; errPrefix
// and errRegion end the two stages of a helper that ran.
var (
	errHelperStop = errors.New("helper stops")
	errPrefix     = errors.New("prefix done")
	errRegion     = errors.New("region done")
)

// helper is the main machine's handle on a helper running on another core.
type helper struct {
	done   chan *decoder // the helper when it ran its region, or nil
	cancel context.CancelFunc
	// joined is set once done has been read.
	joined bool
}

// splitPlan says where a helper's prefix ends and where its region starts.
type splitPlan struct{ prefix, at int }

// planSplit finds the prefix end (the first frame boundary at or after
// prefix) and the region start: the first MARK after an APPENDS at or after
// the first frame boundary past target. false when data is not framed
// (protocol 4 or 5) or has no batch boundary there.
func planSplit(data []byte, prefix, target int) (splitPlan, bool) {
	if len(data) < 11 || data[0] != opProto || data[1] < 4 || data[1] > 5 || data[2] != opFrame {
		return splitPlan{}, false
	}
	p := splitPlan{prefix: -1}
	pos := 2
	for pos < target {
		if pos >= prefix && p.prefix < 0 {
			p.prefix = pos
		}
		n, ok := opSize(data, pos)
		if !ok {
			return splitPlan{}, false
		}
		if data[pos] == opFrame {
			// The frame's opcodes are skipped at once.
			l := binary.LittleEndian.Uint64(data[pos+1:])
			if l > uint64(len(data)-pos-n) {
				return splitPlan{}, false
			}
			n += int(l)
		}
		pos += n
	}
	if p.prefix < 0 || p.prefix >= pos {
		return splitPlan{}, false
	}
	at, ok := batchStart(data, pos)
	if !ok {
		return splitPlan{}, false
	}
	p.at = at
	return p, true
}

// batchStart walks opcodes from pos (an opcode boundary) to the first MARK
// that follows an APPENDS.
func batchStart(data []byte, pos int) (int, bool) {
	prev := byte(0)
	for pos < len(data) {
		op := data[pos]
		if op == opMark && prev == opAppends {
			return pos, true
		}
		n, ok := opSize(data, pos)
		if !ok || n > len(data)-pos {
			return 0, false
		}
		prev = op
		pos += n
	}
	return 0, false
}

// splitHalf places a helper's region start past the middle of input of n
// bytes (the helper first runs the prefix, 1/32 of it), when n is at least
// parallelMin and there is a second core.
func splitHalf(n int) (prefix, target int, ok bool) {
	if n < parallelMin || runtime.GOMAXPROCS(0) < 2 {
		return 0, 0, false
	}
	return n / 32, n/2 + n/64, true
}

// startHelper plans a split of d's input where split says and starts a
// helper on it; false when split says no or the input cannot be split.
func (d *decoder) startHelper(split func(n int) (prefix, target int, ok bool)) bool {
	prefix, target, ok := split(len(d.data))
	if !ok {
		return false
	}
	p, ok := planSplit(d.data, prefix, target)
	if !ok {
		return false
	}
	if d.drop != nil {
		// Planning read frame headers up to the region: the machines
		// read those pages again when they get there.
		d.drop(p.prefix, p.at)
	}
	ctx := d.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &helper{done: make(chan *decoder, 1), cancel: cancel}
	d.help, d.joinAt, d.end = h, p.at, p.at
	data := d.data // decodeWith clears d.data while the helper may run
	go func() {
		// The input may be a mapped file that another program truncates
		// or rewrites meanwhile: a read past its new end faults (SIGBUS),
		// which must not kill the process from this goroutine. A helper
		// that faults, or fails in any way, just does not join: the main
		// machine decodes the region itself and reports the error.
		var out *decoder
		defer func() {
			if r := recover(); r != nil {
				out = nil
			}
			h.done <- out
		}()
		debug.SetPanicOnFault(true)
		out = runHelper(ctx, data, p, d.drop, d.g.traces.pool, d.noFast)
	}()
	return true
}

// stopHelper cancels the helper if it still runs and waits for it, so that
// nothing reads the input after the decoder returns (a mapped file is
// unmapped then).
func (d *decoder) stopHelper() {
	h := d.help
	if h == nil {
		return
	}
	h.cancel()
	if !h.joined {
		if out := <-h.done; out != nil {
			out.g.free() // its work is dropped
		}
		h.joined = true
	}
}

// runHelper runs a helper: the prefix, then the region. It returns nil
// when the helper gave up.
func runHelper(ctx context.Context, data []byte, p splitPlan, drop func(from, to int), pool *offHeapPool, noFast bool) (out *decoder) {
	h := newDecoder(data)
	h.noFast = noFast
	h.ctx, h.end = ctx, p.prefix
	h.g.traces.pool = pool
	defer func() {
		if out == nil { // gave up, or a panic passes
			h.g.free()
		}
	}()
	if _, err := h.run(); err != errPrefix {
		return nil
	}
	if !h.enterRegion(p.at) {
		return nil
	}
	h.drop, h.dropped = drop, p.at
	if _, err := h.run(); err != errRegion {
		return nil
	}
	return h
}

// enterRegion turns a helper that ran its prefix into one that runs its
// region from at.
func (d *decoder) enterRegion(at int) bool {
	m0 := d.memo.len()
	if m0 < len(d.small) {
		// BINGET's one-byte indices would reach the region's entries,
		// whose indices the helper does not know.
		return false
	}
	// The prefix's containers are the main machine's objects by the
	// time it joins: read them as references. Holes (pending dicts) too.
	for i := range uint32(m0) {
		r := d.memo.at(i)
		if *r < memoOther && *r&memoIDMask != 0 {
			*r = 0
		}
	}
	for i := range d.small {
		if k := d.small[i].k; k >= kList && k <= kSet {
			d.small[i] = val{k: kUnset}
		}
	}
	d.pendPos, d.pendMemo = -1, -1
	d.spans.reset() // the stacks it names are in the table cleared below
	g := d.g
	pool := g.traces.pool
	g.free()
	g.conts, g.items, g.spills, g.traces, g.stacks = chunked[container]{}, chunked[val]{}, nil, chunked[rawTrace]{pool: pool}, stackTable{}
	g.spilled = 0
	d.region, d.refFrom, d.floor = true, int64(m0), 1
	d.stack = append(d.stack[:0], val{k: kTop})
	d.marks = append(d.marks[:0], 1)
	d.pos, d.end = at, len(d.data)
	return true
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
	switch {
	case d.joinAt >= 0:
		at := d.joinAt
		d.joinAt, d.end = -1, len(d.data)
		if d.pos == at {
			h := d.help
			helper := <-h.done
			h.joined = true
			if helper != nil && !d.join(helper) {
				helper.g.free() // the main machine runs the region itself
			}
		}
		// Past the boundary (it was no opcode boundary, in a file whose
		// frames do not hold whole opcodes): the helper's work is
		// dropped, and stopHelper waits for it.
		return nil
	case d.region:
		return errHelperStop // truncated: the main machine reports it
	case d.end < len(d.data):
		if d.pos == d.end {
			return errPrefix
		}
		return errHelperStop
	}
	return d.errf(d.pos, "data ends before the STOP opcode (file truncated?)")
}
