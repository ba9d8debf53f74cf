package pages

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// rusageThread is Linux's RUSAGE_THREAD: this thread's counts only.
const rusageThread = 1

func minorFaults(t *testing.T) int64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// readThenWrite reads every page of b, then writes every page, and returns
// the minor faults it took: what a hash table's probes and inserts do to
// fresh memory.
func readThenWrite(t *testing.T, b []byte) int64 {
	before := minorFaults(t)
	var sum byte
	for i := 0; i < len(b); i += stride {
		sum += b[i]
	}
	for i := 0; i < len(b); i += stride {
		b[i] = sum + 1
	}
	return minorFaults(t) - before
}

// TestPrefaultMapsPagesWritable: on fresh anonymous memory, reading a page
// before writing it costs a fault more than writing it (the zero page,
// then its replacement); after Prefault neither the read nor the write
// faults.
func TestPrefaultMapsPagesWritable(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const size = 16 << 20
	pages := int64(size / os.Getpagesize())
	fresh := func() []byte {
		b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Munmap(b) })
		// Pages of the base size, also where transparent huge pages are
		// always on (a huge page would fault once for 512 of them).
		if err := syscall.Madvise(b, syscall.MADV_NOHUGEPAGE); err != nil {
			t.Fatal(err)
		}
		return b
	}

	plain := readThenWrite(t, fresh())
	if plain < pages {
		t.Fatalf("fresh memory took %d faults for %d pages read then written: the test cannot see faults here", plain, pages)
	}
	t.Logf("without Prefault: %d faults for %d pages", plain, pages)

	b := fresh()
	before := minorFaults(t)
	Prefault(b)
	during := minorFaults(t) - before
	after := readThenWrite(t, b)
	if after > pages/100 {
		t.Errorf("after Prefault reading then writing %d pages took %d faults, want none", pages, after)
	}
	if during > pages+pages/100 {
		t.Errorf("Prefault took %d faults for %d pages, want one each", during, pages)
	}
	t.Logf("with Prefault: %d faults in it, %d after", during, after)
}

// TestPopulate: Populate maps fresh pages writable without changing a byte,
// and leaves memory already written as it was, around the page edges of a
// slice that does not start on one.
func TestPopulate(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const size = 16 << 20
	pages := int64(size / os.Getpagesize())
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(b) }()
	if err := syscall.Madvise(b, syscall.MADV_NOHUGEPAGE); err != nil {
		t.Fatal(err)
	}
	b[100] = 7 // a page already written, inside the populated range
	ok := Populate(b[101:])
	if b[101] != 0 || b[size-1] != 0 {
		t.Errorf("Populate wrote into fresh pages: %d %d", b[101], b[size-1])
	}
	after := readThenWrite(t, b[stride:])
	if !ok {
		t.Skipf("the kernel does not populate (MADV_POPULATE_WRITE is Linux 5.14): %d faults for %d pages after Populate", after, pages)
	}
	if after > pages/100 {
		t.Errorf("Populate said it mapped the pages, yet %d faults for %d pages after it", after, pages)
	}
	if b[100] != 7 || b[0] != 0 || b[99] != 0 {
		t.Errorf("Populate changed bytes before its slice: %d %d %d", b[0], b[99], b[100])
	}
	var none []uint64
	if !Populate(none) {
		t.Error("Populate of nothing failed")
	}
}
