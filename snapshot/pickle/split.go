package pickle

// Where a decode's helpers go: how many machines an input is worth, the
// prefix every helper runs, and the batch boundaries their regions start
// at (see helper.go for what a helper does).

import (
	"bytes"
	"encoding/binary"
	"runtime"
)

// parallelMin is the smallest input run on two machines: below it the
// helper's start-up is not worth it. Each further machine needs regionMin
// more bytes.
const (
	parallelMin = 8 << 20
	regionMin   = parallelMin / 2
)

// maxMachines bounds the machines one decode runs on. Each helper costs
// memory of its own (its prefix, its table of the stacks it met, a chunk
// of each array partly filled) and a serial join on the main machine. Most
// of it is the stacks: a helper keeps every distinct stack of its region,
// so where stacks are distinct (the frame-pool shape) k machines keep
// most of them k times over. On the 16-core host, 8 machines decoded
// bigtrain, whose stacks repeat, in 0.26 s at 179 MiB against 0.33 s at
// 161 MiB with 4; the frame pool took as long with 8 as with 4 and its
// peak grew from 159 to 190 MiB. So a decode runs on up to
// repeatedMachines when a sample of the input shows its call stacks
// repeating (machinesFor), else on up to maxMachines (see
// docs/performance-log.md, second session).
const (
	maxMachines      = 4
	repeatedMachines = 8
)

// The sample machinesFor reads: sampleLen bytes at the middle of the
// input, which must hold sampleMinLists frame lists, at most one in
// sampleMaxDistinct of them distinct, for the stacks to count as
// repeating.
const (
	sampleLen         = 1 << 20
	sampleMinLists    = 64
	sampleMaxDistinct = 4
)

// machinesFor is the most machines that decode data: repeatedMachines when
// the frame lists (EMPTY_LIST, its put, MARK, memo gets, APPENDS: the lists
// frameList reads at once; PyTorch's C++ pickler writes no put) in a
// sample from its middle mostly repeat, byte for byte, else maxMachines. A
// false match of those bytes inside other data only blurs the estimate.
func machinesFor(data []byte) int {
	lo := max(0, len(data)/2-sampleLen/2)
	window := data[lo:min(len(data), lo+sampleLen)]
	seen := map[uint64]struct{}{}
	lists := 0
	for i := 0; i+3 < len(window); {
		k := bytes.IndexByte(window[i:], opEmptyList)
		if k < 0 {
			break
		}
		i += k + 1
		n := putSize(window, i)
		if i+n >= len(window) || window[i+n] != opMark {
			continue
		}
		i += n + 1
		if end, h := scanSpan(window, i, len(window)); end > 0 {
			lists++
			seen[h] = struct{}{}
			i = end
		}
	}
	if lists >= sampleMinLists && sampleMaxDistinct*len(seen) <= lists {
		return repeatedMachines
	}
	return maxMachines
}

// putSize is the size of the memo put at data[pos] (MEMOIZE, BINPUT or
// LONG_BINPUT with its index), 0 for any other opcode or one cut short: a
// list as pickle.dump begins it is EMPTY_LIST, its put, MARK.
func putSize(data []byte, pos int) int {
	if pos >= len(data) {
		return 0
	}
	n := 0
	switch data[pos] {
	case opMemoize:
		n = 1
	case opBinPut:
		n = 2
	case opLongBinPut:
		n = 5
	}
	if pos+n > len(data) {
		return 0
	}
	return n
}

// splitFunc says where a decode's helpers go in input of n bytes: the end of
// their common prefix and, in increasing order, where each one's region
// should start (the first batch boundary at or past it). No targets: one
// machine.
type splitFunc func(n int) (prefix int, targets []int)

// splitPlan says where a helper's prefix ends, where its region starts and
// where it must stop (the next helper's start, or the end of the input).
// In input without frames, prefix is where the prefix should end: the
// helper walks the opcodes to the first boundary past it (walk), so that
// the opcode there, the trace's first key (splitCores), is run.
type splitPlan struct {
	prefix, at, stop int
	walk             bool
	// inBatch says that the region starts inside a batch, among the items
	// between a MARK and its APPENDS (see regionStart).
	inBatch bool
}

// planSplit finds the prefix end (the first frame boundary at or after
// prefix) and the region start: the first MARK after an APPENDS at or after
// the first frame boundary past target. The region runs to the end. Input
// without frames (protocols 2 and 3) is planned by planUnframed. false when
// data is no pickle of protocol 2 to 5, or has no batch boundary there.
func planSplit(data []byte, prefix, target int) (splitPlan, bool) {
	return planSplitRead(data, nil, prefix, target)
}

// headerFunc reads the 9 bytes of the input at pos (an opcode and, for
// FRAME, its length) from elsewhere than its mapping; false when fewer
// are there.
type headerFunc func(pos int) (h [9]byte, ok bool)

// fileHeaders reads headers with readAt (a mapped file's ReadAt). Planning
// reads a frame header every 64 KiB up to the last region: through the
// mapping each one faults 16 pages in (fault-around), which are then given
// back (bigtrain: 7-10 ms to plan, 4-5 ms to give them back, before either
// machine starts).
func fileHeaders(readAt func([]byte, int64) (int, error)) headerFunc {
	return func(pos int) (h [9]byte, ok bool) {
		n, _ := readAt(h[:], int64(pos))
		return h, n == len(h)
	}
}

// planSplitRead is planSplit reading the frame headers it skips with
// header, when not nil, and every other opcode from data.
func planSplitRead(data []byte, header headerFunc, prefix, target int) (splitPlan, bool) {
	if len(data) < 11 || data[0] != opProto || data[1] < 2 || data[1] > 5 {
		return splitPlan{}, false
	}
	if !framed(data) {
		return planUnframed(data, prefix, target)
	}
	p := splitPlan{prefix: -1, stop: len(data)}
	pos := 2
	for pos < target {
		if pos >= prefix && p.prefix < 0 {
			p.prefix = pos
		}
		if header != nil {
			if h, ok := header(pos); ok && h[0] == opFrame {
				l := binary.LittleEndian.Uint64(h[1:])
				if l > uint64(len(data)-pos-9) {
					return splitPlan{}, false
				}
				pos += 9 + int(l)
				continue
			}
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

// framed reports whether data (a pickle of protocol 2 to 5) is cut in
// frames, as pickle.dump writes protocols 4 and 5.
func framed(data []byte) bool {
	return data[1] >= 4 && data[2] == opFrame
}

// planUnframed plans a helper in input without frames, where an opcode
// boundary is known only by running every opcode before it. The region
// starts at the first place at or past target that the bytes show
// (regionStart): a match that is no opcode boundary, or not in a list,
// costs only the helper's work, which the main machine, reaching no
// boundary there, then drops (see joinNext and join). The prefix's end
// is found by the helper, on its own core (walk).
func planUnframed(data []byte, prefix, target int) (splitPlan, bool) {
	at, inBatch, ok := regionStart(data[:min(len(data), target+batchSearchMax)], target)
	if !ok || prefix < 2 || prefix >= at {
		return splitPlan{}, false
	}
	return splitPlan{prefix: prefix, at: at, stop: len(data), walk: true, inBatch: inBatch}, true
}

// regionStart is where the first region at or past from may start in
// input without frames, whichever the bytes show first:
//   - a batch of dicts, as pickle.dump writes a list's batches of dicts in
//     any protocol: the MARK of APPENDS MARK EMPTY_DICT, followed by the
//     dict's put (MEMOIZE, BINPUT or LONG_BINPUT, with its index, within
//     data);
//   - a dict inside a batch (inBatch), as PyTorch's C++ pickler writes a
//     list, all of its items in one batch, and a dict without a put: the
//     EMPTY_DICT of SETITEMS EMPTY_DICT MARK, followed by a memo get (the
//     dict's first key, read again). The region starts inside the batch.
//
// The bytes may also lie inside a string or a number. pickle.dump puts
// every dict, so its lists never show the second form.
func regionStart(data []byte, from int) (at int, inBatch, ok bool) {
	for from < len(data) {
		i := bytes.IndexByte(data[from:], opEmptyDict)
		if i < 0 {
			return 0, false, false
		}
		i += from
		switch {
		case i-2 >= from && data[i-2] == opAppends && data[i-1] == opMark && putSize(data, i+1) > 0:
			return i - 1, false, true
		case i-1 >= from && data[i-1] == opSetItems && i+2 < len(data) && data[i+1] == opMark &&
			(data[i+2] == opBinGet || data[i+2] == opLongBinGet):
			return i, true, true
		}
		from = i + 1
	}
	return 0, false, false
}

// batchSearchMax is how far past its target planUnframed looks for a batch
// of dicts: a batch of 1000 trace entries, each with 60 frames written out
// in full, is about 2 MiB; input with none there (no trace or blocks past
// the target, one long string) is decoded on one machine, and its pages
// are not all read in a vain search.
const batchSearchMax = 16 << 20

// boundaryAfter is the first opcode boundary at or past min, walking
// opcodes from from (a boundary), that no put follows: a prefix that ends
// there holds the memo entry of its last value (the trace's first key,
// where splitCores puts the prefix's end). false when the walk meets an
// opcode it cannot size or the end of data.
func boundaryAfter(data []byte, from, min int) (int, bool) {
	pos := from
	for pos < len(data) && (pos < min || putSize(data, pos) > 0) {
		n, ok := opSize(data, pos)
		if !ok {
			return 0, false
		}
		pos += n
	}
	return pos, pos < len(data)
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

// splitEven places helpers in data, one machine per core, up to
// machinesFor(data) (see splitCores). Input that one machine decodes is not
// sampled. Input without a trace (segments alone) runs on one machine:
// each join copies a helper's block records and interns its stacks again,
// and on this project's VM two machines decoded 200k blocks with their
// frames (genTraces segsonly), or 300k without (nf300k), no faster than
// one, with 13-20 and 4 MiB more at the peak.
func splitEven(data []byte, drop func(from, to int)) splitFunc {
	machines := machinesOn(data, runtime.GOMAXPROCS(0))
	keys := -1
	if machines > 1 {
		keys = traceKeyAt(data, actionKeyIn(data), len(data)/2, keySearchStep, drop)
		if keys < 0 && !traceAfter(data, len(data)/2, drop) {
			machines = 1
		}
	}
	return func(n int) (prefix int, targets []int) {
		return splitCores(n, machines, keys)
	}
}

// traceKeyAt is where data first holds key, the "action" key of a trace
// entry as pickle.dump writes it (actionKeyIn), searched in data[:limit];
// -1 when it is not there. The same bytes inside a longer
// string only make the estimate early. It searches step bytes at a time
// and gives back (drop, when not nil) the pages of each step it searched
// in vain: a snapshot without a trace (segments alone) would otherwise
// hold half of its mapped file resident until the machine passed it.
func traceKeyAt(data, key []byte, limit, step int, drop func(from, to int)) int {
	limit = min(limit, len(data))
	for from := 0; from < limit; from += step {
		end := min(limit, from+step)
		// The key may begin in this step and end in the next.
		if i := bytes.Index(data[from:min(limit, end+len(key)-1)], key); i >= 0 {
			return from + i
		}
		if drop != nil {
			drop(from, end)
		}
	}
	return -1
}

// traceAfter says whether data holds a trace's first key past from (see
// traceKeyAt, which gives back the pages of each step searched in vain).
func traceAfter(data []byte, from int, drop func(from, to int)) bool {
	var dropRest func(lo, hi int)
	if drop != nil {
		dropRest = func(lo, hi int) { drop(from+lo, from+hi) }
	}
	return traceKeyAt(data[from:], actionKeyIn(data), len(data)-from, keySearchStep, dropRest) >= 0
}

// keySearchStep is how much of the input traceKeyAt searches before it
// gives the pages back.
const keySearchStep = 16 << 20

// The "action" key as protocols 4 and 5 write it (SHORT_BINUNICODE), and
// as 2 and 3 do (BINUNICODE).
var (
	actionKey     = []byte("\x8c\x06action")
	actionKeyLong = []byte("X\x06\x00\x00\x00action")
)

// actionKeyIn is the "action" key as data's protocol writes it.
func actionKeyIn(data []byte) []byte {
	if len(data) >= 2 && data[0] == opProto && data[1] < 4 {
		return actionKeyLong
	}
	return actionKey
}

// machinesOn is how many machines decode data on cores cores: one per
// core, up to machinesFor(data). The sample is read only where it can
// change the count, past maxMachines cores: on fewer it was 1-3 ms before
// either machine started.
func machinesOn(data []byte, cores int) int {
	switch {
	case len(data) < parallelMin:
		return 1
	case cores <= maxMachines:
		return cores
	}
	return min(cores, machinesFor(data))
}

// prefixCost is what a helper's byte of prefix costs, in bytes of region:
// the prefix is a snapshot's segments, whose blocks and first frames are
// dicts built one by one, and the helper then reads later frames as
// placeholders. Timed on this project's VM (bigtrain, the frame pools, 79
// MiB random frees), a prefix byte took 1.5x a region byte, and with
// prefixCost 1 helpers finished 5-16 ms after the main machine, which
// waited for them.
const prefixCost = 2

// Costs of a byte, in eighths of a byte of trace that a machine decodes,
// for walkedTargets: a byte of segments that the main machine decodes
// (dicts of blocks, built one by one), one of a helper's head (see
// prefixHead: it also meets every frame first), and one a helper walks.
// Timed on this project's VM (poollive: 20 MB of segments in 99 MB), 9.6,
// 15 and 2 ms a MB, where the trace took 5.5-7.
const (
	segmentCost8 = 12
	headCost8    = 8 * prefixCost
	walkCost8    = 3
)

// walkedTargets places k-1 helpers, each of which decodes the first 32nd
// of input of n bytes and walks on to the trace's keys at keys (see
// prefixHead), so that every machine runs as long: the main machine
// decodes the segments and the trace's start, each helper its prefix and
// a share of the trace after it. nil where the helpers do not walk, or a
// share would be under regionMin.
func walkedTargets(n, k, keys int) []int {
	head := n / 32
	if keys < walkPrefixMin*head {
		return nil
	}
	prefix8 := headCost8*head + walkCost8*(keys-head)
	w8 := (segmentCost8*keys + 8*(n-keys) + (k-1)*prefix8) / k
	first := (w8 - (segmentCost8-8)*keys) / 8
	step := (w8 - prefix8) / 8
	if first-keys < regionMin || step < regionMin {
		return nil
	}
	targets := make([]int, k-1)
	for i := range targets {
		targets[i] = first + i*step
	}
	return targets
}

// splitCores places helpers in input of n bytes so that each of k machines
// has as much to run: the main machine the start of the input, each helper
// the prefix (1/32 of the input) and its region, a byte of prefix counted
// as prefixCost. k is one per core (the caller bounds cores by
// machinesFor), and each needs regionMin bytes of input; input under
// parallelMin runs on one machine.
//
// keys is where the trace's keys are first written (traceKeyAt; -1 for
// none). A helper must have read them before its region (see runPrefix),
// and a snapshot's segments come before its trace: with tens of
// thousands of live blocks, each with its frames, they are a fifth of the
// input or more, past the usual prefix, and the helpers gave up (one
// machine decoded the 100 MiB random-frees shape with 47k live blocks).
// Then every machine runs the segments, the helpers as their prefix, and
// the trace after them is shared evenly; or, where the helpers walk most
// of them (walkedTargets), so that each machine runs as long.
func splitCores(n, cores, keys int) (prefix int, targets []int) {
	k := min(cores, n/regionMin)
	if n < parallelMin || k < 2 {
		return 0, nil
	}
	prefix = n / 32
	if keys > prefix {
		rest := n - keys
		if k = min(k, rest/regionMin); k < 2 {
			return 0, nil
		}
		if targets = walkedTargets(n, k, keys); targets != nil {
			return keys, targets
		}
		for i := 1; i < k; i++ {
			targets = append(targets, keys+i*rest/k)
		}
		return keys, targets
	}
	// w + (k-1)(w-prefixCost*prefix) = n: the main machine runs w bytes,
	// each helper the prefix, worth prefixCost*prefix, and
	// w-prefixCost*prefix. For two machines the region starts at
	// n/2 + n/32.
	w := (n + (k-1)*prefixCost*prefix) / k
	for i := range k - 1 {
		targets = append(targets, w+i*(w-prefixCost*prefix))
	}
	return prefix, targets
}
