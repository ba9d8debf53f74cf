package trace

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"memscope/internal/budget"

	"memscope/format"
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
	// The head only: Sniff's patterns over a whole file of 100 MB took a
	// second.
	k := format.Sniff(data[:min(len(data), format.HeadSize)])
	if k == format.Estimate && len(bytes.Join(bytes.Fields(data), nil)) == 2 {
		// {}: Megatron's tracker writes it before its first iteration.
		k = format.MegatronTrace
	}
	switch k {
	case format.MegatronTrace:
		r, err := ParseMegatron(path, data)
		if err != nil {
			return nil, err
		}
		return []*Rank{r}, nil
	case format.TitanExport:
		r, err := ParseTorchtitanExport(path, data)
		if err != nil {
			return nil, err
		}
		return []*Rank{r}, nil
	case format.MegatronLog, format.TitanLog:
		return ParseLog(path, data)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("empty file")
	}
	if !isBinaryOrJSON(data) {
		// Sniff looks at the head only; a file named explicitly is read
		// whole: its memory lines may come after a long preamble.
		if r, err := ParseLog(path, data); err == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("not a memory trace (expected Megatron memory_trace JSON, a torchtitan memory export or a training log)")
}

// ParseMegatron parses a Megatron memory_trace_rank*.json: an object of
// iterations ("0", "1", ...) each with samples and optional peak, static and
// theoretical memory (-1 = unset). NaN and Infinity literals are accepted;
// non-numeric iteration keys are skipped and named in Warnings.
func ParseMegatron(path string, data []byte) (*Rank, error) {
	r := &Rank{Rank: RankFromName(path), Path: path, Kind: format.MegatronTrace}
	sc := jsonscan.New(data)
	byNum := map[int]int{}
	var unknown unknownFields
	skipped := 0
	b := budget.NewMeter(budget.Limit(len(data)))
	// Iterations are kept in blocks and joined once at the end: one slice
	// of 240-byte structs grown by append was copied about five times
	// over (for 1.4M iterations, 1.7 GB of copies, most of the read).
	var blocks [][]Iteration
	n, badKeys := 0, 0
	err := sc.Object(func(kb []byte) error {
		if err := b.Take(iterationCost); err != nil {
			return sc.Errorf("%v", err)
		}
		key := string(kb)
		num, err := strconv.Atoi(key)
		if err != nil {
			if badKeys++; badKeys <= maxUnknown {
				r.Warnings = append(r.Warnings, fmt.Sprintf("iteration key %q is not a number: skipped", key))
			}
			return sc.Skip()
		}
		it := Iteration{Key: key, Num: num, X: Seconds, PeakAllocated: Unset, Static: Unset, Theoretical: Unset, FilePeak: Unset,
			TotalMemory: Unset, IntervalS: Unset}
		if err := parseIteration(sc, &it, &unknown, &skipped, b); err != nil {
			return fmt.Errorf("iteration %q: %w", key, err)
		}
		if i, dup := byNum[num]; dup {
			blocks[i/iterBlock][i%iterBlock] = it // JSON: the last duplicate key wins, as in json.load
			return nil
		}
		byNum[num] = n
		if n%iterBlock == 0 {
			blocks = append(blocks, make([]Iteration, 0, iterBlock))
		}
		blocks[len(blocks)-1] = append(blocks[len(blocks)-1], it)
		n++
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.Iterations = make([]Iteration, 0, n)
	for _, bl := range blocks {
		r.Iterations = append(r.Iterations, bl...)
	}
	if badKeys > maxUnknown {
		r.Warnings = append(r.Warnings, fmt.Sprintf("and %d more iteration keys that are not numbers skipped", badKeys-maxUnknown))
	}
	if !sc.EOF() {
		return nil, sc.Errorf("data after the end of the trace object")
	}
	r.Warnings = append(r.Warnings, unknown.warnings("unknown iteration field %q ignored")...)
	if skipped > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d samples without a finite timestamp_s or allocated_memory_MB skipped", skipped))
	}
	slices.Sort(r.Warnings)
	slices.SortFunc(r.Iterations, func(a, b Iteration) int { return a.Num - b.Num })
	if n := markCumulativePeaks(r.Iterations); n > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("peak_allocated_MB is cumulative (never reset between iterations) in %d iterations: their own maximum sample is used", n))
	}
	return r, nil
}

// iterBlock is how many iterations ParseMegatron keeps in a block.
const iterBlock = 1024

// cumulativeTol is how far (MiB) a written peak may sit above the samples'
// maximum, or from a neighbour's peak, and still count as the same value:
// the fork rounds peak_allocated_MB to two decimals (at most 0.005 off).
const cumulativeTol = 0.006

// markCumulativePeaks finds iterations whose peak_allocated_MB equals a
// neighbouring iteration's and lies above their own samples: the fork's
// torch.cuda.max_memory_allocated() was not reset, so the value is the
// run's peak so far, not the iteration's. It returns how many it marked.
func markCumulativePeaks(its []Iteration) int {
	n := 0
	same := func(i, j int) bool {
		return j >= 0 && j < len(its) && its[i].FilePeak >= 0 && its[j].FilePeak >= 0 &&
			math.Abs(its[i].FilePeak-its[j].FilePeak) <= cumulativeTol
	}
	for i := range its {
		it := &its[i]
		if !same(i, i-1) && !same(i, i+1) {
			continue
		}
		if own := maxOf(it.Allocated); !math.IsNaN(own) && it.FilePeak-own > cumulativeTol {
			it.PeakCumulative = true
			it.PeakAllocated = Unset
			n++
		}
	}
	return n
}

func parseIteration(sc *jsonscan.Scanner, it *Iteration, unknown *unknownFields, skipped *int, b *budget.Meter) error {
	if sc.Peek() != '{' {
		return sc.Errorf("expected an object for the iteration")
	}
	return sc.Object(func(kb []byte) error {
		var err error
		switch string(kb) {
		case "samples":
			if err := parseSamples(sc, it, skipped, b); err != nil {
				return fmt.Errorf("samples: %w", err)
			}
		case "peak_allocated_MB":
			if it.PeakAllocated, err = optNumber(sc); err != nil {
				return fmt.Errorf("peak_allocated_MB: %w", err)
			}
			it.FilePeak = it.PeakAllocated
		case "static_memory_MB":
			if it.Static, err = optPositive(sc); err != nil {
				return fmt.Errorf("static_memory_MB: %w", err)
			}
		case "theoretical_memory_MB":
			if it.Theoretical, err = optPositive(sc); err != nil {
				return fmt.Errorf("theoretical_memory_MB: %w", err)
			}
		case "total_memory_MB":
			if it.TotalMemory, err = optPositive(sc); err != nil {
				return fmt.Errorf("total_memory_MB: %w", err)
			}
		case "interval_s":
			if it.IntervalS, err = optPositive(sc); err != nil {
				return fmt.Errorf("interval_s: %w", err)
			}
		case "source", "device_name":
			if sc.Peek() != '"' {
				return sc.Skip()
			}
			b, err := sc.String()
			if err != nil {
				return err
			}
			if string(kb) == "source" {
				it.Source = string(b)
			} else {
				it.DeviceName = string(b)
			}
		default:
			unknown.add(kb)
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

// optPositive reads a memory line's value: only values above 0 are lines
// (the fork's visualizer draws them only then); anything else is unset.
func optPositive(sc *jsonscan.Scanner) (float64, error) {
	v, err := optNumber(sc)
	if err != nil || v <= 0 {
		return Unset, err
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
// Samples without a finite time or allocated value are skipped (counted in
// skipped): they cannot be placed on a chart, and one NaN must not poison
// a peak or a duration.
func parseSamples(sc *jsonscan.Scanner, it *Iteration, skipped *int, b *budget.Meter) error {
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
		if !finite(t) || !finite(alloc) {
			*skipped++
			continue
		}
		if !finite(res) {
			res = math.NaN()
		}
		if err := b.Take(sampleCost); err != nil {
			return sc.Errorf("%v", err)
		}
		it.T = append(it.T, t)
		it.Allocated = append(it.Allocated, alloc)
		it.Reserved = append(it.Reserved, res)
	}
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
