package snapshot

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/klauspost/compress/gzip"

	"memscope/internal/pages"
	"memscope/snapshot/pickle"
)

// inflateAhead is how far the inflater may run past what the decoder has
// read: the window of inflated bytes resident at once (plus dropLag and
// the decoder's dropStep of 4 MiB), unless the decoder asks for more.
const inflateAhead = 16 << 20

// dropLag is how far behind what the decoder has read inflated bytes are
// kept (pickle.Stream.Keep).
const dropLag = 1 << 20

// segment is the unit in which the inflater reuses the pages the decoder
// has read past (a huge page): moved ahead of it with mremap, they are
// written again without a fault. Writing 190 MB into fresh pages took
// the inflater 170-250 ms against 95-130 into the same ones, and made it
// slower than the decoder.
const segment = 2 << 20

// openGzipStream decodes a gzip-compressed snapshot while it inflates: the
// member inflates on another goroutine into a reserved mapping, at most
// inflateAhead bytes ahead of the decoder, which gives back what it has
// read. A pickle of protocol 4 or later (PyTorch's default) is decoded
// frame by frame as it comes, on one machine; any other content (older
// protocols, JSON, HTML) once it has all arrived, as before. ok is false
// when path is not gzip, no mapping could be reserved, or the stream must
// be decoded again (pickle.ErrStacksAlike): the caller then inflates it
// whole.
func openGzipStream(ctx context.Context, path string, progress func(float64)) (s *Snapshot, err error, ok bool) {
	f, size, head, ok := openRegular(path, 2)
	if !ok {
		return nil, nil, false
	}
	defer f.Close()
	if len(head) < 2 || head[0] != 0x1f || head[1] != 0x8b {
		return nil, nil, false
	}
	limit, why := inflateLimit(ctx, int(size))
	hint := 0
	if trailer := make([]byte, 4); size >= 4 {
		if n, _ := f.ReadAt(trailer, size-4); n == 4 {
			hint = gzipSizeHint(trailer, limit)
		}
	}
	buf, unmap, err := reserve(limit + 1)
	if err != nil {
		return nil, nil, false
	}
	// The compressed file is read as it inflates, not held: a file
	// rewritten meanwhile is a gzip error, never a fault.
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 256<<10))
	if err != nil {
		unmap()
		return nil, fmt.Errorf("gzip: %w", err), true
	}
	z := newInflater(ctx, buf)
	go z.run(zr, why)
	defer func() {
		z.stop() // before the mapping goes: the inflater writes into it
		unmap()
	}()
	got, err := z.wait(3)
	if err != nil {
		return nil, err, true
	}
	if pickle.Framed(buf[:got]) {
		stream := &pickle.Stream{Buf: buf, Wait: z.wait, Size: hint, Keep: dropLag}
		s, err = pickle.DecodeStream(ctx, stream, z.drop, progress)
		if errors.Is(err, pickle.ErrStacksAlike) {
			// What it read is gone: the file is read again, inflated
			// whole, by a decode that compares every stack.
			return nil, nil, false
		}
	} else if got, err = z.wait(64); err == nil && got > 0 && unknownForm(buf[:got]) {
		// Refused at once, not once a bomb of it has inflated.
		err = unrecognised(buf[0])
	} else if err == nil {
		var all int
		if all, err = z.wait(len(buf)); err == nil {
			raw := buf[:all]
			s, err = decode(ctx, &raw, progress)
		}
	}
	if err != nil {
		return nil, err, true
	}
	s.Format += "+gzip"
	return s, nil, true
}

// reserve maps size bytes of address space for inflated input: pages come
// in as they are written, as huge pages (the inflater writes them in
// full: 2 MiB at a fault, not 4 KiB).
func reserve(size int64) ([]byte, func(), error) {
	if int64(int(size)) != size {
		return nil, nil, errors.New("too large to map")
	}
	buf, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, nil, err
	}
	pages.Huge(buf)
	return buf, func() { _ = syscall.Munmap(buf) }, nil
}

// gzipSizeHint is the size a gzip member's trailer says it inflates to
// (mod 4 GiB), for progress only; 0 when it cannot be right.
func gzipSizeHint(trailer []byte, limit int64) int {
	if hint := int64(binary.LittleEndian.Uint32(trailer)); hint > 0 && hint <= limit {
		return int(hint)
	}
	return 0
}

// inflater inflates into buf on its own goroutine (run), publishing how
// much is final (avail); the decoder waits for bytes (wait) and gives back
// what it has read (drop), which lets the inflater go on.
type inflater struct {
	buf    []byte
	ctx    context.Context
	cancel context.CancelFunc
	avail  atomic.Int64 // bytes final
	read   atomic.Int64 // what the decoder has read past
	want   atomic.Int64 // the most the decoder has waited for
	done   atomic.Bool  // avail is final; err is set
	err    error
	// more and room carry one wake-up each (capacity 1): avail or done
	// changed; read or want changed.
	more, room chan struct{}
	finished   chan struct{} // closed when run has returned
	// mu guards freed: buf[:freed] has been given back (moved ahead, or
	// dropped). Segments are aligned on base, buf's first 2 MiB boundary.
	mu        sync.Mutex
	freed     int
	base      int
	noRecycle bool // a move failed: pages are only dropped
}

func newInflater(ctx context.Context, buf []byte) *inflater {
	z := &inflater{buf: buf, more: make(chan struct{}, 1), room: make(chan struct{}, 1), finished: make(chan struct{})}
	z.ctx, z.cancel = context.WithCancel(ctx)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	z.base = int((addr+segment-1)&^(segment-1) - addr)
	return z
}

// dead is where what the decoder may still read begins.
func (z *inflater) dead() int { return int(z.read.Load()) - dropLag }

// recycle gives the segment at `to` (not yet written) the pages of the
// oldest segment the decoder has read past, when there is one; the hole
// left behind reads as zeros, as a dropped page does.
func (z *inflater) recycle(to int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.noRecycle || z.freed < z.base || z.freed+segment > z.dead() {
		return
	}
	src, dst := unsafe.Pointer(&z.buf[z.freed]), unsafe.Pointer(&z.buf[to])
	if err := moveSegment(src, dst); err != nil {
		z.noRecycle = true
		return
	}
	z.freed += segment
}

// moveSegment moves the pages at src to dst (both a segment, aligned) and
// maps zero pages at src again.
func moveSegment(src, dst unsafe.Pointer) error {
	const mremapMaymove, mremapFixed = 1, 2
	if _, _, errno := syscall.Syscall6(syscall.SYS_MREMAP, uintptr(src), segment, segment, mremapMaymove|mremapFixed, uintptr(dst), 0); errno != 0 {
		return errno
	}
	_, _, errno := syscall.Syscall6(syscall.SYS_MMAP, uintptr(src), segment, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE|syscall.MAP_FIXED, ^uintptr(0), 0)
	if errno != 0 {
		// The decoder never reads there (see dropLag), but a failed map
		// leaves a hole: give no more moves a chance to leave another.
		return errno
	}
	return nil
}

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run inflates zr into buf until it ends, fails, fills buf (a member that
// expands past the limit: why says which) or the context ends.
func (z *inflater) run(zr io.Reader, why string) {
	defer close(z.finished)
	pos := 0
	defer func() {
		if r := recover(); r != nil { // no input may take the process down
			z.err = fmt.Errorf("gzip: internal error while inflating: %v", r)
		}
		z.done.Store(true) // after err: wait reads err once it sees done
		wake(z.more)
	}()
	for {
		for pos-int(z.read.Load()) >= inflateAhead && pos >= int(z.want.Load()) {
			select {
			case <-z.room:
			case <-z.ctx.Done():
				z.err = z.ctx.Err()
				return
			}
		}
		if err := z.ctx.Err(); err != nil {
			z.err = err
			return
		}
		// Reads stop at each segment's start, where the segment gets
		// the pages of one read past (recycle).
		hi := min(pos+256<<10, len(z.buf))
		if pos < z.base {
			hi = min(hi, z.base)
		} else if off := (pos - z.base) % segment; off == 0 {
			if pos+segment <= len(z.buf) {
				z.recycle(pos)
			}
		} else {
			hi = min(hi, pos-off+segment)
		}
		n, err := zr.Read(z.buf[pos:hi])
		pos += n
		if n > 0 {
			z.avail.Store(int64(pos))
			wake(z.more)
		}
		switch {
		case pos == len(z.buf): // one byte past the limit
			z.err = fmt.Errorf("gzip: %s; refusing (a decompression bomb?)", why)
			return
		case errors.Is(err, io.EOF):
			return
		case err != nil:
			z.err = fmt.Errorf("gzip: %w (file truncated?)", err)
			return
		}
	}
}

// wait blocks until n bytes are final or the input is complete, and
// returns how many are final (see pickle.Stream).
func (z *inflater) wait(n int) (int, error) {
	if int64(n) > z.want.Load() {
		z.want.Store(int64(n))
		wake(z.room)
	}
	for {
		// A full buffer is one byte past the limit: the inflater's error
		// says so once it is done.
		if a := int(z.avail.Load()); a >= n && a < len(z.buf) {
			return a, nil
		}
		if z.done.Load() {
			return int(z.avail.Load()), z.err
		}
		select {
		case <-z.more:
		case <-z.ctx.Done():
			return int(z.avail.Load()), z.ctx.Err()
		}
	}
}

// drop lets the inflater go on past what the decoder has read, and gives
// back the pages read past (but the last dropLag bytes) that it will not
// move ahead: those before the first segment, and all once it is done.
func (z *inflater) drop(_, to int) {
	z.read.Store(int64(to))
	wake(z.room)
	z.mu.Lock()
	defer z.mu.Unlock()
	end := z.dead() &^ (os.Getpagesize() - 1)
	if !z.done.Load() && !z.noRecycle {
		end = min(end, z.base)
	}
	if end > z.freed {
		_ = syscall.Madvise(z.buf[z.freed:end], syscall.MADV_DONTNEED)
		z.freed = end
	}
}

// stop ends the inflater and waits for it.
func (z *inflater) stop() {
	z.cancel()
	<-z.finished
}
