//go:build !linux

package snapshot

import (
	"errors"
	"os"
)

// mapFile is implemented on Linux only; elsewhere files are read.
func mapFile(*os.File, int) ([]byte, func(), error) {
	return nil, nil, errors.New("memory-mapping is implemented on Linux only")
}
