//go:build !linux

package pickle

// offHeap is implemented on Linux only; elsewhere chunks are on the heap.
func offHeap[T any](int, bool) ([]T, bool) { return nil, false }

// offHeapSmall is implemented on Linux only, as offHeap is.
func offHeapSmall[T any](int) ([]T, bool) { return nil, false }

// freeOffHeap has nothing to free where offHeap gives nothing.
func freeOffHeap[T any]([]T) {}
