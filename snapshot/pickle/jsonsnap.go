package pickle

import (
	"math"

	"memscope/snapshot/schema"

	"memscope/internal/jsonscan"
)

// DecodeJSON reads the JSON form of a snapshot (what
// json.dumps(torch.cuda.memory._snapshot()) writes, accepted by
// pytorch.org/memory_viz) into the same graph the pickle reader builds, so
// one binder serves both.
func DecodeJSON(data []byte) (*schema.Snapshot, error) {
	d := newDecoder(data)
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

func (d *decoder) fromJSON(sc *jsonscan.Scanner) (val, error) {
	type open struct {
		mark int
		obj  bool
	}
	var opens []open
	for {
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
			opens = append(opens, open{mark: len(d.stack), obj: c == '{'})
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
				if top.obj {
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
