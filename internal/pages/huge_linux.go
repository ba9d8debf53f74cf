package pages

import (
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// madvHugepage is MADV_HUGEPAGE.
const madvHugepage = 14

// hugeOff is GODEBUG's disablethp=1, which asks Go's runtime to keep its
// heap off huge pages (for systems where they cost memory): Huge obeys it
// too. Read once, at start.
var hugeOff = strings.Contains(","+os.Getenv("GODEBUG")+",", ",disablethp=1,")

// Huge asks the kernel to back s's whole 2 MiB pages with huge pages where
// it maps them from now on. It changes no byte, and does nothing where
// transparent huge pages are off, GODEBUG has disablethp=1, or s holds no
// whole huge page.
func Huge[T any](s []T) {
	if hugeOff {
		return
	}
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
