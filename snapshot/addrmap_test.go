package snapshot

import (
	"math/rand/v2"
	"testing"
)

// TestAddrMapAgreesWithMap runs random puts, deletes, takes and gets against Go's
// map, over key sets that keep the table small, grow it past several
// doublings (its half-full limit, on both sides) and collide (keys that
// differ in their high bits only, and a few keys reused over and over).
func TestAddrMapAgreesWithMap(t *testing.T) {
	shapes := []struct {
		name string
		key  func(r *rand.Rand) uint64
		ops  int
	}{
		{"few aligned", func(r *rand.Rand) uint64 { return 0x7f0000000000 + 512*uint64(r.IntN(40)) }, 20000},
		{"many aligned", func(r *rand.Rand) uint64 { return 0x7f0000000000 + 512*uint64(r.IntN(5000)) }, 200000},
		{"high bits", func(r *rand.Rand) uint64 { return uint64(r.IntN(3000)) << 40 }, 100000},
		{"anything", func(r *rand.Rand) uint64 { return r.Uint64() % 100000 }, 200000},
	}
	for _, sh := range shapes {
		r := rand.New(rand.NewPCG(1, 2))
		m := newAddrMap(0)
		ref := map[uint64]int32{}
		for i := range sh.ops {
			k := sh.key(r)
			switch r.IntN(3) {
			case 0, 1:
				switch r.IntN(3) {
				case 0:
					m.Put(k, int32(i))
					ref[k] = int32(i)
				case 1:
					m.Delete(k)
					delete(ref, k)
				default:
					v, ok := m.Take(k)
					w, wok := ref[k]
					if v != w || ok != wok {
						t.Fatalf("%s, op %d: Take(%#x) = %d, %v; want %d, %v", sh.name, i, k, v, ok, w, wok)
					}
					delete(ref, k)
				}
			default:
				v, ok := m.Get(k)
				w, wok := ref[k]
				if v != w || ok != wok {
					t.Fatalf("%s, op %d: Get(%#x) = %d, %v; want %d, %v", sh.name, i, k, v, ok, w, wok)
				}
			}
			if m.Len() != len(ref) {
				t.Fatalf("%s, op %d: %d keys, want %d", sh.name, i, m.Len(), len(ref))
			}
		}
		seen := 0
		m.Range(func(k uint64, v int32) {
			if w, ok := ref[k]; !ok || w != v {
				t.Fatalf("%s: Range gave %#x=%d, want %d (%v)", sh.name, k, v, w, ok)
			}
			seen++
		})
		if seen != len(ref) {
			t.Fatalf("%s: Range gave %d keys, want %d", sh.name, seen, len(ref))
		}
	}
}

// TestAddrMapGrowth: the table doubles when a put would take it over half
// full, not before.
func TestAddrMapGrowth(t *testing.T) {
	m := newAddrMap(0)
	size := len(m.keys)
	for i := range size / 2 {
		m.Put(uint64(i)*512, int32(i))
	}
	if len(m.keys) != size {
		t.Fatalf("grew at %d keys of %d slots", m.Len(), size)
	}
	m.Put(1<<40, 1)
	if len(m.keys) != 2*size {
		t.Fatalf("%d keys in %d slots: did not double", m.Len(), len(m.keys))
	}
	for i := range size / 2 {
		if v, ok := m.Get(uint64(i) * 512); !ok || v != int32(i) {
			t.Fatalf("key %d lost in the doubling", i)
		}
	}
}
