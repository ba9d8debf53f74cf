package pickle

import (
	"fmt"
	"strconv"
	"unsafe"

	"memscope/internal/pages"
	"memscope/internal/par"

	"memscope/snapshot/schema"
)

// Binding the trace entries, annotations and settings (call stacks:
// bind_stack.go).

func (b *binder) traces(v val, path string) ([][]schema.TraceEntry, error) {
	devs, err := b.list(v, path)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, dv := range devs {
		if dv.k == kList || dv.k == kTuple {
			total += int(b.g.cont(dv.ref).n)
		}
	}
	if err := b.spend(total, path); err != nil {
		return nil, err
	}
	if len(devs) > 1<<16 {
		return nil, errAt(path, "%d devices is not plausible", len(devs))
	}
	out := make([][]schema.TraceEntry, len(devs))
	for d, dv := range devs {
		dpath := path + "[" + strconv.Itoa(d) + "]"
		if dv.k == kList && b.g.cont(dv.ref).kind == cTraceList {
			t, err := b.traceList(b.g.cont(dv.ref), dpath, b.lastTraces && d == len(devs)-1, b.takeTyped(dv.ref))
			if err != nil {
				return nil, err
			}
			out[d] = t
			continue
		}
		items, err := b.list(dv, dpath)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			continue
		}
		t := make([]schema.TraceEntry, len(items)) // no pointers: see traceList
		for i, it := range items {
			if err := b.traceEntry(it, &t[i], dpath, i); err != nil {
				return nil, err
			}
		}
		out[d] = t
	}
	return out, nil
}

// traceList binds a list of trace records (cTraceList) from the records,
// without a val per entry. With last (the list is the last reader of the
// records), each chunk of records is given back once passed, so the typed
// trace fills memory the records leave: a real trace's peak no longer holds
// both.
func (b *binder) traceList(c *container, dpath string, last bool, t []schema.TraceEntry) ([]schema.TraceEntry, error) {
	if c.n == 0 {
		return nil, nil
	}
	// Entries hold no pointers, so the collector neither scans them nor
	// puts a write barrier on their stores: their pages are left for the
	// binder to touch as it fills them (freshSlice's reason does not
	// apply), while the records it has read are given back.
	if len(t) != int(c.n) {
		t = make([]schema.TraceEntry, c.n)
	}
	// The records are bound on every core, each worker whole chunks of
	// them (it gives back its own); the few that need the binder's maps
	// (a generic dict, a list read while binding, an unknown action) are copied aside and bound here after, in order, so errors
	// and warnings are those of one pass (bigtrain: 52 ms on one core).
	for x := range b.g.extras {
		b.rawExtra(uint32(x) + 1) // bindQuick reads them
	}
	// Which stacks have frames, one bit each: the workers read it for
	// each record, where the typed stacks (32 bytes each, 6 MB for 187k
	// distinct stacks) missed the cache.
	framed := make([]uint64, (len(b.stacks)+63)/64)
	for id := range b.stacks {
		if b.stacks[id].Len() != 0 {
			framed[id/64] |= 1 << (id % 64)
		}
	}
	parts := b.traceParts(c.start, c.n)
	var wg par.Group
	for w := range parts {
		wg.Go(func() { parts[w].bindQuick(b, c.start, t, last, framed) })
	}
	wg.Wait()
	for w := range parts {
		for _, l := range parts[w].later {
			i := int(l.i)
			var err error
			if l.r.has()&hasGeneric != 0 {
				err = b.traceEntry(val{k: kDict, ref: l.r.cid}, &t[i], dpath, i)
			} else {
				err = b.rawTraceEntry(&l.r, &t[i], dpath, i)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

// tracePart is one worker's share of a run of records: [lo, hi) of it,
// and the records it left to the binder.
type tracePart struct {
	lo, hi uint32
	later  []laterTrace
}

// laterTrace is a record, by its index in the run, that the binder binds
// itself (a copy: the worker may have given the record's chunk back).
type laterTrace struct {
	i uint32
	r rawTrace
}

// traceParts splits n records from start among the binder's workers at
// chunk boundaries of the graph's records, so that each chunk is read and
// given back by one worker; each share is a chunk's length or more.
func (b *binder) traceParts(start, n uint32) []tracePart {
	workers := max(1, min(b.workers, int(n>>chunkBits)))
	parts := make([]tracePart, workers)
	lo := uint32(0)
	for w := range workers {
		hi := n
		if w < workers-1 {
			// Where the chunk holding its share's end begins: a share is
			// a chunk or more, so that is past the last worker's.
			hi = (start+n/uint32(workers)*uint32(w+1))&^chunkMask - start
		}
		parts[w] = tracePart{lo: lo, hi: hi}
		lo = hi
	}
	return parts
}

// bindQuick binds the part's records that need nothing but the record and
// the graph's read-only tables, and copies the others aside.
func (p *tracePart) bindQuick(b *binder, start uint32, t []schema.TraceEntry, last bool, framed []uint64) {
	actions := actionCache{more: map[uint32]schema.Action{}}
	// The chunks of records read are moved under the entries still to
	// write (a record is 40 bytes, an entry 32: the supply outlasts the
	// part, and Release gives back the rest): only the first chunk's
	// entries take fresh pages.
	var sup pages.Supply
	defer sup.Release()
	for i := p.lo; i < p.hi; i++ {
		if (i-p.lo)%populateStep == 0 {
			next := t[i:min(i+populateStep, p.hi)]
			pages.Cover(&sup, next)
			pages.Populate(next)
		}
		idx := start + i
		r := b.g.traces.at(idx)
		if !b.quickTrace(r, &t[i], &actions, framed) {
			p.later = append(p.later, laterTrace{i: i, r: *r})
			t[i] = schema.TraceEntry{} // covered pages hold old bytes
		}
		if last && (idx+1)&chunkMask == 0 {
			b.g.traces.giveChunk(int(idx>>chunkBits), &sup)
			sup.Trim(uintptr(p.hi-i-1) * unsafe.Sizeof(schema.TraceEntry{}))
		}
	}
}

// populateStep is how many typed entries (768 KiB) a worker maps at once
// ahead of filling them, instead of a fault per page (perf put an eighth
// of the frame pool's page faults in quickTrace); a step this small keeps
// what is mapped ahead of the records given back under a MiB (the whole
// array at once added 14 MiB to the peak).
const populateStep = 1 << 14

// actionCache is a worker's parsed actions by string id: the first
// actionSmall ids in an array (an action's string is among the first a
// snapshot interns), the others in a map. A map lookup per record was a
// tenth of the bind.
type actionCache struct {
	small [actionSmall]uint8 // 1 + the action; 0: not parsed yet
	more  map[uint32]schema.Action
}

const actionSmall = 256

// of returns the action string id s names (strs holds the strings).
func (c *actionCache) of(s uint32, strs []string) schema.Action {
	if s < actionSmall {
		if a := c.small[s]; a != 0 {
			return schema.Action(a - 1)
		}
		a, _ := schema.ParseAction(strs[s])
		c.small[s] = uint8(a) + 1
		return a
	}
	a, seen := c.more[s]
	if !seen {
		a, _ = schema.ParseAction(strs[s])
		c.more[s] = a
	}
	return a
}

// quickTrace binds r into e when it needs only reads (see bindQuick), as
// rawTraceEntry would, and says whether it did. actions caches the
// worker's parsed actions; framed has a bit set for each of b.stacks that
// has frames.
func (b *binder) quickTrace(r *rawTrace, e *schema.TraceEntry, actions *actionCache, framed []uint64) bool {
	if r.has()&hasGeneric != 0 {
		return false
	}
	a := actions.of(r.action, b.g.strs)
	if a == schema.ActionOther {
		return false // the binder warns
	}
	var stack uint32
	if r.fram != noRef {
		id := r.fram
		if r.has()&hasFramesStack == 0 {
			c := b.g.cont(r.fram)
			if c.kind != cStack {
				return false
			}
			id = c.start
		}
		if int(id) >= len(b.stacks) || framed[id/64]&(1<<(id%64)) == 0 {
			return false
		}
		stack = id + 1
	}
	var extra uint32
	if x := r.extra(); x != 0 {
		extra = b.extraOfRaw[x-1]
	}
	*e = schema.TraceEntry{Addr: r.addr, Size: r.size, TimeUS: r.time, Stack: stack}.With(a).WithExtra(extra)
	return true
}

// takeTyped returns (once) the trace allocated for container cid, or nil.
func (b *binder) takeTyped(cid uint32) []schema.TraceEntry {
	t := b.typed[cid]
	delete(b.typed, cid)
	return t
}

// traceArrays allocates the typed trace of each run of trace records
// (cTraceList) under root's device traces, by the run's container, from
// the room the last join reserved (reserveTyped) while it lasts. It is
// called before the collection that frees the decoder's garbage: an array
// of a million entries placed over freed pages is cleared at once, all of
// its pages touched while the records are still held (bigtrain's peak
// went up 47 MiB), where fresh pages are touched only as the binder fills
// them and gives the records back.
func traceArrays(g *graph, root val) map[uint32][]schema.TraceEntry {
	if root.k != kDict {
		return nil
	}
	out := map[uint32][]schema.TraceEntry{}
	kv := g.seq(root)
	for i := 0; i+1 < len(kv); i += 2 {
		if k := kv[i]; k.k != kStr || (g.roles[k.ref] != keyDeviceTraces && g.roles[k.ref] != keyTraces) {
			continue
		}
		if v := kv[i+1]; v.k == kList {
			for _, dv := range g.seq(v) {
				if dv.k != kList || out[dv.ref] != nil {
					continue
				}
				if c := g.cont(dv.ref); c.kind == cTraceList && c.n > 0 {
					if int(c.n) <= len(g.typed) {
						out[dv.ref], g.typed = g.typed[:c.n:c.n], g.typed[c.n:]
						continue
					}
					t := make([]schema.TraceEntry, c.n)
					pages.Huge(t) // written once, in full, by the bind
					out[dv.ref] = t
				}
			}
		}
	}
	return out
}

func (b *binder) traceEntry(v val, e *schema.TraceEntry, dpath string, i int) error {
	if v = b.g.traceDictOf(v); v.k == kTrace {
		return b.rawTraceEntry(b.g.traces.at(v.ref), e, dpath, i)
	}
	if v.k == kDict && b.g.cont(v.ref).kind == cTrace {
		return b.rawTraceEntry(b.g.traces.at(b.g.cont(v.ref).start), e, dpath, i)
	}
	// A block record reads as its dict (blockPairs), as the generic
	// form of a block-shaped dict in a trace would.
	if v = b.g.blockDictOf(v); v.k != kBlock && (v.k != kDict || b.g.cont(v.ref).kind != cGeneric) {
		_, err := b.pairs(v, fmt.Sprintf("%s[%d]", dpath, i))
		if err == nil {
			err = errAt(fmt.Sprintf("%s[%d]", dpath, i), "expected a trace entry dict")
		}
		return err
	}
	kv := b.g.seq(v)
	var extra schema.TraceExtra
	defer func() { e.SetExtra(b.extra(extra)) }()
	for j := 0; j < len(kv); j += 2 {
		k, x := kv[j], kv[j+1]
		var err error
		switch b.keyRole(k) {
		case keyAction:
			if x.k != kStr {
				err = fmt.Errorf("expected a string, found %s", x.k)
				break
			}
			a, ok := schema.ParseAction(b.str(x))
			e.SetAction(a)
			if !ok {
				b.warn(fmt.Sprintf("unknown trace action %q (kept)", b.str(x)))
			}
		case keyAddr:
			e.Addr, err = b.addr(x, "")
		case keySize:
			e.Size, err = b.size(x, "")
		case keyStream:
			extra.Stream, err = b.addr(x, "")
		case keyTimeUS:
			e.TimeUS, err = b.integer(x, "")
		case keyFrames:
			e.Stack, err = b.stackRef(x, "")
		case keyDeviceFree:
			extra.DeviceFree, err = b.integer(x, "")
		case keyCompileContext:
			if x.k == kStr {
				extra.CompileContext = b.str(x)
			}
		case keyUserMetadata:
			if x.k == kStr {
				extra.UserMetadata = b.str(x)
			}
		case keyPoolID, keyForwardFrames, keyDevice:
			// Known, not used by the analysis.
		default:
			b.warn(fmt.Sprintf("unknown trace entry key %q", b.keyName(k)))
		}
		if err != nil {
			// Field helpers were given no path (building one per field
			// costs more than decoding it); name the field here.
			msg := err.Error()
			if be, ok := err.(*bindError); ok {
				msg = be.msg
			}
			return errAt(fmt.Sprintf("%s[%d].%s", dpath, i, b.keyName(k)), "%s", msg)
		}
	}
	return nil
}

// action parses an action string once per distinct string: a trace has
// millions of entries but a handful of actions.
func (b *binder) action(id uint32) schema.Action {
	a, seen := b.actions[id]
	if !seen {
		a, _ = schema.ParseAction(b.g.strs[id]) // ActionOther when unknown
		if b.actions == nil {
			b.actions = map[uint32]schema.Action{}
		}
		b.actions[id] = a
	}
	if a == schema.ActionOther {
		b.warn(fmt.Sprintf("unknown trace action %q (kept)", b.g.strs[id])) // counted per entry
	}
	return a
}

// rawTraceEntry binds a trace entry recognised while decoding.
func (b *binder) rawTraceEntry(r *rawTrace, e *schema.TraceEntry, dpath string, i int) error {
	e.SetAction(b.action(r.action))
	e.Addr, e.Size, e.TimeUS = r.addr, r.size, r.time
	if x := r.extra(); x != 0 {
		e.SetExtra(b.rawExtra(x))
	}
	if r.fram != noRef {
		if r.has()&hasFramesStack != 0 {
			e.Stack = b.entryStack(r.fram)
			return nil
		}
		if c := b.g.cont(r.fram); c.kind == cStack {
			e.Stack = b.entryStack(c.start)
			return nil
		}
		// Only a list that is not plain frames can fail; its path is
		// built here rather than for each of a million entries.
		ref, err := b.stackRef(val{k: kList, ref: r.fram}, fmt.Sprintf("%s[%d].frames", dpath, i))
		if err != nil {
			return err
		}
		e.Stack = ref
	}
	return nil
}

// rawExtra returns the TraceExtra of the graph's extra id (see
// rawTrace.extra), made once per id: a million entries that share one
// compile_context share one id.
func (b *binder) rawExtra(id uint32) uint32 {
	if b.extraOfRaw == nil {
		b.extraOfRaw = make([]uint32, len(b.g.extras))
	}
	if e := b.extraOfRaw[id-1]; e != 0 {
		return e
	}
	r := b.g.extras[id-1]
	x := schema.TraceExtra{Stream: r.stream, DeviceFree: r.devFree}
	if r.cc != noRef {
		x.CompileContext = b.g.strs[r.cc]
	}
	if r.um != noRef {
		x.UserMetadata = b.g.strs[r.um]
	}
	e := b.extra(x)
	b.extraOfRaw[id-1] = e
	return e
}

// maxExtras is the most TraceExtras a snapshot holds: an entry's index
// has 24 bits (schema.MaxTraceExtras); tests set fewer (extrasMax).
func (b *binder) maxExtras() int {
	if b.extrasMax > 0 {
		return b.extrasMax
	}
	return schema.MaxTraceExtras
}

// extra interns x in the snapshot's TraceExtras and returns its
// TraceEntry.Extra (0 for none).
func (b *binder) extra(x schema.TraceExtra) uint32 {
	if x == (schema.TraceExtra{}) {
		return 0
	}
	if id, ok := b.extraByValue[x]; ok {
		return id
	}
	if len(b.extras) >= b.maxExtras() {
		b.warn(fmt.Sprintf("more than %d distinct stream, device_free, compile_context and user_metadata values in the trace: the rest are dropped", b.maxExtras()))
		return 0
	}
	if b.extraByValue == nil {
		b.extraByValue = map[schema.TraceExtra]uint32{}
	}
	b.extras = append(b.extras, x)
	id := uint32(len(b.extras))
	b.extraByValue[x] = id
	return id
}
