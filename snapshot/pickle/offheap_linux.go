package pickle

import (
	"syscall"
	"unsafe"
)

// offHeap returns n zeroed Ts in anonymous memory outside the Go heap, or
// false when the kernel refuses (the caller then uses the heap). T must
// hold no pointers: the collector never scans this memory. With populate
// the pages are mapped at once (one call instead of a fault per page);
// without, as they are first written.
func offHeap[T any](n int, populate bool) ([]T, bool) {
	size := n * int(unsafe.Sizeof(*new(T)))
	flags := syscall.MAP_PRIVATE | syscall.MAP_ANONYMOUS
	if populate {
		flags |= syscall.MAP_POPULATE
	}
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, flags)
	if err != nil {
		return nil, false
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), true
}

// freeOffHeap gives memory from offHeap back to the kernel at once. Nothing
// may read s afterwards: the pages are gone.
func freeOffHeap[T any](s []T) {
	if cap(s) == 0 {
		return
	}
	size := cap(s) * int(unsafe.Sizeof(*new(T)))
	_ = syscall.Munmap(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size))
}
