package pickle

import (
	"fmt"
	"math"
	"slices"

	"memscope/snapshot/schema"
)

// Binding call stacks: the decoder's interned stacks as schema.Stacks, and
// lists of frame dicts it did not intern.

// stack binds a list of frame dicts. Lists shared through the memo are bound
// once; equal stacks share one backing array.
func (b *binder) stack(v val, path string) (schema.Stack, error) {
	id, ok, err := b.stackID(v, path)
	if !ok || err != nil {
		return schema.Stack{}, err
	}
	return b.typedStack(id), nil
}

// stackRef is stack for a trace entry: 0 for none, else 1 + the stack's
// index in Snapshot.Stacks.
func (b *binder) stackRef(v val, path string) (uint32, error) {
	id, ok, err := b.stackID(v, path)
	if !ok || err != nil {
		return 0, err
	}
	return b.entryStack(id), nil
}

// entryStack types interned stack id for a trace entry and returns the
// entry's Stack (see schema.TraceEntry).
func (b *binder) entryStack(id uint32) uint32 {
	b.typedStack(id)
	return id + 1
}

// stackID interns the frames list v; ok is false for none (None or an
// empty list).
func (b *binder) stackID(v val, path string) (id uint32, ok bool, err error) {
	if v.k == kNone {
		return 0, false, nil
	}
	if v.k == kStack {
		return v.ref, true, nil
	}
	if v.k != kList && v.k != kTuple {
		return 0, false, errAt(path, "expected a list of frames, found %s", v.k)
	}
	c := b.g.cont(v.ref)
	if c.n == 0 {
		return 0, false, nil
	}
	if c.kind == cStack {
		return c.start, true, nil
	}
	if s := b.stackOf[v.ref]; s > 0 {
		return uint32(s - 1), true, nil
	}
	items := b.g.seq(v)
	ids := b.scratch[:0]
	for i, it := range items {
		if it.k == kFrame {
			ids = append(ids, it.ref)
			continue
		}
		if it.k != kDict && it.k != kBlock {
			return 0, false, errAt(fmt.Sprintf("%s[%d]", path, i), "expected a frame dict, found %s", it.k)
		}
		if it.k == kDict {
			if fc := b.g.cont(it.ref); fc.kind == cFrame {
				ids = append(ids, fc.start)
				continue
			}
		}
		ipath := fmt.Sprintf("%s[%d]", path, i)
		f, err := b.genericFrame(it, ipath)
		if err != nil {
			return 0, false, err
		}
		fid, ok := b.g.frames.intern(f)
		if !ok {
			return 0, false, errAt(ipath, "more than %d distinct frames (memscope's limit)", maxFrameID)
		}
		ids = append(ids, fid)
	}
	b.scratch = ids
	id = b.g.stacks.intern(ids)
	b.stackOf[v.ref] = int32(id) + 1
	return id, true, nil
}

// typeStacks makes every stack interned while decoding a Stack. A Stack
// is a view of the interned ids (the graph's stack table is kept as the
// snapshot's): nothing is copied, and the collector has no frame pointers
// to mark, which on a trace of 300k distinct stacks was 5M of them.
func (b *binder) typeStacks() {
	b.typeFrames()
	n := b.g.stacks.len()
	b.stacks = make([]schema.Stack, n)
	for i := range b.stacks {
		b.stacks[i] = schema.NewStack(b.table, b.g.stacks.get(uint32(i)))
	}
}

// typeFrames converts the frames interned so far to Frames, once each.
func (b *binder) typeFrames() {
	t := b.table
	n := b.g.frames.len()
	if len(t.Frames) == n {
		return
	}
	t.Frames = slices.Grow(t.Frames, n-len(t.Frames))
	for id := uint32(len(t.Frames)); int(id) < n; id++ {
		f := b.g.frames.at(id)
		t.Frames = append(t.Frames, schema.Frame{Filename: b.strOrEmpty(f.file), Name: b.strOrEmpty(f.name), Line: f.line})
	}
}

// typedStack returns interned stack id as a Stack.
func (b *binder) typedStack(id uint32) schema.Stack {
	b.typeFrames()
	for int(id) >= len(b.stacks) {
		b.stacks = append(b.stacks, schema.Stack{})
	}
	if st := b.stacks[id]; st.Len() != 0 {
		return st
	}
	st := schema.NewStack(b.table, b.g.stacks.get(id))
	b.stacks[id] = st
	return st
}

func (b *binder) genericFrame(v val, path string) (rawFrame, error) {
	f := rawFrame{file: math.MaxUint32, name: math.MaxUint32}
	kv := b.g.seq(v)
	for j := 0; j < len(kv); j += 2 {
		k, x := kv[j], kv[j+1]
		switch b.keyRole(k) {
		case keyFilename:
			if x.k != kStr {
				return f, errAt(path+".filename", "expected a string, found %s", x.k)
			}
			f.file = x.ref
		case keyName:
			if x.k != kStr {
				return f, errAt(path+".name", "expected a string, found %s", x.k)
			}
			f.name = x.ref
		case keyLine:
			switch x.k {
			case kInt:
				f.line = x.i
			case kUint, kHuge:
				f.line = -1
			default:
				return f, errAt(path+".line", "expected an int, found %s", x.k)
			}
		}
	}
	return f, nil
}

func (b *binder) strOrEmpty(id uint32) string {
	if int(id) < len(b.g.strs) {
		return b.g.strs[id]
	}
	return ""
}
