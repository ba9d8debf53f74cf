package trace

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// createTemp opens a new temporary file beside path with mode 0644 less
// the umask (os.CreateTemp would make it 0600, unreadable to the rest of a
// team sharing a trace folder).
func createTemp(path string) (*os.File, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	for i := 0; ; i++ {
		name := filepath.Join(dir, fmt.Sprintf(".tmp-%s-%d-%d", base, os.Getpid(), rand.Uint32()))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil || !errors.Is(err, fs.ErrExist) || i == 100 {
			return f, err
		}
	}
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err // some filesystems cannot sync a directory: not an error
	}
	return nil
}

// WriteMegatron writes iterations as a Megatron memory_trace JSON file,
// atomically and durably: a temporary file in the same directory is
// synced and renamed over path, then the directory is synced, so readers
// (and a crash) never see a half-written file.
func WriteMegatron(path string, its []Iteration) error {
	f, err := createTemp(path)
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
		writeSamples(w, it, false)
		writeTrailer(w, it)
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
	return syncDir(filepath.Dir(path))
}

// writeSamples writes it's samples, separated by commas; lead puts one
// before the first too (samples already precede them in the file).
func writeSamples(w *bufio.Writer, it *Iteration, lead bool) {
	for j := range it.T {
		if j > 0 || lead {
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
}

// writeTrailer closes an iteration's samples and writes its other fields.
func writeTrailer(w *bufio.Writer, it *Iteration) {
	w.WriteString("],\n    \"peak_allocated_MB\": " + pyNum(it.PeakAllocated))
	w.WriteString(", \"static_memory_MB\": " + pyNum(it.Static))
	w.WriteString(", \"theoretical_memory_MB\": " + pyNum(it.Theoretical))
	if it.Source != "" {
		fmt.Fprintf(w, ", \"source\": %q", it.Source)
	}
	if it.TotalMemory > 0 {
		w.WriteString(", \"total_memory_MB\": " + pyNum(it.TotalMemory))
	}
	if it.IntervalS > 0 {
		w.WriteString(", \"interval_s\": " + pyNum(it.IntervalS))
	}
	if it.DeviceName != "" {
		b, _ := json.Marshal(it.DeviceName)
		w.WriteString(", \"device_name\": ")
		w.Write(b)
	}
	w.WriteString("}")
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
