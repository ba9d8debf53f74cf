package pickle

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"memscope/internal/pages"
)

// resident is how many of s's pages are mapped (mincore), or -1 when none
// of its range is mapped at all.
func resident(t *testing.T, p unsafe.Pointer, size int) int {
	t.Helper()
	page := os.Getpagesize()
	vec := make([]byte, (size+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(p), uintptr(size), uintptr(unsafe.Pointer(&vec[0])))
	if errno == unix.ENOMEM {
		return -1
	} else if errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// vmSize is the process's mapped memory, from /proc/self/status.
func vmSize(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmSize:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmSize")
	return 0
}

// TestOffHeapHuge: off-heap memory of a huge page or more starts on a huge
// page's boundary; below, on any page. Either is zero, mapped at once when
// asked (populate) and as written when not, and all given back by
// freeOffHeap: the aligned path maps more than it keeps, and what it does
// not keep is given back at once, for a size that is not a whole number of
// pages too (64 rounds map no more at the end).
func TestOffHeapHuge(t *testing.T) {
	page := os.Getpagesize()
	for _, size := range []int{pages.HugeSize - page, pages.HugeSize, pages.HugeSize + 1, pages.HugeSize + page, 3 << 20} {
		for _, populate := range []bool{false, true} {
			s, ok := offHeap[byte](size, populate)
			if !ok {
				t.Fatalf("%d bytes: no memory", size)
			}
			p := unsafe.Pointer(unsafe.SliceData(s))
			if aligned := uintptr(p)%pages.HugeSize == 0; size >= pages.HugeSize && !aligned {
				t.Errorf("%d bytes at %p: not on a huge page's boundary", size, p)
			}
			pagesIn := (size + page - 1) / page
			switch n := resident(t, p, size); {
			case populate && n != pagesIn:
				t.Errorf("%d bytes, populated: %d of %d pages mapped", size, n, pagesIn)
			case !populate && n != 0:
				t.Errorf("%d bytes, not populated: %d pages mapped before a write", size, n)
			}
			if len(s) != size || cap(s) != size {
				t.Errorf("%d bytes: len %d cap %d", size, len(s), cap(s))
			}
			for i := 0; i < size; i += page / 2 {
				if s[i] != 0 {
					t.Fatalf("%d bytes: byte %d is %d", size, i, s[i])
				}
				s[i] = 1
			}
			freeOffHeap(s)
			if n := resident(t, p, size); n != -1 {
				t.Errorf("%d bytes: still mapped after freeOffHeap (%d pages)", size, n)
			}
		}
	}
	before := vmSize(t)
	for range 64 {
		s, _ := offHeap[rawTrace](chunkLen, false)
		freeOffHeap(s)
		b, _ := offHeap[byte](pages.HugeSize+1, false) // a size between pages
		freeOffHeap(b)
	}
	if grew := vmSize(t) - before; grew > 16<<20 {
		t.Errorf("64 chunks made and freed left %d MiB more mapped", grew>>20)
	}
}
