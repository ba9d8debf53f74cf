package pages

import (
	"syscall"
	"unsafe"
)

// madvHugepage is MADV_HUGEPAGE.
const madvHugepage = 14

// Huge asks the kernel to back s's whole 2 MiB pages with huge pages where
// it maps them from now on. It changes no byte, and does nothing where
// transparent huge pages are off or s holds no whole huge page.
func Huge[T any](s []T) {
	var zero T
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	end := start + uintptr(len(s))*unsafe.Sizeof(zero)
	lo := (start + HugeSize - 1) &^ (HugeSize - 1)
	hi := end &^ (HugeSize - 1)
	if hi <= lo {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, madvHugepage)
}
