package trace

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"memscope/internal/jsonscan"
)

var reRank = regexp.MustCompile(`rank_?(\d+)`)

// RankFromName returns the number in the first "rank<N>" of a file name, or
// -1.
func RankFromName(path string) int {
	if m := reRank.FindStringSubmatch(filepath.Base(path)); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	return -1
}

// ReadFile reads any trace file, detecting its kind by content. Logs of
// several ranks give several Ranks.
func ReadFile(path string) ([]*Rank, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := Parse(path, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Parse parses trace data of any supported kind.
func Parse(path string, data []byte) ([]*Rank, error) {
	switch Sniff(data) {
	case KindMegatron:
		r, err := ParseMegatron(path, data)
		if err != nil {
			return nil, err
		}
		return []*Rank{r}, nil
	case KindTorchtitanJSON:
		r, err := ParseTorchtitanExport(path, data)
		if err != nil {
			return nil, err
		}
		return []*Rank{r}, nil
	case KindMegatronLog, KindTorchtitanLog:
		return ParseLog(path, data)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("empty file")
	}
	return nil, fmt.Errorf("not a memory trace (expected Megatron memory_trace JSON, a torchtitan memory export or a training log)")
}

// ParseMegatron parses a Megatron memory_trace_rank*.json: an object of
// iterations ("0", "1", ...) each with samples and optional peak, static and
// theoretical memory (-1 = unset). NaN and Infinity literals are accepted;
// non-numeric iteration keys are skipped and named in Warnings.
func ParseMegatron(path string, data []byte) (*Rank, error) {
	r := &Rank{Rank: RankFromName(path), Path: path, Kind: KindMegatron}
	sc := jsonscan.New(data)
	byNum := map[int]int{}
	unknown := map[string]bool{}
	err := sc.Object(func(kb []byte) error {
		key := string(kb)
		num, err := strconv.Atoi(key)
		if err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("iteration key %q is not a number: skipped", key))
			return sc.Skip()
		}
		it := Iteration{Key: key, Num: num, X: Seconds, PeakAllocated: Unset, Static: Unset, Theoretical: Unset}
		if err := parseIteration(sc, &it, unknown); err != nil {
			return fmt.Errorf("iteration %q: %w", key, err)
		}
		if i, dup := byNum[num]; dup {
			r.Iterations[i] = it // JSON: the last duplicate key wins, as in json.load
			return nil
		}
		byNum[num] = len(r.Iterations)
		r.Iterations = append(r.Iterations, it)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !sc.EOF() {
		return nil, sc.Errorf("data after the end of the trace object")
	}
	for k := range unknown {
		r.Warnings = append(r.Warnings, fmt.Sprintf("unknown iteration field %q ignored", k))
	}
	slices.Sort(r.Warnings)
	slices.SortFunc(r.Iterations, func(a, b Iteration) int { return a.Num - b.Num })
	return r, nil
}

func parseIteration(sc *jsonscan.Scanner, it *Iteration, unknown map[string]bool) error {
	if sc.Peek() != '{' {
		return sc.Errorf("expected an object for the iteration")
	}
	return sc.Object(func(kb []byte) error {
		var err error
		switch string(kb) {
		case "samples":
			if err := parseSamples(sc, it); err != nil {
				return fmt.Errorf("samples: %w", err)
			}
		case "peak_allocated_MB":
			if it.PeakAllocated, err = optNumber(sc); err != nil {
				return fmt.Errorf("peak_allocated_MB: %w", err)
			}
		case "static_memory_MB":
			if it.Static, err = optNumber(sc); err != nil {
				return fmt.Errorf("static_memory_MB: %w", err)
			}
		case "theoretical_memory_MB":
			if it.Theoretical, err = optNumber(sc); err != nil {
				return fmt.Errorf("theoretical_memory_MB: %w", err)
			}
		case "source":
			if sc.Peek() != '"' {
				return sc.Skip()
			}
			b, err := sc.String()
			if err != nil {
				return err
			}
			it.Source = string(b)
		default:
			unknown[string(kb)] = true
			return sc.Skip()
		}
		return nil
	})
}

// optNumber reads a number or null; negative values and null mean unset,
// as do NaN and infinities.
func optNumber(sc *jsonscan.Scanner) (float64, error) {
	v, err := number(sc)
	if err != nil {
		return 0, err
	}
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return Unset, nil
	}
	return v, nil
}

// number reads a number; null reads as NaN.
func number(sc *jsonscan.Scanner) (float64, error) {
	switch c := sc.Peek(); {
	case c == 'n':
		if _, err := sc.Literal(); err != nil {
			return 0, err
		}
		return math.NaN(), nil
	case c == '-' || c == 'N' || c == 'I' || (c >= '0' && c <= '9'):
		f, _, _, err := sc.Number()
		return f, err
	}
	return 0, sc.Errorf("expected a number")
}

// parseSamples is the hot loop of trace loading (millions of samples), so
// it walks the JSON by hand rather than through Object/Array callbacks.
func parseSamples(sc *jsonscan.Scanner, it *Iteration) error {
	if sc.Peek() != '[' {
		return sc.Errorf("expected an array")
	}
	_ = sc.Expect('[')
	for first := true; ; first = false {
		more, err := sc.More(']', first)
		if err != nil || !more {
			return err
		}
		if sc.Peek() != '{' {
			return sc.Errorf("expected a sample object")
		}
		_ = sc.Expect('{')
		t, alloc, res := math.NaN(), math.NaN(), math.NaN()
		for f := true; ; f = false {
			more, err := sc.More('}', f)
			if err != nil {
				return err
			}
			if !more {
				break
			}
			kb, err := sc.String()
			if err != nil {
				return err
			}
			if err := sc.Expect(':'); err != nil {
				return err
			}
			var dst *float64
			switch string(kb) {
			case "timestamp_s":
				dst = &t
			case "allocated_memory_MB":
				dst = &alloc
			case "reserved_memory_MB":
				dst = &res
			default:
				if err := sc.Skip(); err != nil {
					return err
				}
				continue
			}
			if *dst, err = number(sc); err != nil {
				return fmt.Errorf("%s: %w", kb, err)
			}
		}
		it.T = append(it.T, t)
		it.Allocated = append(it.Allocated, alloc)
		it.Reserved = append(it.Reserved, res)
	}
}
