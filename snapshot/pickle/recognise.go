package pickle

// Recognising the bulk of a snapshot while decoding: frame dicts, frame
// lists and trace entries become compact records (see graph.go), and go
// back to the generic form when a pickle keeps adding to them.

// unframe turns a recognised frame back into a generic dict, for the rare
// pickle that adds items to a frame dict after filling it.
func (d *decoder) unframe(cid uint32) {
	g := d.g
	c := g.conts.at(cid)
	f := g.frameOf(c)
	line := val{k: kInt, i: f.line}
	kv := []val{
		{k: kStr, ref: d.str([]byte("filename"))}, {k: kStr, ref: f.file},
		{k: kStr, ref: d.str([]byte("line"))}, line,
		{k: kStr, ref: d.str([]byte("name"))}, {k: kStr, ref: f.name},
	}
	*c = container{vk: kDict}
	d.extend(cid, kv)
}

// untrace turns a recognised trace entry back into a generic dict, for the
// rare pickle that adds items to it after filling it.
func (d *decoder) untrace(cid uint32) {
	g := d.g
	c := g.conts.at(cid)
	r := *g.traces.at(c.start)
	key := func(s string) val { return val{k: kStr, ref: d.str([]byte(s))} }
	kv := []val{key("action"), {k: kStr, ref: r.action}}
	ints := []struct {
		name string
		bit  uint8
		v    int64
	}{{"addr", hasAddr, int64(r.addr)}, {"size", hasSize, r.size}, {"stream", hasStream, int64(r.stream)},
		{"time_us", hasTime, r.time}, {"device_free", hasDevFree, r.devFree}}
	for _, f := range ints {
		if r.has&f.bit != 0 {
			kv = append(kv, key(f.name), val{k: kInt, i: f.v})
		}
	}
	for _, f := range []struct {
		name string
		ref  uint32
		k    vkind
	}{{"compile_context", r.cc, kStr}, {"user_metadata", r.um, kStr}, {"frames", r.fram, kList}} {
		if f.ref != noRef {
			kv = append(kv, key(f.name), val{k: f.k, ref: f.ref})
		}
	}
	c = g.conts.at(cid)
	*c = container{vk: kDict}
	d.extend(cid, kv)
}

// unstack turns an interned frame list back into a generic list of frame
// dicts, for a list that gets more items after its first batch.
func (d *decoder) unstack(cid uint32) {
	g := d.g
	c := g.conts.at(cid)
	raw := g.stacks.raws[c.start]
	vs := make([]val, len(raw))
	for i, f := range raw {
		fc := g.conts.push(container{vk: kDict})
		g.setFrame(g.conts.at(fc), f)
		vs[i] = val{k: kDict, ref: fc}
	}
	*c = container{vk: kList}
	d.extend(cid, vs)
}

// tryTrace stores a freshly filled dict as a rawTrace when it holds only
// the trace-entry keys memscope knows, with the expected value types; any
// other key or type keeps the generic form (and its warnings).
func (d *decoder) tryTrace(cid uint32, kv []val) bool {
	if kv[0].k != kStr || d.g.roles[kv[0].ref] != keyAction {
		return false
	}
	r := rawTrace{action: noRef, cc: noRef, um: noRef, fram: noRef}
	for j := 0; j < len(kv); j += 2 {
		k, v := kv[j], kv[j+1]
		if k.k != kStr {
			return false
		}
		ok := true
		switch d.g.roles[k.ref] {
		case keyAction:
			r.action, ok = v.ref, v.k == kStr
		case keyAddr:
			// A negative address is no address: the generic form keeps it
			// (and the binder says what is wrong) rather than wrap it.
			r.addr, ok = uint64(v.i), (v.k == kInt && v.i >= 0) || v.k == kUint
			r.has |= hasAddr
		case keyStream:
			r.stream, ok = uint64(v.i), (v.k == kInt && v.i >= 0) || v.k == kUint
			r.has |= hasStream
		case keySize:
			r.size, ok = v.i, v.k == kInt && v.i >= 0
			r.has |= hasSize
		case keyTimeUS:
			r.time, ok = v.i, v.k == kInt
			r.has |= hasTime
		case keyDeviceFree:
			r.devFree, ok = v.i, v.k == kInt
			r.has |= hasDevFree
		case keyCompileContext:
			r.cc, ok = v.ref, v.k == kStr
		case keyUserMetadata:
			r.um, ok = v.ref, v.k == kStr
		case keyFrames:
			r.fram, ok = v.ref, v.k == kList
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	if r.action == noRef {
		return false
	}
	c := d.g.conts.at(cid)
	c.kind = cTrace
	c.start = d.g.traces.push(r)
	return true
}

// tryStack interns a fresh list whose items are all recognised frames.
func (d *decoder) tryStack(cid uint32, items []val) bool {
	raw := d.scratch[:0]
	for _, it := range items {
		if it.k != kDict {
			return false
		}
		c := d.g.conts.at(it.ref)
		if !c.isFrame() {
			return false
		}
		raw = append(raw, d.g.frameOf(c))
	}
	d.scratch = raw
	c := d.g.conts.at(cid)
	c.kind = cStack
	c.start = d.g.stacks.intern(raw)
	c.n = uint32(len(raw))
	return true
}

// tryFrame stores a freshly filled 3-key dict as a rawFrame when its keys are
// exactly filename, line and name with the expected value types.
func (d *decoder) tryFrame(cid uint32, kv []val) bool {
	var f rawFrame
	var got uint8
	for j := 0; j < 6; j += 2 {
		k, v := kv[j], kv[j+1]
		if k.k != kStr {
			return false
		}
		switch d.g.roles[k.ref] {
		case keyFilename:
			if v.k != kStr {
				return false
			}
			f.file = v.ref
			got |= 1
		case keyName:
			if v.k != kStr {
				return false
			}
			f.name = v.ref
			got |= 2
		case keyLine:
			switch v.k {
			case kInt:
				f.line = v.i
			case kUint, kHuge:
				f.line = -1
			default:
				return false
			}
			got |= 4
		default:
			return false
		}
	}
	if got != 7 {
		return false
	}
	d.g.setFrame(d.g.conts.at(cid), f)
	return true
}
