package snapshot

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/klauspost/compress/gzip"

	"memscope/format"
	"memscope/snapshot/pickle"
)

// maxGzipRatio bounds how much a gzip member may expand, so a small
// "zip bomb" cannot exhaust memory. Snapshot pickles compress 5-20x.
const maxGzipRatio = 200

// DefaultInflateMax is the most a gzip input may expand to by default,
// whatever its size (a 10 MB member could otherwise cost 2 GB at 200x);
// less when the machine has less memory available.
const DefaultInflateMax = 4 << 30

type inflateKey struct{}

// WithInflateMax returns a context under which a gzip input may expand to
// at most n bytes (the --max-inflate flag); n <= 0 keeps the default.
func WithInflateMax(ctx context.Context, n int64) context.Context {
	if n <= 0 {
		return ctx
	}
	return context.WithValue(ctx, inflateKey{}, n)
}

// InflateMax is the most a gzip input may expand to under ctx: the value
// given to WithInflateMax, else DefaultInflateMax or the memory available
// (MemAvailable on Linux), whichever is less.
func InflateMax(ctx context.Context) int64 {
	if n, ok := ctx.Value(inflateKey{}).(int64); ok {
		return n
	}
	if avail := memAvailable(); avail > 0 && avail < DefaultInflateMax {
		return avail
	}
	return DefaultInflateMax
}

// Open reads an allocator snapshot from a file: a pickle (protocols 2-5), a
// gzip-compressed pickle, the JSON form, or the HTML page written by
// torch.cuda._memory_viz (base64 pickle inside). Errors name the file.
func Open(ctx context.Context, path string) (*Snapshot, error) {
	return OpenProgress(ctx, path, nil)
}

// OpenProgress is Open with progress reports (0..1) while decoding; ctx
// cancels a long decode.
func OpenProgress(ctx context.Context, path string, progress func(float64)) (*Snapshot, error) {
	if s, err, ok := openMapped(ctx, path, progress); ok {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return s, nil
	}
	if s, err, ok := openGzipStream(ctx, path, progress); ok {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return s, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := decode(ctx, &data, progress)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// mapMin is the size from which a pickle file is memory-mapped rather than
// read into memory: below it the copy costs less than the mapping.
const mapMin = 8 << 20

// openMapped decodes a large raw pickle or JSON snapshot from a read-only
// mapping of the file. ok is false when the file is small, cannot be mapped
// or is another form (gzip, HTML), which are read instead.
func openMapped(ctx context.Context, path string, progress func(float64)) (s *Snapshot, err error, ok bool) {
	// The form is judged from bytes read, not mapped: the mapping is only
	// read under decodeMapped's fault guard (the file may be cut short
	// between the Stat and here).
	f, size, head, ok := openRegular(path, 64)
	if !ok {
		return nil, nil, false
	}
	defer f.Close()
	if size < mapMin || int64(int(size)) != size {
		return nil, nil, false
	}
	json := jsonStart(head)
	zipped := bytes.HasPrefix(head, format.ZipMagic)
	if !pickle.IsPickle(head) && json < 0 && !zipped {
		return nil, nil, false
	}
	data, unmap, err := mapFile(f, int(size))
	if err != nil {
		return nil, nil, false
	}
	if zipped {
		return decodeMappedTorchSave(ctx, data, unmap, f.ReadAt, progress)
	}
	if json >= 0 {
		// A JSON snapshot is read once, front to back, like a pickle:
		// what is read past is given back (a 6 GB file of bigtrain's
		// trace held all 6 GB while it was read into memory).
		s, err = decodeMappedJSON(ctx, data, json, unmap, progress)
		return s, err, true
	}
	s, err = decodeMapped(ctx, data, unmap, f.ReadAt, progress, dropPages(data))
	return s, err, true
}

// openRegular opens path when it is a regular file and reads its first n
// bytes (fewer when it is shorter); ok is false otherwise. The caller
// closes f.
func openRegular(path string, n int) (f *os.File, size int64, head []byte, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, nil, false
	}
	head = make([]byte, n)
	k, _ := f.ReadAt(head, 0)
	return f, st.Size(), head[:k], true
}

// jsonStart is where a JSON snapshot's value begins in head (past
// whitespace and a byte-order mark), or -1 when head does not begin one.
func jsonStart(head []byte) int {
	trimmed := bytes.TrimLeft(head, jsonSpace)
	if len(trimmed) == 0 || trimmed[0] != '{' && trimmed[0] != '[' {
		return -1
	}
	return len(head) - len(trimmed)
}

// jsonSpace is what may come before a JSON value.
const jsonSpace = " \t\r\n\xef\xbb\xbf"

// decodeMappedJSON is decodeMapped for a JSON snapshot starting at from.
func decodeMappedJSON(ctx context.Context, data []byte, from int, unmap func(), progress func(float64)) (*Snapshot, error) {
	defer unmap()
	drop := dropPages(data)
	if drop != nil && from > 0 {
		inner := drop
		drop = func(a, b int) { inner(a+from, b+from) }
	}
	return guardFaults(func() (*Snapshot, error) { return pickle.DecodeJSON(ctx, data[from:], progress, drop) })
}

// decodeMapped decodes a mapped pickle and unmaps it (see guardFaults);
// drop gives back the pages of data read past.
func decodeMapped(ctx context.Context, data []byte, unmap func(), readAt func([]byte, int64) (int, error), progress func(float64), drop func(from, to int)) (*Snapshot, error) {
	released := false
	release := func() {
		if !released {
			released = true
			unmap()
		}
	}
	defer release()
	return guardFaults(func() (*Snapshot, error) {
		return pickle.DecodeMapped(ctx, data, release, drop, readAt, progress)
	})
}

// guardFaults runs decode, which reads a mapped file, on this goroutine.
// Another program may truncate the file meanwhile; reading a page past its
// new end raises SIGBUS, which turns into an error here instead of killing
// the process.
func guardFaults(decode func() (*Snapshot, error)) (s *Snapshot, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			s, err = nil, errors.New("the file changed while it was read (truncated by another program?)")
		}
	}()
	return decode()
}

// ErrNotSnapshot is returned for data that is none of the snapshot forms.
var ErrNotSnapshot = pickle.ErrNotSnapshot

// Decode decodes a snapshot from memory, detecting the form by content.
func Decode(ctx context.Context, data []byte) (*Snapshot, error) {
	return decode(ctx, &data, nil)
}

// decode takes the input by pointer and clears it: a slice passed as an
// argument stays reachable from the caller's argument slot for the whole
// call, which would keep a file's worth of memory alive while the decoded
// graph is bound (measured: 208 MiB of a 208 MiB file).
func decode(ctx context.Context, in *[]byte, progress func(float64)) (*Snapshot, error) {
	data := *in
	*in = nil
	via := "" // "+gzip" for a compressed input
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		raw, err := gunzip(ctx, data)
		if err != nil {
			return nil, err
		}
		data = raw
		via = "+gzip"
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	trimmed := bytes.TrimLeft(data, jsonSpace)
	switch {
	case len(data) == 0:
		return nil, fmt.Errorf("empty file: %w", ErrNotSnapshot)
	case pickle.IsPickle(data):
		trimmed = nil
		s, err := pickle.DecodeSnapshot(ctx, &data, progress)
		if err != nil {
			return nil, err
		}
		s.Format += via
		return s, nil
	case bytes.HasPrefix(data, format.ZipMagic):
		trimmed = nil
		pkl, err := torchSavedPickle(ctx, data)
		if err != nil {
			return nil, err
		}
		data = nil
		if !pickle.IsPickle(pkl) {
			return nil, fmt.Errorf("torch.save archive: data.pkl is not a pickle: %w", ErrNotSnapshot)
		}
		s, err := pickle.DecodeSnapshot(ctx, &pkl, progress)
		if err != nil {
			return nil, fmt.Errorf("torch.save archive, data.pkl: %w", err)
		}
		s.Format = "torch.save archive (" + s.Format + ")" + via
		return s, nil
	case len(trimmed) > 0 && trimmed[0] == '<':
		payload, err := htmlPayload(trimmed)
		if err != nil {
			return nil, err
		}
		data, trimmed = nil, nil
		s, err := pickle.DecodeSnapshot(ctx, &payload, progress)
		if err != nil {
			return nil, fmt.Errorf("embedded snapshot: %w", err)
		}
		s.Format = "html (" + s.Format + ")" + via
		return s, nil
	case len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '['):
		s, err := pickle.DecodeJSON(ctx, trimmed, progress, nil)
		if err != nil {
			return nil, err
		}
		s.Format += via
		return s, nil
	}
	return nil, unrecognised(data[0])
}

func unrecognised(first byte) error {
	return fmt.Errorf("unrecognised content (first byte 0x%02x; expected a pickle, gzip, JSON, HTML or a torch.save archive): %w", first, ErrNotSnapshot)
}

// unknownForm reports whether head, the start of an input, can begin none
// of the forms decode reads (it may begin one only after head, past
// whitespace, when head is all whitespace).
func unknownForm(head []byte) bool {
	trimmed := bytes.TrimLeft(head, jsonSpace)
	if len(trimmed) == 0 {
		return false
	}
	switch {
	case pickle.IsPickle(head), len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b, bytes.HasPrefix(head, format.ZipMagic):
		return false
	case trimmed[0] == '<' || trimmed[0] == '{' || trimmed[0] == '[':
		return false
	}
	return true
}

func gunzip(ctx context.Context, data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	limit, why := inflateLimit(ctx, len(data))
	// The trailer's size (mod 4 GiB) is only a hint for the first
	// allocation, never trusted: the limit is checked on what comes out.
	var hint int64 = 64 << 10
	if n := len(data); n >= 4 {
		if h := int64(binary.LittleEndian.Uint32(data[n-4:])); h > 0 && h <= limit {
			hint = h
		}
	}
	out, err := readLimited(ctxReader{ctx, zr}, hint, limit)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, errPastLimit):
		return nil, fmt.Errorf("gzip: %s; refusing (a decompression bomb?)", why)
	case err != nil:
		return nil, fmt.Errorf("gzip: %w (file truncated?)", err)
	}
	return out, nil
}

// inflateLimit is the most a gzip member of size bytes may inflate to, and
// why (for the error that refuses it).
func inflateLimit(ctx context.Context, size int) (int64, string) {
	limit := int64(size)*maxGzipRatio + 1<<20
	why := fmt.Sprintf("expands more than %dx", maxGzipRatio)
	if abs := InflateMax(ctx); abs < limit {
		limit = abs
		why = fmt.Sprintf("expands past %d MiB (--max-inflate)", abs>>20)
	}
	return limit, why
}

// ctxReader stops reading once ctx is done: Ctrl-C while a large member
// inflates (gzip reads 32 KiB at a time, so within microseconds).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// htmlPayload extracts the base64 pickle from a _memory_viz HTML page:
// `const local_files = [{"name": "snapshot.pickle", "base64": "..."}]`.
func htmlPayload(page []byte) ([]byte, error) {
	key := []byte(`"base64"`)
	i := bytes.Index(page, key)
	if i < 0 {
		return nil, fmt.Errorf("HTML without an embedded snapshot (no \"base64\" field; only pages written by torch.cuda._memory_viz are understood): %w", ErrNotSnapshot)
	}
	rest := page[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil, fmt.Errorf("HTML: unterminated base64 field")
	}
	rest = rest[j+1:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil, fmt.Errorf("HTML: unterminated base64 field (file truncated?)")
	}
	enc := rest[:end]
	out := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Decode(out, enc)
	if err != nil {
		return nil, fmt.Errorf("HTML: embedded base64: %w", err)
	}
	return out[:n], nil
}
