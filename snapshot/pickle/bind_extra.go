package pickle

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"memscope/snapshot/schema"
)

// The snapshot's other top-level parts, external annotations and allocator
// settings, and values rendered for display.

// annotations binds external_annotations: the starts and ends of
// record_function ranges (name, stage, device, time_us; other keys are
// skipped).
func (b *binder) annotations(v val) ([]schema.Annotation, error) {
	items, err := b.list(v, "external_annotations")
	if err != nil {
		return nil, err
	}
	if err := b.spend(len(items), "external_annotations"); err != nil {
		return nil, err
	}
	out := make([]schema.Annotation, 0, len(items))
	for i, it := range items {
		// The path of an error, built only for one: for each of the 103k
		// annotations of 31k stages, the strings were half the bind.
		at := func(field string) string { return "external_annotations[" + strconv.Itoa(i) + "]" + field }
		var kv []val
		if it.k == kDict && b.g.cont(it.ref).kind == cGeneric {
			kv = b.g.seq(it)
		} else if kv, err = b.pairs(it, at("")); err != nil {
			return nil, err
		}
		var a schema.Annotation
		for j := 0; j < len(kv); j += 2 {
			k, x := kv[j], kv[j+1]
			switch role := b.keyRole(k); {
			case role == keyName && x.k == kStr:
				a.Name = b.str(x)
			case role == keyStage && x.k == kStr:
				a.Stage = b.str(x)
			case role == keyDevice && x.k == kInt:
				a.Device = int(x.i)
			case role == keyTimeUS && x.k == kInt:
				a.TimeUS = x.i
			case role == keyName:
				a.Name, err = b.text(x, at(".name"))
			case role == keyStage:
				a.Stage, err = b.text(x, at(".stage"))
			case role == keyDevice:
				var d int64
				d, err = b.integer(x, at(".device"))
				a.Device = int(d)
			case role == keyTimeUS:
				a.TimeUS, err = b.integer(x, at(".time_us"))
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// settings binds allocator_settings: every key as rendered text (Raw), and
// the ones the analysis reads typed. A None is no settings at all.
func (b *binder) settings(v val) (schema.Settings, error) {
	st := schema.Settings{Present: true}
	kv, err := b.pairs(v, "allocator_settings")
	if err != nil {
		if v.k == kNone {
			return schema.Settings{}, nil
		}
		return st, err
	}
	for i := 0; i < len(kv); i += 2 {
		k, x := kv[i], kv[i+1]
		name := b.keyName(k)
		st.Raw = append(st.Raw, schema.KV{Key: name, Value: b.render(x, 0)})
		switch name {
		case "PYTORCH_CUDA_ALLOC_CONF":
			st.AllocConf, _ = b.text(x, name)
		case "max_split_size":
			st.MaxSplitSize, _ = b.integer(x, name)
		case "expandable_segments":
			st.ExpandableSegments = b.boolean(x)
		case "garbage_collection_threshold":
			if x.k == kFloat {
				st.GCThreshold = math.Float64frombits(uint64(x.i))
			} else if x.k == kInt {
				st.GCThreshold = float64(x.i)
			}
		case "trace_alloc_max_entries":
			st.TraceMaxEntries, _ = b.integer(x, name)
		case "trace_alloc_overflowed":
			st.TraceOverflowed = b.boolean(x)
			st.TraceOverflowedKnown = true
		}
	}
	return st, nil
}

// render formats a value for display, with bounded depth and width.
func (b *binder) render(v val, depth int) string {
	switch v.k {
	case kNone:
		return "None"
	case kBool:
		if v.i != 0 {
			return "True"
		}
		return "False"
	case kInt:
		return strconv.FormatInt(v.i, 10)
	case kUint:
		return strconv.FormatUint(uint64(v.i), 10)
	case kHuge, kFloat:
		return strconv.FormatFloat(math.Float64frombits(uint64(v.i)), 'g', -1, 64)
	case kStr, kBytes:
		s := b.str(v)
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		return strconv.Quote(s)
	case kFrame:
		return "{frame}"
	case kStack:
		return fmt.Sprintf("[%d frames]", len(b.g.stacks.get(v.ref)))
	case kTrace:
		if v = b.g.traceDictOf(v); v.k == kTrace {
			return "{trace entry}"
		}
	case kBlock:
		v = b.g.blockDictOf(v)
	}
	if depth > 3 {
		return "…"
	}
	if v.k == kBlock {
		return b.renderItems(b.g.seq(v), "{", "}", 2, depth)
	}
	items := b.g.seq(v)
	open, close := "[", "]"
	switch v.k {
	case kTuple:
		open, close = "(", ")"
	case kDict, kSet:
		open, close = "{", "}"
	}
	switch b.g.cont(v.ref).kind {
	case cFrame:
		return "{frame}"
	case cStack:
		return fmt.Sprintf("[%d frames]", b.g.cont(v.ref).n)
	case cTrace:
		return "{trace entry}"
	}
	step := 1
	if v.k == kDict {
		step = 2
	}
	return b.renderItems(items, open, close, step, depth)
}

// renderItems is render's text of a container's items (key, value pairs
// when step is 2) between open and close.
func (b *binder) renderItems(items []val, open, close string, step, depth int) string {
	var sb strings.Builder
	sb.WriteString(open)
	for i := 0; i < len(items); i += step {
		if i > 0 {
			sb.WriteString(", ")
		}
		if sb.Len() > 300 {
			sb.WriteString("…")
			break
		}
		sb.WriteString(b.render(items[i], depth+1))
		if step == 2 {
			sb.WriteString(": ")
			sb.WriteString(b.render(items[i+1], depth+1))
		}
	}
	sb.WriteString(close)
	return sb.String()
}
