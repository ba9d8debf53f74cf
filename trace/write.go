package trace

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// WriteMegatron writes iterations as a Megatron memory_trace JSON file,
// atomically: a temporary file in the same directory is renamed over path,
// so readers (and a crash) never see a half-written file.
func WriteMegatron(path string, its []Iteration) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<16)
	w.WriteString("{")
	for i := range its {
		it := &its[i]
		if i > 0 {
			w.WriteString(",")
		}
		fmt.Fprintf(w, "\n  %q: {\"samples\": [", it.Key)
		for j := range it.T {
			if j > 0 {
				w.WriteString(",")
			}
			w.WriteString("\n    {\"timestamp_s\": ")
			w.WriteString(pyNum(it.T[j]))
			w.WriteString(", \"reserved_memory_MB\": ")
			w.WriteString(pyNum(it.Reserved[j]))
			w.WriteString(", \"allocated_memory_MB\": ")
			w.WriteString(pyNum(it.Allocated[j]))
			w.WriteString("}")
		}
		w.WriteString("],\n    \"peak_allocated_MB\": " + pyNum(it.PeakAllocated))
		w.WriteString(", \"static_memory_MB\": " + pyNum(it.Static))
		w.WriteString(", \"theoretical_memory_MB\": " + pyNum(it.Theoretical))
		if it.Source != "" {
			fmt.Fprintf(w, ", \"source\": %q", it.Source)
		}
		w.WriteString("}")
	}
	w.WriteString("\n}\n")
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}

// pyNum formats a value as Python's json.dump would (NaN and Infinity
// literals for non-finite values).
func pyNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
