package pickle

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"memscope/internal/pages"
)

// offHeap returns n zeroed Ts in anonymous memory outside the Go heap, or
// false when the kernel refuses (the caller then uses the heap). T must
// hold no pointers: the collector never scans this memory. With populate
// the pages are mapped at once (one call instead of a fault per page);
// without, as they are first written.
//
// Memory of a huge page or more starts on a huge page's boundary and asks
// for huge pages (pages.Huge): a trace's records are tens of MiB written
// once, and a fault per 4 KiB page was the largest part of the decode's
// system time (a 2 MiB page is one fault, where transparent huge pages are
// on for those who ask).
func offHeap[T any](n int, populate bool) ([]T, bool) {
	size := n * int(unsafe.Sizeof(*new(T)))
	if size >= pages.HugeSize {
		if s, ok := offHeapAligned[T](n, size, populate); ok {
			return s, true
		}
	}
	return offHeapPlain[T](n, size, populate)
}

// offHeapSmall is offHeap in pages of the smallest size, mapped as they
// are first written: for an array that usually holds a few records of a
// chunk's thousands (a huge page each would be 2 MiB of RSS for them).
func offHeapSmall[T any](n int) ([]T, bool) {
	return offHeapPlain[T](n, n*int(unsafe.Sizeof(*new(T))), false)
}

// offHeapPlain is offHeap for size bytes without asking for huge pages.
func offHeapPlain[T any](n, size int, populate bool) ([]T, bool) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if populate {
		flags |= unix.MAP_POPULATE
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, false
	}
	return unsafe.Slice((*T)(p), n), true
}

// offHeapAligned is offHeap for size bytes at a huge page's boundary: it
// maps a huge page more and gives back what lies outside the aligned
// range, so that the mapping is size bytes rounded up to a page, all of
// which freeOffHeap unmaps (munmap rounds its length up).
func offHeapAligned[T any](n, size int, populate bool) ([]T, bool) {
	page := os.Getpagesize()
	keep := (size + page - 1) / page * page
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(keep+pages.HugeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, false
	}
	b := unsafe.Slice((*byte)(p), keep+pages.HugeSize)
	skip := int((pages.HugeSize - uintptr(p)%pages.HugeSize) % pages.HugeSize)
	if skip > 0 {
		_ = unix.MunmapPtr(p, uintptr(skip))
	}
	if tail := b[skip+keep:]; len(tail) > 0 {
		_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(tail)), uintptr(len(tail)))
	}
	m := b[skip : skip+size : skip+size]
	pages.Huge(m)
	if populate && !pages.Populate(m) {
		pages.Prefault(m) // a kernel before 5.14: one write a page
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(m))), n), true
}

// freeOffHeap gives memory from offHeap back to the kernel at once. Nothing
// may read s afterwards: the pages are gone.
func freeOffHeap[T any](s []T) {
	if cap(s) == 0 {
		return
	}
	size := cap(s) * int(unsafe.Sizeof(*new(T)))
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(s)), uintptr(size))
}
