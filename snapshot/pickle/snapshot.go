// Package pickle decodes allocator snapshots into package schema's types:
// a restricted pickle machine (pickle.go, opcodes.go, slowops.go, memo.go)
// that runs only the data opcodes of protocols 2-5, never code, within a
// budget of memo slots, containers and bytes bounded by the input, and
// builds a compact value graph (graph.go) in which the bulk of a snapshot
// (frames, stacks, trace entries) is recognised while decoding
// (recognise.go), much of it straight from the bytes (fastpath.go,
// fastentry.go). Input of 8 MiB or more is run by two machines on two
// cores, the second from a batch boundary of the trace list onwards
// (helper.go, join.go, joinstacks.go, scan.go).
// A binder (bind.go, bind_trace.go) then turns the graph into typed structs.
// The JSON form of a snapshot is read into the same graph (jsonsnap.go).
package pickle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"

	"memscope/snapshot/schema"
)

// ErrNotSnapshot is returned for data that is none of the snapshot forms.
var ErrNotSnapshot = errors.New("not an allocator snapshot")

// GCThreshold is the input size above which decoding collects garbage
// twice: before binding (the input when it was read into the heap, the
// decoder's memo and stack, the helper's graph) and after (the graph), so
// that the typed snapshot and then the analysis reuse that memory instead
// of adding to it. Each collection costs a few milliseconds (the graph's
// arrays hold no pointers); together they took bigtrain's report from 329
// to 264 MiB peak RSS, at the same speed. From 32 MiB rather than 64: w8
// (40 MB) peaked at 98 MiB, not 106, livepool (55 MB) at 75, not 82, and
// --ranges 60 (34 MB) at 75, not 80, in the same time or less; from 8 MiB
// the files of 11 and 15 MB gained nothing.
const GCThreshold = 32 << 20

// IsPickle reports whether data starts as a snapshot pickle does (PROTO).
func IsPickle(data []byte) bool { return len(data) > 0 && data[0] == opProto }

// DecodeSnapshot decodes a snapshot pickle and binds it to the schema. It
// takes the input by pointer and clears it, so the input can be collected
// while the snapshot is built (see GCThreshold). progress gets 0..1 while
// decoding; ctx cancels within a few thousand opcodes.
func DecodeSnapshot(ctx context.Context, in *[]byte, progress func(float64)) (*schema.Snapshot, error) {
	// After decoding nothing may keep the input alive, so the collector can
	// reclaim it (a file's worth of memory) while the binder builds the
	// typed snapshot: it is cleared where it came from (see decode).
	return decodeSnapshot(ctx, in, nil, nil, nil, progress)
}

// DecodeMapped is DecodeSnapshot for input that is not on the Go heap (a
// memory-mapped file): release is called once the pickle machine is done
// with it, before binding, and nothing decoded refers to it. drop, when not
// nil, is called while decoding (from either machine's goroutine) with
// byte ranges [from, to) the machines have read past, which the caller may
// give back; they need not be page-aligned. readAt, when not nil, reads
// the same bytes as data without the mapping (the file's ReadAt), for the
// few scattered reads that would otherwise fault pages in.
func DecodeMapped(ctx context.Context, data []byte, release func(), drop func(from, to int), readAt func([]byte, int64) (int, error), progress func(float64)) (*schema.Snapshot, error) {
	return decodeSnapshot(ctx, &data, release, drop, readAt, progress)
}

// bindGraph binds a decoded graph and frees it: it is garbage once this
// returns, and its trace records, off the heap, are given back at once
// (the binder gives back each chunk of them it has read when nothing will
// read it again).
func bindGraph(g *graph, root val, size int) (*schema.Snapshot, error) {
	return bindGraphInto(g, root, size, nil)
}

// bindGraphInto is bindGraph with typed traces allocated beforehand (see
// traceArrays).
func bindGraphInto(g *graph, root val, size int, typed map[uint32][]schema.TraceEntry) (*schema.Snapshot, error) {
	defer g.free()
	b := newBinder(g, size)
	b.consume = true
	b.typed = typed
	return b.bindRoot(root)
}

// decodeSnapshot takes the input by pointer and clears it, for the reason
// decode in package snapshot does: an argument slot would keep it alive.
func decodeSnapshot(ctx context.Context, in *[]byte, release func(), drop func(from, to int), readAt func([]byte, int64) (int, error), progress func(float64)) (*schema.Snapshot, error) {
	data := *in
	*in = nil
	size := len(data)
	var opts []func(*decoder)
	if readAt != nil {
		opts = append(opts, func(d *decoder) { d.headers = fileHeaders(readAt) })
	}
	g, root, err := decodePickleCtx(ctx, data, progress, drop, &offHeapPool{}, opts...)
	data = nil
	if release != nil {
		release()
	}
	if err != nil {
		return nil, err
	}
	return bindDecoded(g, root, size)
}

// collectAfter reports whether binding what was decoded from size bytes
// of input collects garbage after (see GCThreshold; before, only for input
// over it): for input over GCThreshold, or when the decode and the bind
// allocated more than heapGCMin (allocated: see heapAllocs), most of which
// they leave behind (the memo, the stack table's old arrays, a helper's
// tables, generic containers). A snapshot of blocks alone holds several
// times its input there: 300k blocks in 11 MB left 53 MB, which stayed
// under the analysis (143 -> 110 MiB peak, at the same speed; a collection
// before binding too cost 10 ms and kept 19 MiB of it). Counting the
// graph's generic containers alone missed it once blocks became records
// (200k blocks with their frames: 134 -> 152 MiB), and so did counting the
// heap's growth since the last collection, in the runs where the
// collector had just run in the bind (111 or 139 MiB by the run).
func collectAfter(size int, allocated uint64) bool {
	return size > GCThreshold || allocated > heapGCMin
}

// heapGCMin is what a decode and its bind allocate from which binding
// collects after (collectAfter).
const heapGCMin = 16 << 20

// heapAllocs is how many bytes the program has allocated on the heap so
// far (freed or not).
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return math.MaxUint64 // unknown: collect
	}
	return s[0].Value.Uint64()
}

// bindDecoded binds what a machine decoded from size bytes of input.
func bindDecoded(g *graph, root val, size int) (*schema.Snapshot, error) {
	var typed map[uint32][]schema.TraceEntry
	if size > GCThreshold {
		// The input (when read into the heap) and the decoder's memo,
		// stack and helper are garbage now: reclaim them before the
		// binder allocates the typed snapshot. Its traces are allocated
		// first: see traceArrays.
		typed = traceArrays(g, root)
		runtime.GC()
	}
	proto := g.proto
	s, err := bindGraphInto(g, root, size, typed)
	if err != nil {
		return nil, err
	}
	if collectAfter(size, heapAllocs()-g.allocs0) {
		// And the graph after binding, before the analysis allocates
		// its replay: with report's slow collector pace (cmd_report.go)
		// nothing else would reclaim either, and both together were a
		// fifth of bigtrain's peak RSS. Each costs a few milliseconds:
		// the graph's arrays hold no pointers. Giving the freed pages
		// back as well (FreeOSMemory) once lowered the peak of a trace of
		// 187k distinct stacks by 15 MiB; with the records given back as
		// they are bound, it no longer changes the peak (five files, the
		// 217 MiB pool, bigtrain and three frame pools, reports and the
		// explorer alike) and cost 3-4 ms more on one core.
		runtime.GC()
	}
	s.Format = fmt.Sprintf("pickle protocol %d", proto)
	return s, nil
}
