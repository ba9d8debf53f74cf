package pages

import (
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14).
const madvPopulateWrite = 23

// Populate maps the pages of s writable in one call, for a writer about to
// fill them in order: a fault per page costs more in the trap than in the
// page. It changes no byte (pages already there stay as they are) and does
// nothing where the kernel does not know the call: false then.
func Populate[T any](s []T) bool {
	if len(s) == 0 {
		return true
	}
	var zero T
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	end := start + uintptr(len(s))*unsafe.Sizeof(zero)
	start &^= uintptr(syscall.Getpagesize()) - 1 // madvise wants a page's start
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateWrite)
	return errno == 0
}
