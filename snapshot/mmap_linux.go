package snapshot

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// mapFile maps a file read-only for one sequential pass: the pickle machine
// reads the page cache directly, with no copy on the Go heap, and unmapping
// gives the memory back at once rather than when the collector and
// scavenger get to it. Pages come in as they are read (MADV_SEQUENTIAL
// reads ahead), and dropPages gives back those the machines are done with,
// so a large file is never resident in the process all at once.
func mapFile(f *os.File, size int) ([]byte, func(), error) {
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL)
	return data, func() { _ = syscall.Munmap(data) }, nil
}

// dropPages returns a function that gives back the pages of mapping data
// within [from, to) (shrunk to whole pages): they leave the process's
// resident set and stay in the page cache, so a later read maps them again.
func dropPages(data []byte) func(from, to int) {
	page := os.Getpagesize()
	return func(from, to int) {
		from = (from + page - 1) &^ (page - 1)
		to = min(to, len(data)) &^ (page - 1)
		if from < to {
			_ = syscall.Madvise(data[from:to], syscall.MADV_DONTNEED)
		}
	}
}

// memAvailable is the memory the kernel can give without swapping
// (MemAvailable in /proc/meminfo), or 0 when it cannot be read.
func memAvailable() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
