package pickle

// Binding a snapshot's segments and their blocks: the part of the bind a
// snapshot of hundreds of thousands of live blocks spends its time in.

import (
	"fmt"
	"strconv"

	"memscope/internal/par"
	"memscope/snapshot/schema"
)

func (b *binder) segments(v val, path string) ([]schema.Segment, error) {
	items, err := b.list(v, path)
	if err != nil {
		return nil, err
	}
	if err := b.spend(len(items), path); err != nil {
		return nil, err
	}
	segs := make([]schema.Segment, len(items))
	// The segments' own keys are bound in order, their blocks a run of
	// segments at a time (segmentBlocks): before a segment whose frames
	// the binder interns, so that stacks are numbered as one by one.
	var run []segmentBlocks
	flush := func() error {
		err := b.blocksOf(segs, run, path)
		run = run[:0]
		return err
	}
	for i, it := range items {
		if b.internsFrames(it) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		blocks, err := b.segment(it, &segs[i])
		if err != nil {
			if err := flush(); err != nil {
				return nil, err // an earlier segment's block comes first
			}
			return nil, under(path+"["+strconv.Itoa(i)+"]", err)
		}
		if len(blocks) > 0 {
			run = append(run, segmentBlocks{seg: i, items: blocks})
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return segs, nil
}

// segmentBlocks is a segment's block dicts, to bind into its Blocks.
type segmentBlocks struct {
	seg   int
	items []val
}

// internsFrames reports whether binding segment dict v interns a stack:
// frames that are a list the decoder did not intern.
func (b *binder) internsFrames(v val) bool {
	if v = b.g.blockDictOf(v); v.k != kBlock && (v.k != kDict || b.g.cont(v.ref).kind != cGeneric) {
		return false
	}
	kv := b.g.seq(v)
	for i := 0; i+1 < len(kv); i += 2 {
		if b.keyRole(kv[i]) == keyFrames {
			if x := kv[i+1]; (x.k == kList || x.k == kTuple) && b.g.cont(x.ref).n > 0 && b.g.cont(x.ref).kind != cStack {
				return true
			}
		}
	}
	return false
}

// blocksOf binds the blocks of run's segments (their keys bound): those
// that need only reads (quickBlock) on every core, quickBlocksMin blocks
// at least each, then the others in order, as block binds them, each
// address defaulting to the end of the block before.
func (b *binder) blocksOf(segs []schema.Segment, run []segmentBlocks, path string) error {
	total := 0
	for _, r := range run {
		total += len(r.items)
	}
	var done []bool // by block of the run, in order: bound by quickBlock
	if workers := min(b.workers, total/quickBlocksMin); workers > 1 {
		done = make([]bool, total)
		from := make([]int, len(run)+1) // each segment's first block in done
		for k, r := range run {
			from[k+1] = from[k] + len(r.items)
		}
		par.Each(workers, func(w int) {
			// Whole segments, about total/workers blocks each.
			lo, hi := w*total/workers, (w+1)*total/workers
			for k, r := range run {
				if from[k] < lo || from[k] >= hi {
					continue
				}
				s := &segs[r.seg]
				for i, it := range r.items {
					done[from[k]+i] = b.quickBlock(it, &s.Blocks[i])
				}
			}
		})
	}
	at := 0
	for _, r := range run {
		s := &segs[r.seg]
		next := s.Address
		var covered int64
		for i, it := range r.items {
			bl := &s.Blocks[i]
			if done == nil || !done[at+i] {
				*bl = schema.Block{}
				if err := b.block(it, bl, next); err != nil {
					return under(path+"["+strconv.Itoa(r.seg)+"].blocks["+strconv.Itoa(i)+"]", err)
				}
			}
			next = bl.Address + uint64(bl.Size)
			covered += bl.Size
		}
		at += len(r.items)
		if covered != s.TotalSize {
			b.warn("segment blocks do not tile the segment (block sizes sum differs from total_size)")
		}
	}
	return nil
}

// quickBlocksMin is the fewest blocks worth a goroutine of their own.
const quickBlocksMin = 1 << 13

// quickBlock binds block dict v into bl as block does, when that needs
// only reads: its own address, sizes, a known state, frames that are None,
// an empty list or a stack interned while decoding, and no other key;
// false otherwise (block then binds it, warns or fails).
func (b *binder) quickBlock(v val, bl *schema.Block) bool {
	ok, err := b.bindBlock(v, bl, 0, true)
	return ok && err == nil
}

// segment binds a segment dict's keys and returns its block dicts, for
// which it made room in s.Blocks. Its errors' paths are relative to the
// segment, as block's are: built for every key of every segment, the
// paths were 13 ms of the bind of 31k segments.
func (b *binder) segment(v val, s *schema.Segment) ([]val, error) {
	kv, err := b.pairs(v, "")
	if err != nil {
		return nil, err
	}
	var blocks val
	haveBlocks := false
	for i := 0; i < len(kv); i += 2 {
		k, x := kv[i], kv[i+1]
		var err error
		switch b.keyRole(k) {
		case keyDevice:
			var d int64
			d, err = b.integer(x, ".device")
			if err == nil && (d < 0 || d > 1<<16) {
				err = errAt(".device", "device ordinal %d out of range", d)
			}
			s.Device = int(d)
		case keyAddress:
			s.Address, err = b.addr(x, ".address")
		case keyTotalSize:
			s.TotalSize, err = b.size(x, ".total_size")
		case keyAllocatedSize:
			s.AllocatedSize, err = b.size(x, ".allocated_size")
		case keyActiveSize:
			s.ActiveSize, err = b.size(x, ".active_size")
		case keyRequestedSize:
			s.RequestedSize, err = b.size(x, ".requested_size")
		case keyStream:
			s.Stream, err = b.addr(x, ".stream")
		case keySegmentType:
			s.Type, err = b.text(x, ".segment_type")
		case keySegmentPoolID:
			s.PoolID, err = b.poolID(x, ".segment_pool_id")
		case keyIsExpandable:
			s.Expandable = b.boolean(x)
		case keyFrames:
			s.Frames, err = b.stack(x, ".frames")
		case keyBlocks:
			blocks, haveBlocks = x, true
		default:
			b.warn(fmt.Sprintf("unknown segment key %q", b.keyName(k)))
		}
		if err != nil {
			return nil, err
		}
	}
	if !haveBlocks {
		return nil, nil
	}
	items, err := b.list(blocks, ".blocks")
	if err != nil {
		return nil, err
	}
	if err := b.spend(len(items), ".blocks"); err != nil {
		return nil, err
	}
	s.Blocks = b.newBlocks(len(items))
	return items, nil
}

// newBlocks is a segment's n blocks, cut from a slab of blockSlab blocks
// shared by segments of fewer: made one by one, the 9k small arrays of
// 300k blocks were 7 ms of their bind.
func (b *binder) newBlocks(n int) []schema.Block {
	if n >= blockSlab {
		return make([]schema.Block, n)
	}
	if n > len(b.blockSlab) {
		b.blockSlab = make([]schema.Block, blockSlab)
	}
	out := b.blockSlab[:n:n]
	b.blockSlab = b.blockSlab[n:]
	return out
}

// blockSlab is how many blocks newBlocks cuts from one array.
const blockSlab = 4096

func (b *binder) poolID(v val, path string) ([2]int64, error) {
	var id [2]int64
	items, err := b.list(v, path)
	if err != nil {
		return id, err
	}
	for i := 0; i < len(items) && i < 2; i++ {
		x := items[i]
		if x.k == kUint {
			id[i] = x.i
			continue
		}
		n, err := b.integer(x, path)
		if err != nil {
			return id, err
		}
		id[i] = n
	}
	return id, nil
}

// block binds a block dict. Its errors' paths are relative to the block
// (".size"): the caller prefixes its own (under) when one fails. Built
// for every field of every block, "segments[3].blocks[120].size" and the
// like were most of the bind of a snapshot of 300k live blocks (75 ms of
// string concatenation), for errors that almost never come.
func (b *binder) block(v val, bl *schema.Block, defaultAddr uint64) error {
	_, err := b.bindBlock(v, bl, defaultAddr, false)
	return err
}

// bindBlock is block, or with quick set quickBlock: it then writes
// nothing but bl, and says false (with bl partly written) where block
// would warn, intern frames, default the address or read the history.
func (b *binder) bindBlock(v val, bl *schema.Block, defaultAddr uint64, quick bool) (bool, error) {
	if v = b.g.blockDictOf(v); v.k == kBlock {
		return b.recordBlock(b.g.blocks.at(v.ref), bl, quick)
	}
	if quick && (v.k != kDict || b.g.cont(v.ref).kind != cGeneric) {
		return false, nil
	}
	kv, err := b.pairs(v, "")
	if err != nil {
		return false, err
	}
	haveAddr, haveReq, haveFrames := false, false, false
	var history val
	haveHistory := false
	for i := 0; i < len(kv); i += 2 {
		k, x := kv[i], kv[i+1]
		var err error
		switch b.keyRole(k) {
		case keyAddress:
			bl.Address, err = b.addr(x, ".address")
			haveAddr = true
		case keySize:
			bl.Size, err = b.size(x, ".size")
		case keyRequestedSize:
			bl.RequestedSize, err = b.size(x, ".requested_size")
			haveReq = true
		case keyState:
			var st string
			st, err = b.text(x, ".state")
			var ok bool
			bl.State, ok = schema.ParseState(st)
			if !ok && err == nil {
				if quick {
					return false, nil
				}
				b.warn(fmt.Sprintf("unknown block state %q (kept, counted as neither active nor free)", st))
			}
		case keyFrames:
			if quick {
				var ok bool
				if bl.Stack, ok = b.internedStack(x); !ok {
					return false, nil
				}
			} else {
				bl.Stack, err = b.stackRef(x, ".frames")
			}
			haveFrames = true
		case keyHistory:
			if quick {
				return false, nil
			}
			history, haveHistory = x, true
		default:
			if quick {
				return false, nil
			}
			b.warn(fmt.Sprintf("unknown block key %q", b.keyName(k)))
		}
		if err != nil {
			return false, err
		}
	}
	if !haveAddr {
		if quick {
			return false, nil
		}
		bl.Address = defaultAddr
	}
	if haveHistory && (!haveReq || !haveFrames) {
		// torch ~2.0: requested size and frames live in history[0].
		items, err := b.list(history, ".history")
		if err != nil {
			return false, err
		}
		if len(items) > 0 {
			hkv, err := b.pairs(items[0], ".history[0]")
			if err != nil {
				return false, err
			}
			for i := 0; i < len(hkv); i += 2 {
				switch b.keyRole(hkv[i]) {
				case keyRealSize:
					if !haveReq {
						if bl.RequestedSize, err = b.size(hkv[i+1], ".history[0].real_size"); err != nil {
							return false, err
						}
					}
				case keyFrames:
					if !haveFrames {
						if bl.Stack, err = b.stackRef(hkv[i+1], ".history[0].frames"); err != nil {
							return false, err
						}
					}
				}
			}
		}
	}
	if !haveReq && !haveHistory && bl.State.Active() {
		bl.RequestedSize = bl.Size
	}
	return true, nil
}

// recordBlock is bindBlock for a block record: what the generic form's
// keys would give, read from the record (blockRecord let through only
// keys and values bindBlock takes without a warning; the address is
// always there).
func (b *binder) recordBlock(r *rawBlock, bl *schema.Block, quick bool) (bool, error) {
	bl.Address, bl.Size, bl.State = r.addr, r.size, r.state
	switch {
	case r.has&blkReq != 0:
		bl.RequestedSize = r.req
	case bl.State.Active():
		bl.RequestedSize = bl.Size
	}
	if r.has&blkFrames == 0 {
		return true, nil
	}
	if quick {
		var ok bool
		bl.Stack, ok = b.internedStack(r.frames())
		return ok, nil
	}
	var err error
	bl.Stack, err = b.stackRef(r.frames(), ".frames")
	return err == nil, err
}

// internedStack is stackRef for frames that are None, an empty list or a
// stack interned and typed while decoding, reading only; false for others.
func (b *binder) internedStack(x val) (uint32, bool) {
	id := uint32(0)
	switch x.k {
	case kNone:
		return 0, true
	case kStack:
		id = x.ref
	case kList, kTuple:
		c := b.g.cont(x.ref)
		if c.n == 0 {
			return 0, true
		}
		if c.kind != cStack {
			return 0, false // the binder interns it
		}
		id = c.start
	default:
		return 0, false
	}
	if int(id) >= len(b.stacks) || b.stacks[id].Len() == 0 {
		return 0, false
	}
	return id + 1, true
}
