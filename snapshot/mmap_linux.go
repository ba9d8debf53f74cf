package snapshot

import (
	"fmt"
	"os"
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
