package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

var (
	// [Rank 3] (after 10 iterations) memory (MB) | allocated: 9554.87 | max allocated: 12003.60 | reserved: 12232.0 | max reserved: 12232.0
	reMegatronLine = regexp.MustCompile(`(?:\[Rank (\d+)\])?.*?\(after (\d+) iterations\) memory \(MB\) \| allocated: ([-+\d.eE]+) \| max allocated: ([-+\d.eE]+) \| reserved: ([-+\d.eE]+) \| max reserved: ([-+\d.eE]+)`)
	// Theoretical memory footprints: weight and optimizer=W MB, activation=A MB, total=T MB
	reTheoryLine = regexp.MustCompile(`Theoretical memory footprints: weight and optimizer=([\d.eE+-]+) MB(?:, activation=([\d.eE+-]+) MB, total=([\d.eE+-]+) MB)?`)
	// [rank0]:[titan] 2025-06-04 08:51:48,074 - root - INFO - step:  1  loss: 12.2254  memory: 27.34GiB(28.78%)  tps: 375
	reTitanLine = regexp.MustCompile(`(?:\[rank(\d+)\])?.*?step:\s*(\d+)\b.*?memory:\s*([\d.]+)\s*GiB(?:\(([\d.]+)%\))?`)
)

// logSeries accumulates one rank's values from a log.
type logSeries struct {
	steps, alloc, res []float64
	seen              map[int]int // step -> index (a restarted run logs a step again: the later line wins)
}

func (s *logSeries) add(step int, alloc, res float64) {
	if s.seen == nil {
		s.seen = map[int]int{}
	}
	if i, ok := s.seen[step]; ok {
		s.alloc[i], s.res[i] = alloc, res
		return
	}
	s.seen[step] = len(s.steps)
	s.steps = append(s.steps, float64(step))
	s.alloc = append(s.alloc, alloc)
	s.res = append(s.res, res)
}

// ParseLog reads memory lines from a Megatron or torchtitan training log:
// one Rank per rank that logged, each a single step-based series. Megatron
// lines give max allocated and max reserved per logged iteration (MiB);
// torchtitan lines give max reserved (GiB, converted to MiB) per step. ANSI
// colour codes are ignored. Lines without a rank prefix belong to the rank
// in the file name, else rank 0.
func ParseLog(path string, data []byte) ([]*Rank, error) {
	defRank := RankFromName(path)
	if defRank < 0 {
		defRank = 0
	}
	series := map[int]*logSeries{}
	kinds := map[int]Kind{}
	theoretical := Unset
	get := func(rank int, k Kind) *logSeries {
		s := series[rank]
		if s == nil {
			s = &logSeries{}
			series[rank] = s
			kinds[rank] = k
		}
		return s
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	bad := 0
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.IndexByte(line, 0x1b) >= 0 {
			line = reANSI.ReplaceAll(line, nil)
		}
		switch {
		case bytes.Contains(line, []byte("memory (MB) | allocated:")):
			m := reMegatronLine.FindSubmatch(line)
			if m == nil {
				bad++
				continue
			}
			rank := defRank
			if len(m[1]) > 0 {
				rank, _ = strconv.Atoi(string(m[1]))
			}
			step, _ := strconv.Atoi(string(m[2]))
			maxAlloc, err1 := strconv.ParseFloat(string(m[4]), 64)
			maxRes, err2 := strconv.ParseFloat(string(m[6]), 64)
			if err1 != nil || err2 != nil {
				bad++
				continue
			}
			get(rank, KindMegatronLog).add(step, maxAlloc, maxRes)
		case bytes.Contains(line, []byte("Theoretical memory footprints")):
			if m := reTheoryLine.FindSubmatch(line); m != nil {
				v := m[1]
				if len(m[3]) > 0 {
					v = m[3]
				}
				if f, err := strconv.ParseFloat(string(v), 64); err == nil {
					theoretical = f
				}
			}
		case bytes.Contains(line, []byte("memory:")) && bytes.Contains(line, []byte("step:")):
			m := reTitanLine.FindSubmatch(line)
			if m == nil {
				continue
			}
			rank := defRank
			if len(m[1]) > 0 {
				rank, _ = strconv.Atoi(string(m[1]))
			}
			step, _ := strconv.Atoi(string(m[2]))
			gib, err := strconv.ParseFloat(string(m[3]), 64)
			if err != nil {
				bad++
				continue
			}
			get(rank, KindTorchtitanLog).add(step, nan(), gib*1024)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(series) == 0 {
		if theoretical >= 0 {
			return nil, fmt.Errorf("only a theoretical memory line; no per-iteration memory lines")
		}
		return nil, fmt.Errorf("no memory lines found (looked for Megatron \"(after N iterations) memory (MB)\" and torchtitan \"step: N ... memory: X GiB\")")
	}
	var out []*Rank
	for rank, s := range series {
		r := &Rank{Rank: rank, Path: path, Kind: kinds[rank]}
		it := Iteration{Key: "log", Num: 0, X: Steps, T: s.steps, Allocated: s.alloc, Reserved: s.res,
			PeakAllocated: Unset, Static: Unset, Theoretical: Unset}
		// Megatron prints the estimate once, on rank 0; it describes every
		// rank of a uniform layout.
		if kinds[rank] == KindMegatronLog {
			it.Theoretical = theoretical
		}
		sortSeries(&it)
		r.Iterations = []Iteration{it}
		if bad > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d memory lines could not be parsed", bad))
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Rank) int { return a.Rank - b.Rank })
	return out, nil
}

// sortSeries orders a step series by step.
func sortSeries(it *Iteration) {
	idx := make([]int, len(it.T))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case it.T[a] < it.T[b]:
			return -1
		case it.T[a] > it.T[b]:
			return 1
		}
		return 0
	})
	t, a, r := make([]float64, len(idx)), make([]float64, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		t[i], a[i], r[i] = it.T[j], it.Allocated[j], it.Reserved[j]
	}
	it.T, it.Allocated, it.Reserved = t, a, r
}
