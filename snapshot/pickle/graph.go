package pickle

type vkind uint8

const (
	kNone vkind = iota
	kBool
	kInt   // i is the value
	kUint  // i holds the bits of a value in [2^63, 2^64)
	kHuge  // an integer wider than 64 bits; i holds float64 bits of an approximation
	kFloat // i holds float64 bits
	kStr   // ref is a string id
	kBytes // ref is a string id
	kList  // ref is a container id (for all container kinds)
	kTuple
	kDict
	kSet
	kUnset vkind = 255 // a hole in the memo
)

var kindNames = [...]string{"None", "bool", "int", "int", "int", "float", "str", "bytes", "list", "tuple", "dict", "set"}

func (k vkind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unset"
}

type val struct {
	i   int64
	ref uint32
	k   vkind
}

type ckind uint8

const (
	cGeneric   ckind = iota // items hold vals (dicts: key, value pairs)
	cFrame                  // a recognised frame dict held in the container (see frameOf)
	cFrameWide              // a recognised frame dict whose line does not fit: start indexes graph.frames
	cStack                  // a list of frame dicts; start indexes graph.stacks
	cTrace                  // a recognised trace entry dict; start indexes graph.traces
)

type container struct {
	start uint32 // index into items, spills (when spilled), frames or stacks
	n     uint32 // number of vals (for cStack: frames)
	// aux is a cFrame's line (start and n hold its file and name): frames
	// are most of a snapshot's dicts, and holding them in the container
	// saves a 16-byte record per frame (measured: 137 MiB of a 208 MiB
	// file with unshared frames).
	aux     uint32
	kind    ckind
	vk      vkind // the kind of val that refers to this container
	spilled bool
}

// lineUnknown is aux's value for line -1 (a line too wide for int64).
const lineUnknown = ^uint32(0)

// isFrame reports whether a container is a recognised frame dict.
func (c *container) isFrame() bool { return c.kind == cFrame || c.kind == cFrameWide }

// frameOf returns a recognised frame container's frame.
func (g *graph) frameOf(c *container) rawFrame {
	if c.kind == cFrameWide {
		return *g.frames.at(c.start)
	}
	f := rawFrame{file: c.start, name: c.n, line: int64(c.aux)}
	if c.aux == lineUnknown {
		f.line = -1
	}
	return f
}

// setFrame makes c a recognised frame container holding f.
func (g *graph) setFrame(c *container, f rawFrame) {
	if f.line >= -1 && f.line < int64(lineUnknown) {
		c.kind, c.start, c.n, c.aux = cFrame, f.file, f.name, uint32(f.line)
		if f.line == -1 {
			c.aux = lineUnknown
		}
		return
	}
	c.kind, c.start = cFrameWide, g.frames.push(f)
}

// rawFrame is a frame dict recognised while decoding; file and name are
// string ids.
type rawFrame struct {
	file, name uint32
	line       int64
}

// rawTrace is a trace entry dict recognised while decoding: a million of
// them would otherwise take 16 vals each. String fields are string ids,
// frames the id of the frames list's container; noRef marks absent ones.
type rawTrace struct {
	addr, stream         uint64
	size, time, devFree  int64
	action, cc, um, fram uint32
	// has records which integer fields were present.
	has uint8
}

const noRef = ^uint32(0)

// has bits of rawTrace.
const (
	hasAddr = 1 << iota
	hasSize
	hasStream
	hasTime
	hasDevFree
)

// graph is the decoded value graph.
type graph struct {
	strs   []string
	roles  []keyRole // role of each string when used as a dict key
	conts  chunked[container]
	items  chunked[val]
	spills [][]val
	frames chunked[rawFrame]
	traces chunked[rawTrace]
	stacks stackTable
	proto  int
}

func (g *graph) cont(id uint32) *container { return g.conts.at(id) }

func (g *graph) seq(v val) []val {
	c := g.conts.at(v.ref)
	switch {
	case c.n == 0 || c.kind != cGeneric:
		return nil
	case c.spilled:
		return g.spills[c.start][:c.n]
	}
	return g.items.slice(c.start, c.n)
}
