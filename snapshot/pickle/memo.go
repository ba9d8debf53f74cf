package pickle

// The memo: what MEMOIZE and the PUT opcodes store and the GET opcodes
// read, as compact references to values (memoRef).

// The memo holds one uint32 per entry: 0 for a hole; for a container, its
// kind in bits 29-30 and id + 1 below (so a memo read needs no container
// lookup); memoFrame | id for a frame; memoStack | id for an interned frame
// list without a container (kStack); memoTrace | index for a trace record
// without one (kTrace); memoBlock | index for a block record without one
// (kBlock); memoOther | index into memoVals for anything else.
const (
	memoOther = 1 << 31
	memoTrace = memoOther | 1<<29
	memoBlock = memoTrace | 1<<28
	memoFrame = 3 << 30
	memoStack = 7 << 29
	// memoIDFrame is the id bits of a frame's entry: an entry less them
	// is memoFrame for a frame and only then.
	memoIDFrame   = 1<<29 - 1
	memoKindShift = 29
	memoIDMask    = 1<<memoKindShift - 1
	// maxMemoVals bounds memoVals so that its indices stay below
	// memoTrace; a record's index past it goes to memoVals.
	maxMemoVals = 1 << 29
)

var memoKinds = [4]vkind{kList, kTuple, kDict, kSet}

// memoRef encodes v for the memo; ok is false when the memo is full.
func (d *decoder) memoRef(v val) (r uint32, ok bool) {
	switch {
	case v.k >= kList && v.k <= kSet && v.ref < memoIDMask-1:
		return uint32(v.k-kList)<<memoKindShift | (v.ref + 1), true
	case v.k == kFrame:
		return memoFrame | v.ref, true // ids stay below maxFrameID
	case v.k == kTrace && v.ref < 1<<28:
		return memoTrace | v.ref, true
	case v.k == kBlock && v.ref < 1<<28:
		return memoBlock | v.ref, true
	case v.k == kStack && v.ref < 1<<29:
		return memoStack | v.ref, true
	case d.memoVals.len() >= d.memoValsMax:
		return 0, false
	}
	return memoOther | d.memoVals.push(v), true
}

// memoVal decodes a memo entry; ok is false for a hole.
func (d *decoder) memoVal(r uint32) (val, bool) {
	switch {
	case r >= memoStack:
		return val{k: kStack, ref: r &^ memoStack}, true
	case r >= memoFrame:
		return val{k: kFrame, ref: r &^ memoFrame}, true
	case r >= memoBlock:
		return val{k: kBlock, ref: r &^ memoBlock}, true
	case r >= memoTrace:
		return val{k: kTrace, ref: r &^ memoTrace}, true
	case r >= memoOther:
		return *d.memoVals.at(r &^ memoOther), true
	case r&memoIDMask == 0:
		return val{}, false
	}
	return val{k: memoKinds[r>>memoKindShift], ref: r&memoIDMask - 1}, true
}

// errMemoFull is the refusal for a pickle with more memoized scalars than
// the memo encoding holds (needs an input of gigabytes of MEMOIZE).
func (d *decoder) errMemoFull(at int) error {
	return d.errf(at, "more than %d memoized values (memscope's limit)", d.memoValsMax)
}

// denseMemoGap is how far past the end of the dense memo table (and past
// twice the memo opcodes seen) an index may land and still be stored
// densely.
const denseMemoGap = 4096

func (d *decoder) setMemo(idx uint32, v val, at int) error {
	d.puts++
	n := d.memo.len()
	if int(idx) != n {
		d.otherPuts++
	}
	var r uint32
	if int(idx) < n+denseMemoGap {
		var ok bool
		if r, ok = d.memoRef(v); !ok {
			return d.errMemoFull(at)
		}
	}
	if idx < uint32(len(d.small)) {
		d.small[idx] = v
	}
	switch {
	case int(idx) < n:
		// An entry a cached frame list may read changes.
		d.spans.reset()
		d.memo.own(idx) // a joined helper's hole (see join)
		*d.memo.at(idx) = r
	case int(idx) == n:
		d.memo.push(r)
	case int(idx) < n+denseMemoGap && int(idx) < 2*d.puts+denseMemoGap:
		// Dense while the table stays within a small multiple of the
		// PUT/MEMOIZE opcodes seen: indices that jump ahead (a hostile file,
		// or an unusual writer) go to the map, so slots never outnumber
		// opcodes by more than denseMemoGap.
		for d.memo.len() < int(idx) {
			d.memo.push(0)
		}
		d.memo.push(r)
	default:
		// A far-away index: keep it sparse rather than let a hostile file
		// make us allocate 4 billion slots.
		if d.memoSparse == nil {
			d.memoSparse = make(map[uint32]val)
		}
		d.memoSparse[idx] = v
	}
	return nil
}

func (d *decoder) getMemo(idx uint32, at int) (val, error) {
	if int(idx) < d.memo.len() {
		if v, ok := d.memoVal(*d.memo.at(idx)); ok {
			return v, nil
		}
	}
	if v, ok := d.memoSparse[idx]; ok {
		return v, nil
	}
	if j := d.joinerOf(idx); j != nil {
		if v, ok := j.entry(idx); ok {
			return v, nil
		}
	}
	if d.region && int64(idx) < d.refFrom {
		// A container or a hole of the prefix, or an entry past it that a
		// BINGET reads (see enterRegion): the machine that joins the
		// helper resolves it (see helper.go), once it has checked that it
		// was made before it was read.
		d.refGap = max(d.refGap, int64(idx)-int64(d.memo.len()))
		return val{k: kRef, ref: idx}, nil
	}
	return val{}, d.errf(at, "memo key %d is read before it is written", idx)
}
