// Package estimate reads PyTorch-Memory-Profiler peak snapshots (tensor
// by tensor estimates of a device's peak, with module, phase and creation
// stacks) and analyses them: merged modules, the module tree, phases,
// stack groups, categories, and the estimate beside a measured snapshot.
package estimate

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"memscope/internal/budget"

	"memscope/internal/par"

	"memscope/internal/jsonscan"
	"memscope/snapshot"
)

// Tensor is one tensor of a PyTorch-Memory-Profiler peak snapshot.
type Tensor struct {
	Size   int64
	Shape  string
	Module string
	Phase  string
	// Create and Release are innermost frame first, like allocator stacks
	// (the file has Python's format_stack order, outermost first).
	Create, Release snapshot.Stack
}

// Device is one device key of a peak snapshot.
type Device struct {
	Device  string
	PeakMiB float64
	Tensors []Tensor
}

// Estimate is a PyTorch-Memory-Profiler peak snapshot
// (--save-peak-memory-snapshot): the tensors alive at the estimated peak.
type Estimate struct {
	Devices []Device
	// Warnings name what was odd but kept (sizes that disagree with
	// size_mb, stacks that are not frame strings, non-object devices, ...).
	Warnings []string
}

// Open reads a peak-snapshot JSON file.
func Open(ctx context.Context, path string) (*Estimate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	e, err := Decode(ctx, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}

// Decode parses a peak snapshot: {"cuda:0": {"peak_memory_mb",
// "tensors": [...]}, ...}. Devices are parsed in parallel; identical stack
// traces are parsed once.
func Decode(ctx context.Context, data []byte) (*Estimate, error) {
	return decodeWithin(ctx, data, budget.Limit(len(data)))
}

// decodeWithin is Decode holding at most limit bytes (budget.Limit; less
// in tests).
func decodeWithin(ctx context.Context, data []byte, limit int64) (*Estimate, error) {
	sc := jsonscan.New(data)
	type span struct {
		key        string
		start, end int
	}
	var spans []span
	est := &Estimate{}
	b := budget.NewMeter(limit)
	if sc.Peek() != '{' {
		return nil, sc.Errorf("peak snapshot: expected an object of devices")
	}
	// Find each device's bytes first, so the devices parse in parallel.
	err := sc.Object(func(kb []byte) error {
		if err := b.Take(deviceCost + int64(len(kb))); err != nil {
			return sc.Errorf("%v", err)
		}
		key := string(kb)
		start := sc.Pos()
		if sc.Peek() != '{' {
			est.Warnings = append(est.Warnings, fmt.Sprintf("device %q is not an object: skipped", key))
			return sc.Skip()
		}
		if err := sc.Skip(); err != nil {
			return fmt.Errorf("device %q: %w", key, err)
		}
		spans = append(spans, span{key, start, sc.Pos()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !sc.EOF() {
		return nil, sc.Errorf("data after the end of the peak snapshot")
	}
	est.Devices = make([]Device, len(spans))
	warns := make([][]string, len(spans))
	errs := make([]error, len(spans))
	interner := &stackStrings{m: map[uint64][]stackEntry{}, seed: maphash.MakeSeed()}
	var wg par.Group
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, sp := range spans {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			d, w, err := parseEstimateDevice(sp.key, data[sp.start:sp.end], interner, b)
			est.Devices[i], warns[i], errs[i] = d, w, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("device %q: %w", spans[i].key, err)
		}
		est.Warnings = append(est.Warnings, warns[i]...)
	}
	slices.SortStableFunc(est.Devices, func(a, b Device) int { return compareDeviceKeys(a.Device, b.Device) })
	return est, nil
}

// compareDeviceKeys puts GPUs first, "cuda:2" before "cuda:10", then the
// rest ("cpu") by name.
func compareDeviceKeys(a, b string) int {
	ga, gb := strings.HasPrefix(a, "cuda"), strings.HasPrefix(b, "cuda")
	if ga != gb {
		if ga {
			return -1
		}
		return 1
	}
	na, ea := deviceNum(a)
	nb, eb := deviceNum(b)
	if ea == nil && eb == nil && na != nb {
		return na - nb
	}
	return strings.Compare(a, b)
}

func deviceNum(k string) (int, error) {
	i := strings.LastIndexByte(k, ':')
	return strconv.Atoi(k[i+1:])
}

func parseEstimateDevice(key string, data []byte, in *stackStrings, b *budget.Meter) (Device, []string, error) {
	d := Device{Device: key, PeakMiB: math.NaN()}
	var warns []string
	extra := 0 // warnings past warnMax
	sc := jsonscan.New(data)
	_ = sc.Expect('{')
	sawTensors := false
	for first := true; ; first = false {
		more, err := sc.More('}', first)
		if err != nil {
			return d, nil, err
		}
		if !more {
			break
		}
		kb, err := sc.String()
		if err != nil {
			return d, nil, err
		}
		k := string(kb)
		if err := sc.Expect(':'); err != nil {
			return d, nil, err
		}
		switch k {
		case "peak_memory_mb":
			f, _, _, err := sc.Number()
			if err != nil {
				return d, nil, fmt.Errorf("peak_memory_mb: %w", err)
			}
			d.PeakMiB = f
		case "tensors":
			sawTensors = true
			if sc.Peek() != '[' {
				return d, nil, sc.Errorf("tensors: expected a list")
			}
			_ = sc.Expect('[')
			for f := true; ; f = false {
				more, err := sc.More(']', f)
				if err != nil {
					return d, nil, err
				}
				if !more {
					break
				}
				start := sc.Pos()
				t, w, err := parseTensor(sc, in)
				if err != nil {
					return d, nil, fmt.Errorf("tensors[%d]: %w", len(d.Tensors), err)
				}
				// The tensor and what it holds: at most its bytes of text.
				if err := b.Take(tensorCost + int64(sc.Pos()-start)); err != nil {
					return d, nil, sc.Errorf("tensors[%d]: %v", len(d.Tensors), err)
				}
				switch {
				case w == "":
				case len(warns) < warnMax:
					warns = append(warns, fmt.Sprintf("%s tensors[%d]: %s", key, len(d.Tensors), w))
				default:
					extra++
				}
				d.Tensors = append(d.Tensors, t)
			}
		default:
			if err := sc.Skip(); err != nil {
				return d, nil, err
			}
		}
	}
	if math.IsNaN(d.PeakMiB) {
		warns = append(warns, fmt.Sprintf("%s: no peak_memory_mb; the listed sum stands in for the peak", key))
	}
	if !sawTensors {
		warns = append(warns, fmt.Sprintf("%s: no tensors list", key))
	}
	if extra > 0 {
		warns = append(warns, fmt.Sprintf("… and %d more warnings like these", extra))
	}
	return d, warns, nil
}

// warnMax is how many of a device's tensor warnings are kept; the rest are
// counted (a file of millions of odd tensors made a warning each).
const warnMax = 20

// What the reader counts against its budget (package budget), besides a
// tensor's text: a device and a tensor. 100 MB of tensors of one field
// held 2.9 GB for 29 s before they counted, and 143 MB of empty devices 5
// GB for 192 s.
const (
	deviceCost = 512
	tensorCost = 192
)

func parseTensor(sc *jsonscan.Scanner, in *stackStrings) (Tensor, string, error) {
	t := Tensor{Size: -1}
	sizeMB := math.NaN()
	var warn []string
	if sc.Peek() != '{' {
		return t, "", sc.Errorf("expected a tensor object")
	}
	_ = sc.Expect('{')
	for first := true; ; first = false {
		more, err := sc.More('}', first)
		if err != nil {
			return t, "", err
		}
		if !more {
			break
		}
		kb, err := sc.String()
		if err != nil {
			return t, "", err
		}
		k := string(kb)
		if err := sc.Expect(':'); err != nil {
			return t, "", err
		}
		switch k {
		case "size_bytes":
			f, i, isInt, err := sc.Number()
			if err != nil {
				return t, "", fmt.Errorf("size_bytes: %w", err)
			}
			if !isInt {
				i = int64(f)
			}
			t.Size = i
		case "size_mb":
			if sizeMB, _, _, err = sc.Number(); err != nil {
				return t, "", fmt.Errorf("size_mb: %w", err)
			}
		case "shape", "module", "phase":
			var s string
			if sc.Peek() == '"' {
				b, err := sc.String()
				if err != nil {
					return t, "", err
				}
				s = in.str(b)
			} else if err := sc.Skip(); err != nil {
				return t, "", err
			}
			switch k {
			case "shape":
				t.Shape = s
			case "module":
				t.Module = s
			default:
				t.Phase = s
			}
		case "create_stack_trace", "stack_trace", "release_stack_trace":
			st, bad, err := in.stack(sc)
			if err != nil {
				return t, "", fmt.Errorf("%s: %w", k, err)
			}
			if bad {
				warn = append(warn, k+" holds entries that are not stack frame strings")
			}
			if k != "release_stack_trace" {
				// stack_trace is the writer's earlier name for the creation
				// stack.
				t.Create = st
			} else {
				t.Release = st
			}
		default:
			if err := sc.Skip(); err != nil {
				return t, "", err
			}
		}
	}
	switch {
	case t.Size < 0 && !math.IsNaN(sizeMB) && sizeMB >= 0:
		t.Size = int64(math.Round(sizeMB * (1 << 20)))
		warn = append(warn, "no size_bytes; size_mb used")
	case t.Size < 0:
		return t, "", fmt.Errorf("no usable size (size_bytes missing or negative)")
	case !math.IsNaN(sizeMB) && math.Abs(float64(t.Size)/(1<<20)-sizeMB) > 0.01+sizeMB*1e-6:
		warn = append(warn, fmt.Sprintf("size_bytes %d disagrees with size_mb %g; size_bytes used", t.Size, sizeMB))
	}
	if t.Module == "" {
		t.Module = "Unknown"
	}
	if t.Phase == "" {
		t.Phase = "unknown"
	}
	return t, strings.Join(warn, "; "), nil
}

// stackStrings interns strings and parsed stacks across the devices of a
// file: the same creation site repeats for thousands of tensors.
type stackStrings struct {
	mu   sync.Mutex
	m    map[uint64][]stackEntry
	strs map[string]string
	seed maphash.Seed
}

type stackEntry struct {
	raw   []byte
	stack snapshot.Stack
	bad   bool
}

func (s *stackStrings) str(b []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.strs == nil {
		s.strs = map[string]string{}
	}
	if v, ok := s.strs[string(b)]; ok {
		return v
	}
	v := string(b)
	s.strs[v] = v
	return v
}

// stack reads a list of format_stack strings, returning the parsed stack
// (innermost first) and whether some entries were not frames.
func (s *stackStrings) stack(sc *jsonscan.Scanner) (snapshot.Stack, bool, error) {
	if sc.Peek() == 'n' {
		_, err := sc.Literal()
		return snapshot.Stack{}, false, err
	}
	if sc.Peek() != '[' {
		if err := sc.Skip(); err != nil {
			return snapshot.Stack{}, false, err
		}
		return snapshot.Stack{}, true, nil
	}
	start := sc.Pos()
	if err := sc.Skip(); err != nil {
		return snapshot.Stack{}, false, err
	}
	raw := sc.Bytes(start, sc.Pos())
	if len(bytes.TrimSpace(raw)) <= 2 {
		return snapshot.Stack{}, false, nil // []
	}
	h := maphash.Bytes(s.seed, raw)
	s.mu.Lock()
	for _, e := range s.m[h] {
		if bytes.Equal(e.raw, raw) {
			s.mu.Unlock()
			return e.stack, e.bad, nil
		}
	}
	s.mu.Unlock()
	st, bad, err := parseStackList(raw)
	if err != nil {
		return snapshot.Stack{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Another device's goroutine may have parsed the same stack meanwhile:
	// equal stacks must share one slice (groups key on it).
	for _, e := range s.m[h] {
		if bytes.Equal(e.raw, raw) {
			return e.stack, e.bad, nil
		}
	}
	s.m[h] = append(s.m[h], stackEntry{raw: slices.Clone(raw), stack: st, bad: bad})
	return st, bad, nil
}

var reFrame = regexp.MustCompile(`File "([^"]*)", line (\d+), in ([^\n]*)\n?(?:[ \t]+([^\n]*))?`)

// parseStackList parses a JSON list of Python format_stack strings.
func parseStackList(raw []byte) (snapshot.Stack, bool, error) {
	sc := jsonscan.New(raw)
	_ = sc.Expect('[')
	var frames []snapshot.Frame
	var sources []string
	bad := false
	for first := true; ; first = false {
		more, err := sc.More(']', first)
		if err != nil {
			return snapshot.Stack{}, false, err
		}
		if !more {
			break
		}
		if sc.Peek() != '"' {
			bad = true
			if err := sc.Skip(); err != nil {
				return snapshot.Stack{}, false, err
			}
			continue
		}
		b, err := sc.String()
		if err != nil {
			return snapshot.Stack{}, false, err
		}
		ms := reFrame.FindAllSubmatch(b, -1)
		if len(ms) == 0 {
			bad = true
			continue
		}
		for _, m := range ms {
			line, _ := strconv.ParseInt(string(m[2]), 10, 64)
			frames = append(frames, snapshot.Frame{Filename: string(m[1]), Line: line, Name: strings.TrimSpace(string(m[3]))})
			sources = append(sources, strings.TrimSpace(string(m[4])))
		}
	}
	slices.Reverse(frames)
	slices.Reverse(sources)
	return snapshot.StackWithSources(frames, sources), bad, nil
}
