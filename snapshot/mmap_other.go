//go:build !linux

package snapshot

import (
	"context"
	"errors"
	"os"
)

// mapFile is implemented on Linux only; elsewhere files are read.
func mapFile(*os.File, int) ([]byte, func(), error) {
	return nil, nil, errors.New("memory-mapping is implemented on Linux only")
}

// dropPages has nothing to give back where nothing is mapped.
func dropPages([]byte) func(from, to int) { return nil }

// memAvailable is unknown outside Linux: the default ceiling applies.
func memAvailable() int64 { return 0 }

// openGzipStream is implemented on Linux only: elsewhere a gzip input is
// inflated whole, then decoded.
func openGzipStream(context.Context, string, func(float64)) (*Snapshot, error, bool) {
	return nil, nil, false
}
