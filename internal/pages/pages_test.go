package pages

import (
	"testing"
	"unsafe"
)

// withPointer is an element type with pointers in it; its fields are
// never read.
//
//lint:ignore U1000 the fields give the type its layout
type withPointer struct {
	p *int
	s string
	n int32
}

// TestPrefaultKeepsZero: every length around the stride, for element sizes
// that do and do not divide it, pointers included, stays all zero.
func TestPrefaultKeepsZero(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 4095, 4096, 4097, 3 * stride} {
		b := make([]byte, n)
		Prefault(b)
		for i, v := range b {
			if v != 0 {
				t.Fatalf("bytes, len %d: byte %d is %d", n, i, v)
			}
		}
		u := make([]uint64, n)
		Prefault(u)
		for i, v := range u {
			if v != 0 {
				t.Fatalf("uint64s, len %d: %d is %d", n, i, v)
			}
		}
		w := make([]withPointer, n)
		Prefault(w)
		for i, v := range w {
			if v != (withPointer{}) {
				t.Fatalf("structs of %d bytes, len %d: %d is %+v", unsafe.Sizeof(v), n, i, v)
			}
		}
	}
	var empty []uint64
	Prefault(empty) // no element to address: must not panic
	Prefault(make([]struct{}, 10))
}
