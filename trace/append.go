package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
)

// AppendFile is what an Appender writes through: an *os.File (tests give
// one that fails, to play a full disk).
type AppendFile interface {
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Close() error
}

// Appender keeps a one-iteration Megatron trace file (what `memscope
// record` writes) current by appending: each Append writes only the new
// samples, over the previous trailer, then the trailer again (the
// iteration's other fields). A flush costs what it adds, not the whole
// recording, and between flushes the file is the same valid JSON that
// WriteMegatron writes, so compare, --replay and the explorer read it
// while it grows, and recordings made before stay readable.
type Appender struct {
	f AppendFile
	// end is the offset just past the last sample in the file (where the
	// trailer starts), size the file's size, n the samples in it.
	end, size int64
	n         int
	// trailer is what follows the samples in the file now: written back
	// over a failed write, so the file stays readable.
	trailer []byte
	// head is the file's opening, written by the first write that
	// succeeds (nil once written).
	head []byte
}

// CreateAppender creates (or truncates) path as an empty recording of
// it's key and fields.
func CreateAppender(path string, it *Iteration) (*Appender, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	a, err := NewAppender(f, it)
	if err != nil {
		f.Close()
		return nil, err
	}
	return a, nil
}

// NewAppender starts a recording in f, which must be empty. The error is
// that of writing the empty recording; the Appender is usable all the
// same (a full disk at the start): the next Append writes the opening
// too.
func NewAppender(f AppendFile, it *Iteration) (*Appender, error) {
	a := &Appender{f: f, head: []byte(fmt.Sprintf("{\n  %q: {\"samples\": [", it.Key))}
	meta := *it
	meta.T, meta.Reserved, meta.Allocated = nil, nil, nil
	return a, a.Append(&meta)
}

// Samples is how many samples the file holds.
func (a *Appender) Samples() int { return a.n }

// Append writes it's samples (those not yet in the file: the caller keeps
// only those) and its fields. On error the file still holds every sample
// of the previous successful Append; the caller keeps the new ones and
// tries again.
func (a *Appender) Append(it *Iteration) error {
	var b bytes.Buffer
	b.Write(a.head) // nil once the opening is in the file
	w := bufio.NewWriter(&b)
	writeSamples(w, it, a.n > 0)
	w.Flush()
	added := b.Len()
	if err := a.write(a.end, b.Bytes(), it); err != nil {
		return err
	}
	a.end += int64(added)
	a.n += len(it.T)
	a.head = nil
	return nil
}

// write puts data at off, followed by it's trailer, syncs, and trims what
// a longer previous trailer left past the new end.
func (a *Appender) write(off int64, data []byte, it *Iteration) error {
	var b bytes.Buffer
	b.Write(data)
	w := bufio.NewWriter(&b)
	writeTrailer(w, it)
	w.WriteString("\n}\n")
	w.Flush()
	if _, err := a.f.WriteAt(b.Bytes(), off); err != nil {
		if a.trailer != nil {
			// Part of the write may have landed over the old trailer:
			// put it back (its blocks are allocated already, so this
			// succeeds on a full disk) and the file reads as before.
			a.f.WriteAt(a.trailer, a.end)
			a.f.Truncate(a.size)
		}
		return err
	}
	newSize := off + int64(b.Len())
	if newSize < a.size {
		if err := a.f.Truncate(newSize); err != nil {
			return err
		}
	}
	if err := a.f.Sync(); err != nil {
		return err
	}
	a.size = newSize
	a.trailer = slices.Clone(b.Bytes()[len(data):])
	return nil
}

// Close closes the file.
func (a *Appender) Close() error { return a.f.Close() }
