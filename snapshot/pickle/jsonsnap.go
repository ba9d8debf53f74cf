package pickle

import (
	"context"
	"math"

	"memscope/internal/budget"

	"memscope/snapshot/schema"

	"memscope/internal/jsonscan"
)

// DecodeJSON reads the JSON form of a snapshot (what
// json.dumps(torch.cuda.memory._snapshot()) writes, accepted by
// pytorch.org/memory_viz) into the same graph the pickle reader builds, so
// one binder serves both. It holds to the pickle machine's memory budget
// (nesting, open values and containers by input size), ctx cancels it
// within a few thousand values, progress gets 0..1, and drop, when not
// nil, gets the byte ranges read past, as DecodeMapped's does: nothing
// decoded refers to data.
func DecodeJSON(ctx context.Context, data []byte, progress func(float64), drop func(from, to int)) (*schema.Snapshot, error) {
	d := newDecoder(data)
	d.ctx, d.progress, d.drop = ctx, progress, drop
	d.jsonBatch = jsonBatch
	root, err := d.fromJSON(jsonscan.New(data))
	if err != nil {
		return nil, err
	}
	s, err := newBinder(d.g, len(data)).bindRoot(root)
	if err != nil {
		return nil, err
	}
	s.Format = "json"
	return s, nil
}

// jsonBatch is how many values of one array or object the JSON reader
// holds on its stack before it moves them to the container: a trace list of
// a million entries would otherwise wait whole on the stack, doubling it
// through copies. An array or object moved is neither a frame nor a stack
// (those are short).
const jsonBatch = 1 << 12

// checkJSON is checkBudget for the JSON reader, whose open arrays and
// objects stand for MARKs and whose values wait on the stack until their
// bracket closes: a hostile file of 100 MB (empty objects in a list,
// brackets opened and never closed) held 1.7 and 3.8 GB before it was
// refused.
func (d *decoder) checkJSON(sc *jsonscan.Scanner, depth int) error {
	if depth > maxMarks {
		return sc.Errorf("arrays and objects nest more than %d deep (memscope's limit; a snapshot nests a few)", maxMarks)
	}
	if c, limit := d.cost(len(d.stack))+16*int64(depth), budget.Limit(len(d.data)); c > limit {
		return sc.Errorf("decoding needs more than %d MiB for a %d MiB input (memscope's limit: %d bytes per input byte + %d MiB); a hostile or corrupt file?",
			limit>>20, len(d.data)>>20, budget.PerByte, budget.Base>>20)
	}
	return nil
}

func (d *decoder) fromJSON(sc *jsonscan.Scanner) (val, error) {
	type open struct {
		mark int
		obj  bool
		// cont is the container its items so far were moved to (see
		// jsonBatch), or noRef.
		cont uint32
	}
	var opens []open
	left := 1 // values until the next check (see cancelEvery)
	for {
		if left--; left == 0 {
			left = cancelEvery
			if err := d.report(sc.Pos()); err != nil {
				return val{}, err
			}
			if err := d.checkJSON(sc, len(opens)); err != nil {
				return val{}, err
			}
		}
		done := true
		switch c := sc.Peek(); c {
		case '{', '[':
			_ = sc.Expect(c)
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			if sc.Peek() == end {
				_ = sc.Expect(end)
				k := kDict
				if c == '[' {
					k = kList
				}
				d.push(val{k: k, ref: d.newCont(k, nil)})
				break
			}
			opens = append(opens, open{mark: len(d.stack), obj: c == '{', cont: noRef})
			done = false
			if c == '{' {
				if err := d.jsonKey(sc); err != nil {
					return val{}, err
				}
			}
		case '"':
			b, err := sc.String()
			if err != nil {
				return val{}, err
			}
			d.push(val{k: kStr, ref: d.str(b)})
		case 't', 'f', 'n':
			lit, err := sc.Literal()
			if err != nil {
				return val{}, err
			}
			switch lit {
			case jsonscan.Null:
				d.push(val{k: kNone})
			case jsonscan.True:
				d.push(val{k: kBool, i: 1})
			default:
				d.push(val{k: kBool})
			}
		case 0:
			return val{}, sc.Errorf("unexpected end of data (file truncated?)")
		default:
			f, i, isInt, err := sc.Number()
			if err != nil {
				return val{}, err
			}
			if isInt {
				d.push(val{k: kInt, i: i})
			} else if f == math.Trunc(f) && f >= 9.223372036854775807e18 && f < 1.8446744073709551615e19 {
				d.push(val{k: kUint, i: int64(uint64(f))})
			} else {
				d.push(val{k: kFloat, i: int64(math.Float64bits(f))})
			}
		}
		if !done {
			continue
		}
		for len(opens) > 0 {
			top := opens[len(opens)-1]
			c := sc.Peek()
			if (c == '}' && top.obj) || (c == ']' && !top.obj) {
				_ = sc.Expect(c)
				opens = opens[:len(opens)-1]
				items := d.stack[top.mark:]
				var v val
				if top.cont != noRef {
					// Too long to be a frame or a stack (see jsonBatch).
					if len(items) > 0 {
						d.extend(top.cont, items)
					}
					v = val{k: kList, ref: top.cont}
					if top.obj {
						v.k = kDict
					}
				} else if top.obj {
					// JSON has no shared references, so a frame can be a
					// plain value from the start.
					v = d.jsonFrame(items)
					if v.k != kFrame {
						v = val{k: kDict, ref: d.newCont(kDict, items)}
					}
				} else {
					id := d.newCont(kList, nil)
					if !d.tryStack(id, items) {
						d.extend(id, items)
					}
					v = val{k: kList, ref: id}
				}
				d.stack = append(d.stack[:top.mark], v)
				continue
			}
			if c != ',' {
				return val{}, sc.Errorf("expected ',' or a closing bracket (file truncated?)")
			}
			_ = sc.Expect(',')
			if n := len(d.stack) - top.mark; n >= d.jsonBatch {
				// Between values (an object's: a key and its value), so
				// pairs stay whole.
				if top.cont == noRef {
					k := kList
					if top.obj {
						k = kDict
					}
					opens[len(opens)-1].cont = d.newCont(k, nil)
				}
				d.extend(opens[len(opens)-1].cont, d.stack[top.mark:])
				d.stack = d.stack[:top.mark]
			}
			if top.obj {
				if err := d.jsonKey(sc); err != nil {
					return val{}, err
				}
			}
			break
		}
		if len(opens) == 0 {
			if !sc.EOF() {
				return val{}, sc.Errorf("trailing data after the JSON value")
			}
			return d.stack[len(d.stack)-1], nil
		}
	}
}

func (d *decoder) jsonKey(sc *jsonscan.Scanner) error {
	b, err := sc.String()
	if err != nil {
		return err
	}
	d.push(val{k: kStr, ref: d.str(b)})
	return sc.Expect(':')
}

// jsonFrame returns a JSON object's items as a kFrame val when they are a
// frame, and a zero val otherwise.
func (d *decoder) jsonFrame(items []val) val {
	if len(items) != 6 {
		return val{}
	}
	id, ok := d.frameID(items)
	if !ok {
		return val{}
	}
	return val{k: kFrame, ref: id}
}
