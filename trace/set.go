package trace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"memscope/format"
)

// FileError is a file that could not be used, and why.
type FileError struct {
	Path string
	Err  error
}

func (e FileError) Error() string { return e.Err.Error() }

// Set is one run's traces: every rank found, plus the files that failed.
type Set struct {
	// Name is the directory (or file) the set came from.
	Name   string
	Ranks  []*Rank // ascending by rank
	Errors []FileError
}

// Rank returns the trace of rank n, or nil.
func (s *Set) Rank(n int) *Rank {
	for _, r := range s.Ranks {
		if r.Rank == n {
			return r
		}
	}
	return nil
}

var traceExts = []string{".json", ".log", ".txt", ".out", ".err"}

// DirectFiles lists the trace files directly in dir, by content.
func DirectFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); e.Type().IsRegular() && isTraceFile(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// FindFiles lists the trace files in dir and one level down, by content.
func FindFiles(dir string) ([]string, error) {
	var out []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var subdirs []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if !strings.HasPrefix(e.Name(), ".") {
				subdirs = append(subdirs, p)
			}
			continue
		}
		if isTraceFile(p) {
			out = append(out, p)
		}
	}
	for _, sd := range subdirs {
		es, err := os.ReadDir(sd)
		if err != nil {
			continue
		}
		for _, e := range es {
			if p := filepath.Join(sd, e.Name()); !e.IsDir() && isTraceFile(p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func isTraceFile(p string) bool {
	ok := false
	lower := strings.ToLower(p)
	for _, ext := range traceExts {
		if strings.HasSuffix(lower, ext) {
			ok = true
		}
	}
	if !ok {
		return false
	}
	k, err := format.SniffFile(p)
	return err == nil && k.IsTrace()
}

// lookedFor describes what FindFiles recognises, for error messages.
const lookedFor = "looked for Megatron memory_trace*.json, torchtitan memory exports (*.json) and training logs (*.log, *.txt, *.out), in the directory and one level down"

// LoadDir loads every trace file of a directory (see FindFiles).
func LoadDir(ctx context.Context, dir string) (*Set, error) {
	files, err := FindFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no trace files (%s)", dir, lookedFor)
	}
	s := LoadFiles(ctx, files)
	s.Name = dir
	return s, nil
}

// LoadPath loads a directory or a single file.
func LoadPath(ctx context.Context, path string) (*Set, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return LoadDir(ctx, path)
	}
	s := LoadFiles(ctx, []string{path})
	s.Name = path
	return s, nil
}

// LoadFiles parses files in parallel. Files that fail become Errors; when
// two files claim the same rank, the first (by path) is kept and the other
// is an error naming both.
func LoadFiles(ctx context.Context, files []string) *Set {
	type result struct {
		ranks []*Rank
		err   error
	}
	results := make([]result, len(files))
	var wg sync.WaitGroup
	next := make(chan int)
	workers := min(runtime.GOMAXPROCS(0), len(files))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := ctx.Err(); err != nil {
					results[i].err = err
					continue
				}
				results[i].ranks, results[i].err = readFileSafe(files[i])
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()

	s := &Set{}
	owner := map[int]string{}
	for i, r := range results {
		if r.err != nil {
			s.Errors = append(s.Errors, FileError{Path: files[i], Err: r.err})
			continue
		}
		for _, rk := range r.ranks {
			if rk.Rank < 0 {
				s.Errors = append(s.Errors, FileError{Path: files[i], Err: fmt.Errorf("%s: no rank number in the file name (expected \"rank<N>\")", files[i])})
				continue
			}
			if prev, dup := owner[rk.Rank]; dup {
				s.Errors = append(s.Errors, FileError{Path: files[i], Err: fmt.Errorf("%s: rank %d is also in %s; this file is ignored", files[i], rk.Rank, prev)})
				continue
			}
			owner[rk.Rank] = files[i]
			s.Ranks = append(s.Ranks, rk)
		}
	}
	slices.SortFunc(s.Ranks, func(a, b *Rank) int { return a.Rank - b.Rank })
	return s
}

// readFileSafe turns a parser panic into an error: one bad file must not
// take the others down.
func readFileSafe(path string) (r []*Rank, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s: internal error while parsing: %v", path, v)
		}
	}()
	return ReadFile(path)
}

// SplitRuns finds the real and simulated runs under a parent directory: its
// memory_traces/ and memory_traces_scaling/ (Megatron's defaults) or any two
// subdirectories holding trace files. Names with "sim" or "scaling" are the
// simulation, names with "real" the real run; otherwise the first
// alphabetically is taken as real, and note says so.
func SplitRuns(parent string) (real, sim, note string, err error) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return "", "", "", err
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if files, _ := DirectFiles(p); len(files) > 0 {
			dirs = append(dirs, p)
		}
	}
	if len(dirs) != 2 {
		if len(dirs) < 2 {
			return "", "", "", fmt.Errorf("%s: expected two run directories with traces (e.g. memory_traces/ and memory_traces_scaling/), found %d; give REAL and SIM instead", parent, len(dirs))
		}
		names := make([]string, len(dirs))
		for i, d := range dirs {
			names[i] = filepath.Base(d)
		}
		return "", "", "", fmt.Errorf("%s: %d directories hold traces (%s); give REAL and SIM", parent, len(dirs), strings.Join(names, ", "))
	}
	isSim := func(p string) bool {
		n := strings.ToLower(filepath.Base(p))
		return strings.Contains(n, "sim") || strings.Contains(n, "scaling")
	}
	isReal := func(p string) bool { return strings.Contains(strings.ToLower(filepath.Base(p)), "real") }
	a, b := dirs[0], dirs[1]
	switch {
	case isSim(b) && !isSim(a), isReal(a) && !isReal(b):
		return a, b, "", nil
	case isSim(a) && !isSim(b), isReal(b) && !isReal(a):
		return b, a, "", nil
	}
	return a, b, fmt.Sprintf("cannot tell which run is simulated; took %s as real and %s as simulated", filepath.Base(a), filepath.Base(b)), nil
}
