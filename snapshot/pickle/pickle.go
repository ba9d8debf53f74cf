package pickle

import (
	"context"
	"errors"
	"fmt"
	"math"

	"memscope/internal/budget"
)

// This file is a restricted pickle virtual machine. It runs the data-only
// subset of protocols 2-5 and builds a compact value graph: no interface{}
// boxing, one 16-byte val per stack slot, containers as runs in one shared
// arena. bind.go then turns the graph into typed structs.
//
// Frame dicts ({filename, line, name}) are by far the most numerous objects in
// a snapshot (4.5 million in an 80 MB one), so they never become containers:
// EMPTY_DICT leaves a pending dict on the stack, and when SETITEMS fills it
// with a frame's three keys it becomes a kFrame val, an id into the interned
// frame table, in the stack and in the memo. Any other use of a pending dict
// gives it a container first (materialize).

// DecodeError is a pickle that cannot be decoded.
type DecodeError struct {
	Offset int
	Msg    string
}

func (e *DecodeError) Error() string { return fmt.Sprintf("pickle byte %d: %s", e.Offset, e.Msg) }

type decoder struct {
	data       []byte
	pos        int
	g          *graph
	stack      []val
	marks      []int
	memo       chunked[uint32] // see memoRef
	memoVals   chunked[val]
	memoSparse map[uint32]val
	scratch    []uint32
	// inline and inlineAt are the frame dicts written out in the list
	// frameList reads, and where each goes among its frames.
	inline   []rawFrame
	inlineAt []int
	// pendPos is the stack index of the pending dict (see materialize), or
	// -1; pendMemo is the memo index it was stored at, or -1.
	pendPos, pendMemo int
	frameKeys         frameKeys
	// states are the block states met, by string id (blockState).
	states []stateID
	// memoValsMax is maxMemoVals, lower in tests.
	memoValsMax int
	// progress, when set, is called with the fraction of the input decoded,
	// at the first cancellation check (see cancelEvery) after each
	// progressStep bytes.
	progress   func(float64)
	ctx        context.Context
	nextReport int
	// drop, when set, is called with input ranges this machine has read
	// past ([dropped, to), every dropStep bytes): the caller gives a
	// mapped file's pages back, so that the file does not stay resident
	// next to what is decoded from it. Nothing decoded refers to the input.
	drop    func(from, to int)
	dropped int
	// jsonBatch is jsonBatch, lower in tests.
	jsonBatch int
	// headers, when set, reads frame headers for planning the helpers
	// without faulting the mapped input in (see fileHeaders).
	headers headerFunc
	// small mirrors memo entries 0 to smallMemo-1 (kUnset for a hole or a
	// pending dict). BINGET (one-byte index) reads only it, LONG_BINGET
	// first: in a snapshot the first entries are the dict keys and common
	// strings, read tens of millions of times, and the memo's own lookup
	// (its chunk, then the value table for a string) was 80 ms of
	// bigtrain's decode.
	small    [smallMemo]val
	strIndex map[string]uint32
	// strBytes is the bytes of the distinct strings (see cost).
	strBytes int64
	// puts counts PUT, BINPUT, LONG_BINPUT and MEMOIZE opcodes: the memo
	// budget; otherPuts counts the BINPUT and LONG_BINPUT that name
	// another index than the memo's next (what MEMOIZE would add), which
	// pickle.dump never writes.
	puts, otherPuts int
	// end is where run stops to call atEnd: len(data), or a split point
	// (see helper.go).
	end int
	// stream, when set, is input still arriving: data is the part of it
	// that has arrived, up to a frame's end (see stream.go).
	stream *Stream
	// streamed is how much of the stream the machine has been given.
	streamed int
	// The rest is for running parts of a pickle on other cores (helper.go).
	// A machine that has helpers joins the result of helpers[nextHelper]
	// at joinAt (-1 when none is left).
	helpers    []*helper
	nextHelper int
	joinAt     int
	// followMin is followMin, lower in tests; follow is the helper that
	// a helper started after its region (see followPlan), until the main
	// machine joins this one.
	followMin int
	follow    *helper
	// A helper: region is set once it runs its region; refFrom is the memo
	// index from which LONG_BINGET pushes a kRef (math.MaxInt64 in a
	// machine that is not a helper); floor is the number of marks below
	// its region, which it must not pop; resid holds the items it appends
	// to the list below its region, residN the length of each batch.
	// refGap is the largest index - (entries made) over its kRefs: joining
	// checks with it that each named an entry made before it was read.
	region  bool
	refFrom int64
	refGap  int64
	// actionRefs holds, in a helper, each memo index that a record's
	// action names (see actionRef), once.
	actionRefs []uint32
	floor      int
	resid      []val
	residN     []int
	// residRun, while resid is empty, holds the items appended below the
	// region as a run of trace records: the first and how many.
	residRun [2]uint32
	// inBatch marks a helper whose region starts inside a batch (see
	// regionStart): its second mark is the batch's MARK, which only an
	// APPENDS to the list below may pop, and floor hides while openBatch
	// (the batch has not ended). A region that ends with the batch open
	// leaves its items in openItems, for the main machine's stack.
	inBatch, openBatch bool
	openItems          []val
	// stackMax, when not 0, is the stack's limit (stackLimit), in tests.
	stackMax int
	// stackMoved is set once the value stack moved off the heap (see
	// moveStack); stackMem is that memory, freed with freeStack.
	stackMoved bool
	stackMem   []val
	// regionBase is the input's index of a helper's first region entry,
	// learnt from its first LONG_BINPUT (protocols 2 and 3 number every
	// put; -1 until one is read): the join checks that it is the main
	// machine's memo size at the boundary.
	regionBase int64
	// joined, in a main machine that joined helpers, gives the memo
	// entries each made (left holes in memo), in the order of the input.
	joined []*joiner
	// joinGarbage is what the helpers joined since the last collection
	// let go of (see collectBeforeJoin).
	joinGarbage int64
	// noFast turns the fast paths (frameList, frameDict, traceEntry) off
	// (tests compare both ways); fastLists, fastDicts and fastTraces
	// count what they took (traceEntry: entries read to their end).
	noFast bool
	// noBlocks leaves block dicts generic (pendingBlock off): tests bind
	// both ways.
	noBlocks bool
	// exact makes frameList compare every list it finds in the stack
	// table at once, not claim it (see claims.go): a decode again after
	// a claim was wrong.
	exact      bool
	fastDicts  int
	fastLists  int
	fastTraces int
	// bareLists counts the lists that are kStack values (no container)
	// and have stayed so.
	bareLists int
	// spans holds the frame lists frameList has read, by their bytes.
	spans spanCache
	// recentStrs holds the last string interned of each length modulo 8.
	recentStrs [8]recentStr
}

// decodePickle runs the restricted VM over data and returns the graph and
// the top-level value. Bytes after STOP are ignored (the HTML form pads with
// NULs; pickle.load ignores trailing data too).
func decodePickle(data []byte) (*graph, val, error) {
	return decodePickleCtx(context.Background(), data, nil, nil, nil)
}

// progressStep is how many input bytes pass between progress reports and
// cancellation checks.
const progressStep = 4 << 20

// dropStep is how many input bytes a machine reads between calls of its
// drop hook; a power of two (the ranges end at its multiples, so at page
// boundaries).
const dropStep = 4 << 20

// drop, when set, is told which input pages each machine is done with (see
// decoder.drop). With a pool, the trace records live outside the Go heap
// (see chunked) and the caller must call graph.free when done with them.
func decodePickleCtx(ctx context.Context, data []byte, progress func(float64), drop func(from, to int), pool *offHeapPool, opts ...func(*decoder)) (*graph, val, error) {
	d, root, err := decodeWith(ctx, data, progress, splitEven(data, drop), drop, pool, opts...)
	if err != nil {
		return nil, val{}, err
	}
	return d.g, root, nil
}

// decodeWith runs the machine, with helpers on other cores where split
// (nil for none) places them (see helper.go).
// On an error (or a panic, such as a fault reading a mapped file) the
// records it holds off the heap are freed.
func decodeWith(ctx context.Context, data []byte, progress func(float64), split splitFunc, drop func(from, to int), pool *offHeapPool, opts ...func(*decoder)) (d *decoder, root val, err error) {
	d, root, err = decodeOnce(ctx, data, progress, split, drop, pool, opts...)
	if err == errClaims && !d.exact && d.stream == nil {
		// The input is still there (a stream's is not: see
		// ErrStacksAlike): decode it again, comparing every list.
		return decodeOnce(ctx, data, progress, split, drop, pool, append(opts, exactly)...)
	}
	return d, root, err
}

// exactly is the option of a decode again after a wrong claim.
func exactly(d *decoder) { d.exact = true }

// errClaims is decodeOnce's error when a claim was wrong (see claims.go).
var errClaims = fmt.Errorf("two distinct call stacks hashed alike: %w", ErrStacksAlike)

// ErrStacksAlike is DecodeStream's error when two distinct call stacks had
// the same 64-bit hash, which happens one time in 2^64 (see claims.go): what
// it decoded is wrong, and the input must be decoded again from its start
// by DecodeSnapshot or DecodeMapped, which then compare every stack.
var ErrStacksAlike = errors.New("decode again, comparing every call stack")

// decodeOnce is decodeWith without a second decode after a wrong claim.
func decodeOnce(ctx context.Context, data []byte, progress func(float64), split splitFunc, drop func(from, to int), pool *offHeapPool, opts ...func(*decoder)) (d *decoder, root val, err error) {
	d = newDecoder(data)
	for _, o := range opts {
		o(d) // before the helper starts: it copies what it needs
	}
	d.ctx, d.progress, d.drop = ctx, progress, drop
	d.g.setPool(pool)
	ok := false
	defer func() {
		d.freeStack() // root is a value, copied off the stack
		if !ok {
			d.g.free()
		}
	}()
	if split != nil {
		d.startHelpers(split)
		defer d.stopHelpers()
	}
	root, err = d.run()
	if err == nil && !d.g.stacks.settleClaims() {
		err = errClaims
	}
	d.data = nil
	// The graph outlives the decoder (the binder reads it): chunks kept
	// for joins that will not come go with the decoder.
	d.g.conts.spare, d.g.items.spare = nil, nil
	ok = err == nil
	return d, root, err
}

func newDecoder(data []byte) *decoder {
	d := &decoder{
		data:        data,
		g:           &graph{allocs0: heapAllocs()},
		stack:       make([]val, 0, 256),
		strIndex:    make(map[string]uint32),
		pendPos:     -1,
		pendMemo:    -1,
		memoValsMax: maxMemoVals,
		end:         len(data),
		joinAt:      -1,
		followMin:   followMin,
		refFrom:     math.MaxInt64,
		regionBase:  -1,
		refGap:      math.MinInt64,
	}
	d.frameKeys.ids = [3]uint32{noRef, noRef, noRef}
	for i := range d.small {
		d.small[i].k = kUnset
	}
	return d
}

// smallMemo is how many memo entries decoder.small mirrors; binGetReach
// is how far BINGET's one-byte index reaches.
const (
	smallMemo   = 1 << 14
	binGetReach = 256
)

// stackOffHeapMin is the capacity past which the value stack moves off the
// heap (moveStack): a list written in one batch of a million items
// (PyTorch's C++ pickler writes a trace so) grew it by doubling, each
// time copying it and faulting fresh pages in, a fifth of such a decode's
// CPU. stackSlack is more than cancelEvery opcodes push between two
// checks of the stack's size against stackLimit.
const (
	stackOffHeapMin = 1 << 16
	stackSlack      = cancelEvery * 2 * traceItemsMax
)

// moveStack moves the value stack, once it has grown past
// stackOffHeapMin values, to memory outside the heap with room for
// stackLimit, where it never moves again: pages are mapped as they are
// first written, and given back with freeStack. Where the kernel gives no
// such memory, the stack stays on the heap.
func (d *decoder) moveStack(stack []val) []val {
	d.stackMoved = true
	mem, ok := offHeap[val](d.stackLimit()+stackSlack, false)
	if !ok {
		return stack
	}
	d.stackMem = mem
	return append(mem[:0], stack...)
}

// freeStack gives the off-heap stack back, when the decode no longer
// needs it (nothing decoded refers to it: values are copied off it).
func (d *decoder) freeStack() {
	if d.stackMem != nil {
		d.stack = nil
		freeOffHeap(d.stackMem)
		d.stackMem = nil
	}
}

// cancelEvery is how many opcodes run between cancellation checks: a few
// microseconds of work, so a cancelled load stops at once
// even on inputs where each opcode is slow.
const cancelEvery = 4096

func (d *decoder) report(pos int) error {
	if d.ctx != nil {
		if err := d.ctx.Err(); err != nil {
			return err
		}
	}
	if d.drop != nil && pos-d.dropped >= dropStep {
		to := pos &^ (dropStep - 1)
		if to > d.dropped {
			d.drop(d.dropped, to)
			d.dropped = to
		}
	}
	if pos >= d.nextReport {
		d.nextReport = pos + progressStep
		if size := d.inputSize(); d.progress != nil && size > 0 {
			d.progress(min(1, float64(pos)/float64(size)))
		}
	}
	return nil
}

// The decoder's memory budget, whatever the file claims: the value stack,
// the MARK stack, the memo, the containers and the strings together may
// hold at most budget.Limit of the input (bigtrain, a real 181 MiB trace,
// needs 0.9 bytes per input byte; 100 MB of NONE or MARK opcodes would take
// 7 GiB and 4 GiB). The value stack holds at most maxStack values
// (pickle.dump pushes 1000 between a MARK and its APPENDS), or more in a
// larger input (stackLimit); MARKs nest at most maxMarks deep
// (a snapshot nests about six).
const (
	maxStack = 1 << 22
	maxMarks = 1 << 16
)

// stackInputBytes is the input a value on the stack needs past maxStack
// values: a list written in one batch holds all of its items on the stack
// at once, and PyTorch's C++ pickler writes a trace so, 40-odd bytes an
// entry (a 270 MB trace of 5M entries was refused at maxStack). Input of
// one-byte values (NONE) is refused at 16 bytes of stack per byte, within
// the budget.
const stackInputBytes = 16

// stackLimit is the most values the stack may hold: maxStack, or one per
// stackInputBytes of a larger input.
func (d *decoder) stackLimit() int {
	if d.stackMax > 0 {
		return d.stackMax
	}
	return max(maxStack, len(d.data)/stackInputBytes)
}

// cost estimates the memory the machine holds, in bytes.
func (d *decoder) cost(stack int) int64 {
	g := d.g
	return 16*int64(stack) + 8*int64(len(d.marks)) + 16*int64(g.items.len()) + 24*int64(g.conts.len()) +
		16*int64(d.memoVals.len()) + 4*int64(d.memo.len()) + 48*int64(g.traces.len()) + 40*int64(g.blocks.len()) +
		72*int64(len(g.extras)) + // a rawExtra and its entry in extraIDs
		32*g.spilled + // a spill slice grows by doubling
		strCost*int64(len(g.strs)) + d.strBytes +
		sparseCost*int64(len(d.memoSparse))
}

// checkBudget refuses input past the budget; called every cancelEvery
// opcodes, so it overshoots by at most that many values.
func (d *decoder) checkBudget(at, stack int) error {
	if limit := d.stackLimit(); stack > limit {
		return d.errf(at, "more than %d values on the pickle stack (memscope's limit for a %d MiB input; pickle.dump pushes 1000 at a time)", limit, len(d.data)>>20)
	}
	if len(d.marks) > maxMarks {
		return d.errf(at, "MARKs nest more than %d deep (memscope's limit; a snapshot nests a few)", maxMarks)
	}
	if c, limit := d.cost(stack), budget.Limit(len(d.data)); c > limit {
		return d.errf(at, "decoding needs more than %d MiB for a %d MiB input (memscope's limit: %d bytes per input byte + %d MiB); a hostile or corrupt pickle?",
			limit>>20, len(d.data)>>20, budget.PerByte, budget.Base>>20)
	}
	return nil
}

func (d *decoder) errf(off int, format string, args ...any) error {
	return &DecodeError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// need returns the next n bytes or a truncation error naming the opcode.
func (d *decoder) need(n int, op string, at int) ([]byte, error) {
	if n < 0 || n > len(d.data)-d.pos {
		return nil, d.errf(at, "%s needs %d bytes but only %d remain (file truncated or corrupt)", op, n, len(d.data)-d.pos)
	}
	b := d.data[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) push(v val) { d.stack = append(d.stack, v) }

func (d *decoder) newCont(k vkind, items []val) uint32 {
	id := d.g.conts.push(container{vk: k})
	if len(items) > 0 {
		d.extend(id, items)
	}
	return id
}

func (d *decoder) str(b []byte) uint32 {
	// The same short string written again and again (PyTorch writes each
	// trace entry's compile_context, "N/A", afresh): compare it with the
	// last string of its length before hashing it.
	r := &d.recentStrs[len(b)&(len(d.recentStrs)-1)]
	if r.ok && r.s == string(b) {
		return r.id
	}
	id, ok := d.strIndex[string(b)]
	if !ok {
		id = d.addStr(string(b))
	}
	*r = recentStr{d.g.strs[id], id, true}
	return id
}

// recentStr is the last string of a length (modulo) that str interned.
type recentStr struct {
	s  string
	id uint32
	ok bool
}

// strID is str for a string.
func (d *decoder) strID(s string) uint32 {
	if id, ok := d.strIndex[s]; ok {
		return id
	}
	return d.addStr(s)
}

// strCost is what a distinct string costs besides its bytes: its header,
// role and index entry, and its allocation's rounding. sparseCost is a
// memo entry put far past the memo's end (memoSparse's map entry).
const (
	strCost    = 64
	sparseCost = 48
)

func (d *decoder) addStr(s string) uint32 {
	d.strBytes += int64(len(s))
	id := uint32(len(d.g.strs))
	d.g.strs = append(d.g.strs, s)
	d.g.roles = append(d.g.roles, roleOf(s))
	d.strIndex[s] = id
	return id
}

// extend appends vals to a container. Runs are extended in place when they
// sit at the arena's tail (the common case: a container's items are written
// right after it); otherwise the container moves to a slice of its own.
func (d *decoder) extend(cid uint32, vs []val) {
	g := d.g
	c := g.conts.at(cid)
	switch c.kind {
	case cFrame:
		d.unframe(cid)
	case cStack:
		d.unstack(cid)
	case cTrace:
		d.untrace(cid)
	case cTraceList:
		d.untraceList(cid)
	}
	if !c.spilled {
		if c.n == 0 {
			if start, ok := g.items.run(len(vs)); ok {
				c.start = start
				copy(g.items.slice(start, uint32(len(vs))), vs)
				c.n = uint32(len(vs))
				return
			}
		} else if g.items.canGrow(c.start, c.n, len(vs)) {
			g.items.n += uint32(len(vs))
			copy(g.items.slice(c.start, c.n+uint32(len(vs)))[c.n:], vs)
			c.n += uint32(len(vs))
			return
		}
		// Too big for a chunk, or not at the tail: give the container a
		// slice of its own.
		sp := make([]val, 0, 2*(int(c.n)+len(vs)))
		if c.n > 0 {
			sp = append(sp, g.items.slice(c.start, c.n)...)
		}
		c.start = uint32(len(g.spills))
		c.spilled = true
		g.spills = append(g.spills, sp)
		g.spilled += int64(c.n)
	}
	g.spills[c.start] = append(g.spills[c.start], vs...)
	g.spilled += int64(len(vs))
	c.n += uint32(len(vs))
}

// appendItems adds items to a list: a fresh list of frames becomes an
// interned stack, and a list of consecutive trace records a run of them.
func (d *decoder) appendItems(list uint32, items []val) {
	c := d.g.conts.at(list)
	switch {
	case c.n == 0 && c.kind == cGeneric:
		if d.tryStack(list, items) || d.tryTraceList(list, items) {
			return
		}
	case c.kind == cTraceList:
		if d.growTraceList(c, items) {
			return
		}
	}
	d.extend(list, items)
}

func (d *decoder) popMark(at int, op string) (int, error) {
	if len(d.marks) <= d.floor {
		return 0, d.errf(at, "%s without a preceding MARK", op)
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	return m, nil
}

func (d *decoder) lastMark() int {
	if len(d.marks) == 0 {
		return 0
	}
	return d.marks[len(d.marks)-1]
}

func (d *decoder) pop(at int, op string) (val, error) {
	if len(d.stack) <= d.lastMark() {
		return val{}, d.errf(at, "%s on an empty stack", op)
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

func (d *decoder) top(at int, op string) (val, error) {
	if len(d.stack) == 0 || len(d.stack) <= d.lastMark() {
		return val{}, d.errf(at, "%s on an empty stack", op)
	}
	return d.stack[len(d.stack)-1], nil
}
