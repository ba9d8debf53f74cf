package pickle

import "unsafe"

// pageSize is the smallest page the kernels we run on map.
const pageSize = 4096

// freshSlice allocates n zero elements and writes a zero byte to each of
// their pages before anything else touches them.
//
// Why: storing pointers into new memory while the collector marks goes
// through the write barrier, which first reads the slot; and the collector
// may scan a large new object before it is filled. A page the kernel has
// not mapped yet is mapped as the shared zero page on that read, and the
// write that follows must replace it and flush the TLB of every core the
// process runs on. On a 2-core VM those flushes cost 0.3 s of system time
// in half the runs on an 80 MB snapshot (perf: do_wp_page under the
// binder). A plain write first maps a private page at once.
func freshSlice[T any](n int) []T {
	s := make([]T, n)
	if size := uintptr(n) * unsafe.Sizeof(*new(T)); size >= pageSize {
		b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size)
		for i := 0; i < len(b); i += pageSize {
			b[i] = 0
		}
	}
	return s
}
