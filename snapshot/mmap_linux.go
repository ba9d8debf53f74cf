package snapshot

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// mapFile maps a file read-only, its pages read in ahead (MAP_POPULATE):
// the pickle machine reads the page cache directly, with no copy on the Go
// heap, and unmapping gives the memory back at once rather than when the
// collector and scavenger get to it.
func mapFile(f *os.File, size int) ([]byte, func(), error) {
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() { _ = syscall.Munmap(data) }, nil
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
