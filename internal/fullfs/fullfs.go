// Package fullfs plays a full disk for tests of writers that must survive
// one (record's appender).
package fullfs

import (
	"errors"
	"os"
	"sync/atomic"
)

// ErrNoSpace is what a write past the file's blocks returns while full.
var ErrNoSpace = errors.New("no space left on device")

// File is an *os.File whose writes, while Full is set, fit only in the
// blocks the file already has: what fits is written, the rest fails with
// ErrNoSpace (as a full filesystem does: overwriting allocated blocks
// still works).
type File struct {
	*os.File
	Full *atomic.Bool
}

// WriteAt implements io.WriterAt.
func (f File) WriteAt(p []byte, off int64) (int, error) {
	if f.Full != nil && f.Full.Load() {
		st, err := f.Stat()
		if err != nil {
			return 0, err
		}
		if room := st.Size() - off; int64(len(p)) > room {
			n, _ := f.File.WriteAt(p[:max(0, room)], off)
			return n, ErrNoSpace
		}
	}
	return f.File.WriteAt(p, off)
}
