package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"memscope/internal/budget"

	"memscope/format"
)

var (
	// [Rank 3] (after 10 iterations) memory (MB) | allocated: 9554.87 | max allocated: 12003.60 | reserved: 12232.0 | max reserved: 12232.0
	reMegatronLine = regexp.MustCompile(`\(after (\d+) iterations\) memory \(MB\) \| allocated: ([-+\d.eE]+) \| max allocated: ([-+\d.eE]+) \| reserved: ([-+\d.eE]+) \| max reserved: ([-+\d.eE]+)`)
	// Theoretical memory footprints: weight and optimizer=W MB, activation=A MB, total=T MB
	// (a fork writes "Theoretical memory footprints (estimated): ...").
	reTheoryLine = regexp.MustCompile(`Theoretical memory footprints(?:\s*\([^)]*\))?:\s*weight and optimizer=([\d.eE+-]+) MB(?:, activation=([\d.eE+-]+) MB, total=([\d.eE+-]+) MB)?`)
	// [rank0]:[titan] 2025-06-04 08:51:48,074 - root - INFO - step:  1  loss: 12.2254  memory: 27.34GiB(28.78%)  tps: 375
	// (a fork adds "peak: 30.12GiB").
	reTitanStep = regexp.MustCompile(`\bstep:\s*(\d+)\b`)
	reTitanMem  = regexp.MustCompile(`\bmemory:\s*([\d.]+)\s*GiB`)
	reTitanPeak = regexp.MustCompile(`\bpeak:\s*([\d.]+)\s*GiB`)
	reEvalWord  = regexp.MustCompile(`(?i)\b(?:validat\w*|eval\w*)\b`)

	// Rank markers, strongest first: Megatron's own "[Rank N]", torchrun's
	// "[rankN]:", srun -l's "N: " at the start of the line, torchelastic's
	// "[defaultN]:". They are looked for only before the memory figures, so
	// timestamps and logger fields may come first.
	reRankMarkers = []*regexp.Regexp{
		regexp.MustCompile(`\[Rank (\d+)\]`),
		regexp.MustCompile(`(?i)\[rank\s*(\d+)\]`),
		regexp.MustCompile(`^\s*(\d+):\s`),
		regexp.MustCompile(`\[default(\d+)\]`),
	}
)

// rankIn finds the rank marker in a line's prefix; -1 when there is none.
func rankIn(prefix []byte) int {
	for _, re := range reRankMarkers {
		if m := re.FindSubmatch(prefix); m != nil {
			if n, err := strconv.Atoi(string(m[1])); err == nil {
				return n
			}
		}
	}
	return -1
}

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
// torchtitan lines give max reserved (GiB, converted to MiB) per step, and
// the fork's "peak:" field as allocated. The rank comes from a marker before
// the figures (see reRankMarkers), else the file name, else 0. ANSI colour
// codes are ignored, CRLF and carriage-return progress output are split
// into lines, and validation/evaluation steps are not training steps.
func ParseLog(path string, data []byte) ([]*Rank, error) {
	defRank := RankFromName(path)
	if defRank < 0 {
		defRank = 0
	}
	series := map[int]*logSeries{}
	kinds := map[int]format.Kind{}
	theoretical := Unset
	b := budget.NewMeter(budget.Limit(len(data)))
	var over error // the budget spent: reading stops
	get := func(rank int, k format.Kind) *logSeries {
		s := series[rank]
		if s == nil {
			s = &logSeries{}
			series[rank] = s
			kinds[rank] = k
			if err := b.Take(logRankCost); err != nil && over == nil {
				over = fmt.Errorf("%d ranks: %w", len(series), err)
			}
		}
		if err := b.Take(sampleCost); err != nil && over == nil {
			over = err
		}
		return s
	}
	rankOf := func(prefix []byte) int {
		if r := rankIn(prefix); r >= 0 {
			return r
		}
		return defRank
	}
	bad := 0
	evals := map[int]int{}
	handle := func(line []byte) {
		if bytes.IndexByte(line, 0x1b) >= 0 {
			line = reANSI.ReplaceAll(line, nil)
		}
		switch {
		case bytes.Contains(line, []byte("memory (MB) | allocated:")):
			m := reMegatronLine.FindSubmatchIndex(line)
			if m == nil {
				bad++
				return
			}
			step, _ := strconv.Atoi(string(line[m[2]:m[3]]))
			maxAlloc, err1 := strconv.ParseFloat(string(line[m[6]:m[7]]), 64)
			maxRes, err2 := strconv.ParseFloat(string(line[m[10]:m[11]]), 64)
			if err1 != nil || err2 != nil {
				bad++
				return
			}
			get(rankOf(line[:m[0]]), format.MegatronLog).add(step, maxAlloc, maxRes)
		case bytes.Contains(line, []byte("Theoretical memory footprints")):
			if m := reTheoryLine.FindSubmatch(line); m != nil {
				v := m[1]
				if len(m[3]) > 0 {
					v = m[3]
				}
				if f, err := strconv.ParseFloat(string(v), 64); err == nil && f > 0 {
					theoretical = f
				}
			}
		case bytes.Contains(line, []byte("memory:")) && bytes.Contains(line, []byte("step:")):
			st := reTitanStep.FindSubmatchIndex(line)
			mem := reTitanMem.FindSubmatch(line)
			if st == nil || mem == nil {
				return
			}
			prefix := line[:st[0]]
			if reEvalWord.Match(prefix) {
				evals[rankOf(prefix)]++
				return
			}
			step, _ := strconv.Atoi(string(line[st[2]:st[3]]))
			gib, err := strconv.ParseFloat(string(mem[1]), 64)
			if err != nil {
				bad++
				return
			}
			alloc := nan()
			if pk := reTitanPeak.FindSubmatch(line); pk != nil {
				if f, err := strconv.ParseFloat(string(pk[1]), 64); err == nil {
					alloc = f * 1024
				}
			}
			get(rankOf(prefix), format.TitanLog).add(step, alloc, gib*1024)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for over == nil && sc.Scan() {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		// Progress bars redraw a line with \r: each part is a line.
		for len(line) > 0 {
			k := bytes.IndexByte(line, '\r')
			if k < 0 {
				handle(line)
				break
			}
			handle(line[:k])
			line = line[k+1:]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if over != nil {
		return nil, over
	}
	if len(series) == 0 {
		if theoretical > 0 {
			// A log with only the estimate: a rank with no samples still
			// carries the theoretical line.
			it := Iteration{Key: "log", Num: 0, X: Steps, PeakAllocated: Unset, Static: Unset, Theoretical: theoretical, FilePeak: Unset}
			return []*Rank{{Rank: defRank, Path: path, Kind: format.MegatronLog, Iterations: []Iteration{it},
				Warnings: []string{"only the theoretical memory line: no per-iteration memory lines"}}}, nil
		}
		return nil, fmt.Errorf("no memory lines found (looked for Megatron \"(after N iterations) memory (MB)\" and torchtitan \"step: N ... memory: X GiB\")")
	}
	var out []*Rank
	for rank, s := range series {
		r := &Rank{Rank: rank, Path: path, Kind: kinds[rank]}
		it := Iteration{Key: "log", Num: 0, X: Steps, T: s.steps, Allocated: s.alloc, Reserved: s.res,
			PeakAllocated: Unset, Static: Unset, Theoretical: Unset, FilePeak: Unset}
		// Megatron prints the estimate once, on rank 0; it describes every
		// rank of a uniform layout.
		if kinds[rank] == format.MegatronLog {
			it.Theoretical = theoretical
		}
		sortSeries(&it)
		r.Iterations = []Iteration{it}
		if bad > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d memory lines could not be parsed", bad))
		}
		if n := evals[rank]; n > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d validation/evaluation lines are not training steps: skipped", n))
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
	perm := func(v []float64) []float64 {
		if v == nil {
			return nil
		}
		out := make([]float64, len(idx))
		for i, j := range idx {
			out[i] = v[j]
		}
		return out
	}
	it.T, it.Allocated, it.Reserved, it.Active = perm(it.T), perm(it.Allocated), perm(it.Reserved), perm(it.Active)
	slices.SortStableFunc(it.Marks, func(a, b Mark) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	})
}

// reANSI matches the colour codes torchtitan prints around its fields.
var reANSI = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// isBinaryOrJSON says data is not a log: a NUL byte, or JSON.
func isBinaryOrJSON(data []byte) bool {
	if bytes.IndexByte(data[:min(len(data), 4096)], 0) >= 0 {
		return true
	}
	t := bytes.TrimLeft(data, " \t\r\n\xef\xbb\xbf")
	return len(t) > 0 && t[0] == '{'
}
