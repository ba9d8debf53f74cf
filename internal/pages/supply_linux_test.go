package pages

import (
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

func mapped(t *testing.T, n int) []byte {
	t.Helper()
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// isMapped says whether the page at p is mapped (mincore fails with ENOMEM
// on a hole).
func isMapped(p unsafe.Pointer) bool {
	var vec [1]byte
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(p), uintptr(syscall.Getpagesize()), uintptr(unsafe.Pointer(&vec[0])))
	return errno == 0
}

// TestSupplyCover: Cover moves given pages, with their bytes, onto the
// whole pages inside a range that starts and ends mid-page, and leaves the
// partial pages at both ends alone; writing the moved pages faults no
// more; a supply smaller than the range covers what it holds, then
// nothing.
func TestSupplyCover(t *testing.T) {
	runtime.LockOSThread() // minorFaults counts this thread's
	defer runtime.UnlockOSThread()
	page := syscall.Getpagesize()
	src := mapped(t, 16*page)
	for i := range src {
		src[i] = 0xab
	}
	var sup Supply
	Give(&sup, src)
	dst := mapped(t, 16*page)
	defer syscall.Munmap(dst)
	// [100, 100+10 pages): its whole pages are 1 to 9.
	got := Cover(&sup, dst[100:100+10*page])
	if want := uintptr(9 * page); got != want {
		t.Fatalf("covered %d bytes, want %d", got, want)
	}
	if dst[page] != 0xab || dst[10*page-1] != 0xab {
		t.Errorf("the covered pages do not hold the given bytes: %#x %#x", dst[page], dst[10*page-1])
	}
	if dst[page-1] != 0 || dst[10*page] != 0 {
		t.Errorf("a page partly outside the range was covered: %#x %#x", dst[page-1], dst[10*page])
	}
	before := minorFaults(t)
	for i := page; i < 10*page; i += page {
		dst[i] = 1
	}
	if f := minorFaults(t) - before; f != 0 {
		t.Errorf("writing the covered pages took %d faults", f)
	}
	// 7 pages left for a range of 15 whole ones.
	dst2 := mapped(t, 16*page)
	defer syscall.Munmap(dst2)
	if got := Cover(&sup, dst2[:15*page]); got != uintptr(7*page) {
		t.Errorf("an emptying supply covered %d bytes, want %d", got, 7*page)
	}
	if dst2[6*page] != 0xab || dst2[7*page] != 0 {
		t.Errorf("an emptying supply covered the wrong pages: %#x %#x", dst2[6*page], dst2[7*page])
	}
	if got := Cover(&sup, dst2[8*page:]); got != 0 {
		t.Errorf("an empty supply covered %d bytes", got)
	}
	// A range of no whole page takes none, whatever the supply holds.
	more := mapped(t, 4*page)
	Give(&sup, more)
	if got := Cover(&sup, dst2[8*page+1:9*page+page/2]); got != 0 {
		t.Errorf("a range without a whole page was covered (%d bytes)", got)
	}
	sup.Release()
}

// TestSupplyRelease: what the supply still holds is unmapped by Release,
// and only that.
func TestSupplyRelease(t *testing.T) {
	page := syscall.Getpagesize()
	a, b := mapped(t, 4*page), mapped(t, 4*page)
	var sup Supply
	Give(&sup, a)
	Give(&sup, b)
	dst := mapped(t, 2*page)
	defer syscall.Munmap(dst)
	Cover(&sup, dst) // takes b's first two pages (the last given first)
	sup.Release()
	for _, c := range []struct {
		p    unsafe.Pointer
		want bool
	}{{unsafe.Pointer(&a[0]), false}, {unsafe.Pointer(&a[3*page]), false}, {unsafe.Pointer(&b[2*page]), false},
		{unsafe.Pointer(&dst[0]), true}, {unsafe.Pointer(&dst[page]), true}} {
		if got := isMapped(c.p); got != c.want {
			t.Errorf("page %p mapped %v after Release, want %v", c.p, got, c.want)
		}
	}
	if len(sup.spans) != 0 {
		t.Errorf("%d spans held after Release", len(sup.spans))
	}
}

// TestSupplyTrim: Trim unmaps what the supply holds past keep bytes, the
// memory given first going first, page by page; keeping all it holds or
// more unmaps nothing, and what is kept still covers.
func TestSupplyTrim(t *testing.T) {
	page := syscall.Getpagesize()
	a, b := mapped(t, 4*page), mapped(t, 4*page)
	defer syscall.Munmap(b)
	var sup Supply
	Give(&sup, a)
	Give(&sup, b)
	pages := func(s []byte) (n int) {
		for i := 0; i < len(s); i += page {
			if isMapped(unsafe.Pointer(&s[i])) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		keep         int // pages
		inA, inB     int // pages of a and b still mapped after
		spans, total int
	}{
		{keep: 9, inA: 4, inB: 4, spans: 2, total: 8}, // more than held
		{keep: 8, inA: 4, inB: 4, spans: 2, total: 8}, // exactly held
		{keep: 5, inA: 1, inB: 4, spans: 2, total: 5}, // a's first three pages go
		{keep: 4, inA: 0, inB: 4, spans: 1, total: 4}, // a's last one too
	} {
		sup.Trim(uintptr(c.keep * page))
		held := 0
		for _, sp := range sup.spans {
			held += int(sp.n) / page
		}
		if pages(a) != c.inA || pages(b) != c.inB || len(sup.spans) != c.spans || held != c.total {
			t.Errorf("keep %d pages: a %d, b %d mapped, %d spans of %d pages; want %d, %d, %d, %d",
				c.keep, pages(a), pages(b), len(sup.spans), held, c.inA, c.inB, c.spans, c.total)
		}
	}
	dst := mapped(t, 4*page)
	defer syscall.Munmap(dst)
	if n := Cover(&sup, dst); n != uintptr(4*page) {
		t.Errorf("after trimming, the supply covers %d bytes, want %d", n, 4*page)
	}
	sup.Trim(0)
	if len(sup.spans) != 0 {
		t.Errorf("Trim(0) left %d spans", len(sup.spans))
	}
}
