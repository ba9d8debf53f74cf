package snapshot

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"memscope/format"
	"memscope/snapshot/pickle"
)

// torch.save (PyTorch 1.6 on) writes a zip archive: the saved object's
// pickle as <name>/data.pkl, stored, then its tensors' storages, none for
// a snapshot's dict. torch.save(torch.cuda.memory._snapshot(), "s.pt")
// is read from that pickle (protocol 2, with no persistent ids when no
// tensor is in it).

// torchSavedPickle returns the bytes of data.pkl in the zip archive data:
// a part of data when stored, as torch.save stores it, else inflated,
// within the limit a gzip input has.
func torchSavedPickle(ctx context.Context, data []byte) ([]byte, error) {
	f, err := dataPklMember(data)
	if err != nil {
		return nil, err
	}
	if f.Method == zip.Store {
		off, n, err := storedRange(f, len(data))
		if err != nil {
			return nil, err
		}
		return data[off : off+n], nil
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("zip archive, %s: %w", f.Name, err)
	}
	defer rc.Close()
	limit, why := inflateLimit(ctx, int(min(f.CompressedSize64, uint64(len(data)))))
	out, err := readLimited(ctxReader{ctx, rc}, int64(min(f.UncompressedSize64, uint64(limit))), limit)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, errPastLimit):
		return nil, fmt.Errorf("zip archive, %s: %s; refusing (a decompression bomb?)", f.Name, why)
	case err != nil:
		return nil, fmt.Errorf("zip archive, %s: %w (file truncated?)", f.Name, err)
	}
	return out, nil
}

// errPastLimit: readLimited met more than its limit.
var errPastLimit = errors.New("past the limit")

// readLimited reads r to its end into a slice of room for hint bytes
// first, which never grows past limit+1 (errPastLimit beyond): grown by
// doubling as bytes.Buffer grows, a member refused at 200 MiB had taken
// 540 MB.
func readLimited(r io.Reader, hint, limit int64) ([]byte, error) {
	out := make([]byte, 0, min(hint, limit)+1)
	for {
		if len(out) == cap(out) {
			if int64(len(out)) > limit {
				return nil, errPastLimit
			}
			grown := make([]byte, len(out), min(int64(cap(out))*2, limit+1))
			copy(grown, out)
			out = grown
		}
		n, err := r.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		switch {
		case int64(len(out)) > limit:
			return nil, errPastLimit
		case err == io.EOF:
			return out, nil
		case err != nil:
			return nil, err
		}
	}
}

// dataPklMember is the data.pkl member of the zip archive data.
func dataPklMember(data []byte) (*zip.File, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are never used as paths
		return nil, fmt.Errorf("zip archive: %w", err)
	}
	for _, m := range zr.File {
		if format.IsTorchDataPkl(m.Name) {
			return m, nil
		}
	}
	return nil, fmt.Errorf("a zip archive without data.pkl, so not what torch.save writes: %w", ErrNotSnapshot)
}

// storedRange is where stored member f lies in an archive of size bytes.
func storedRange(f *zip.File, size int) (off, n int64, err error) {
	off, err = f.DataOffset()
	if err != nil {
		return 0, 0, fmt.Errorf("zip archive, %s: %w", f.Name, err)
	}
	if c := f.CompressedSize64; off < 0 || off > int64(size) || c != f.UncompressedSize64 || c > uint64(int64(size)-off) {
		return 0, 0, fmt.Errorf("zip archive, %s: %d bytes at %d do not fit in the file's %d (truncated?)", f.Name, c, off, size)
	}
	return off, int64(f.CompressedSize64), nil
}

// decodeMappedTorchSave decodes the stored data.pkl of a mapped torch.save
// archive where it lies, as decodeMapped a pickle file: pages given back
// as they are read past, the file's other members never read. ok is false
// (and data unmapped) when its data.pkl is not stored: it is then read
// from the file and inflated.
func decodeMappedTorchSave(ctx context.Context, data []byte, unmap func(), readAt func([]byte, int64) (int, error), progress func(float64)) (s *Snapshot, err error, ok bool) {
	var off, n int64
	var stored bool
	// Every read of the mapping is under the fault guard: the archive's
	// directory lies at its end, which a file cut short no longer has.
	_, err = guardFaults(func() (*Snapshot, error) {
		f, err := dataPklMember(data)
		if err != nil || f.Method != zip.Store {
			return nil, err
		}
		stored = true
		if off, n, err = storedRange(f, len(data)); err != nil {
			return nil, err
		}
		if !pickle.IsPickle(data[off : off+min(n, 8)]) {
			return nil, fmt.Errorf("torch.save archive: data.pkl is not a pickle: %w", ErrNotSnapshot)
		}
		return nil, nil
	})
	if err != nil || !stored {
		unmap()
		return nil, err, err != nil
	}
	drop := dropPages(data)
	if whole, at := drop, int(off); whole != nil {
		drop = func(a, b int) { whole(a+at, b+at) }
	}
	s, err = decodeMapped(ctx, data[off:off+n], unmap, func(p []byte, pos int64) (int, error) { return readAt(p, pos+off) }, progress, drop)
	if err != nil {
		return nil, fmt.Errorf("torch.save archive, data.pkl: %w", err), true
	}
	s.Format = "torch.save archive (" + s.Format + ")"
	return s, nil, true
}
