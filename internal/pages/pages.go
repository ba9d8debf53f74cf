// Package pages makes the first touch of fresh memory cheap: Prefault
// makes it a write, Populate maps a range a writer is about to fill at once.
// ReleaseImage gives back the program's own pages that only its start
// used.
//
// A page the process has never touched is mapped on first use. When that
// use is a read (a hash table's probe, a `+=` into a counter array), the
// kernel maps its shared zero page, and the write that follows faults
// again to replace it, which also flushes the page from the TLB of every
// core the process runs on (an interprocessor interrupt each). On the
// frame-pool snapshot those second faults were 8% of the decode and
// analysis' CPU (`perf record`: do_wp_page under the stack table's probe,
// the series' deltas and the stack traits).
package pages

import "unsafe"

// stride is the smallest page size of the platforms Go runs on: a larger
// page takes several writes, which cost nothing more than one.
const stride = 4096

// HugeSize is the transparent huge page of x86-64, and of arm64 with 4 KiB
// pages: Huge advises whole ones of this size.
const HugeSize = 2 << 20

// hugeMin is the size from which Prefault asks for huge pages.
const hugeMin = 4 << 20

// Prefault writes a zero byte into every page of s. s must be all zero
// (just made): the writes then change nothing, pointers included, and each
// page is mapped once, by a write, before anything reads it.
func Prefault[T any](s []T) {
	if len(s) == 0 {
		return
	}
	var zero T
	n := uintptr(len(s)) * unsafe.Sizeof(zero)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n)
	if n >= hugeMin {
		Huge(b)
	}
	for i := uintptr(0); i < n; i += stride {
		b[i] = 0
	}
}
