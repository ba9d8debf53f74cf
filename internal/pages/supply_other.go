//go:build !linux

package pages

// Supply moves pages on Linux only (see the Linux version); here it holds
// nothing, and callers free what they would give it themselves.
type Supply struct{}

// Give does nothing here: memory is not mapped apart from the heap.
func Give[T any](*Supply, []T) {}

// Cover covers nothing here.
func Cover[T any](*Supply, []T) uintptr { return 0 }

// Trim has nothing to unmap.
func (*Supply) Trim(uintptr) {}

// Release has nothing to unmap.
func (*Supply) Release() {}
