package snapshot

import (
	"math/bits"

	"memscope/internal/pages"
)

// addrMap maps allocation addresses to int32 values: the open allocations
// of a replay, the blocks of an allocator state. It is an open-addressing
// table with linear probing and backward-shift deletion (no tombstones), so
// a million puts and deletes over a few thousand live keys stay in cache;
// Go's map spent 40 ms on bigtrain's replay.
type addrMap struct {
	keys  []uint64
	vals  []int32
	used  []bool
	n     int
	shift uint // 64 - log2(len(keys))
}

// addrMapMinSize is the smallest table.
const addrMapMinSize = 64

func newAddrMap(hint int) *addrMap {
	m := &addrMap{}
	m.init(max(addrMapMinSize, 1<<bits.Len(uint(hint*2))))
	return m
}

func (m *addrMap) init(size int) {
	m.keys = make([]uint64, size)
	m.vals = make([]int32, size)
	m.used = make([]bool, size)
	// Probes read them before any write.
	pages.Prefault(m.keys)
	pages.Prefault(m.vals)
	pages.Prefault(m.used)
	m.shift = uint(64 - bits.TrailingZeros(uint(size)))
	m.n = 0
}

// slot is where key's probe starts. Addresses are aligned (512 bytes for
// the caching allocator), so the multiplication mixes the high bits down.
func (m *addrMap) slot(key uint64) int {
	return int((key * 0x9E3779B97F4A7C15) >> m.shift)
}

// Len is the number of keys.
func (m *addrMap) Len() int { return m.n }

// Get returns key's value.
func (m *addrMap) Get(key uint64) (int32, bool) {
	mask := len(m.keys) - 1
	for i := m.slot(key); m.used[i]; i = (i + 1) & mask {
		if m.keys[i] == key {
			return m.vals[i], true
		}
	}
	return 0, false
}

// Put sets key's value.
func (m *addrMap) Put(key uint64, v int32) {
	// Doubled past half full: a replay of random frees deletes as often
	// as it adds, and a deletion shifts back the rest of its probe run,
	// 8 slots on average at 3/4 full, 2.5 at 1/2 (Analyze on the random-
	// frees pools 8-17% faster, the table's few MiB twice as large).
	if 2*(m.n+1) > len(m.keys) {
		old := *m
		m.init(2 * len(old.keys))
		for i, u := range old.used {
			if u {
				m.Put(old.keys[i], old.vals[i])
			}
		}
	}
	mask := len(m.keys) - 1
	i := m.slot(key)
	for ; m.used[i]; i = (i + 1) & mask {
		if m.keys[i] == key {
			m.vals[i] = v
			return
		}
	}
	m.keys[i], m.vals[i], m.used[i] = key, v, true
	m.n++
}

// Delete removes key.
func (m *addrMap) Delete(key uint64) { m.Take(key) }

// Take removes key and returns the value it had: Get and Delete in one
// probe (a replay's free looks its allocation up and closes it).
func (m *addrMap) Take(key uint64) (int32, bool) {
	mask := len(m.keys) - 1
	i := m.slot(key)
	for ; ; i = (i + 1) & mask {
		if !m.used[i] {
			return 0, false
		}
		if m.keys[i] == key {
			break
		}
	}
	v := m.vals[i]
	m.remove(i)
	return v, true
}

// remove empties slot i, shifting later entries of its probe run back so
// that no lookup needs a tombstone.
func (m *addrMap) remove(i int) {
	mask := len(m.keys) - 1
	m.n--
	for j := (i + 1) & mask; m.used[j]; j = (j + 1) & mask {
		home := m.slot(m.keys[j])
		// Move j back to the hole at i unless its home lies in (i, j]
		// (cyclically): then it is already as near home as it can be.
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			m.keys[i], m.vals[i] = m.keys[j], m.vals[j]
			i = j
		}
	}
	m.used[i] = false
}

// Range calls f for every key, in no particular order.
func (m *addrMap) Range(f func(key uint64, v int32)) {
	for i, u := range m.used {
		if u {
			f(m.keys[i], m.vals[i])
		}
	}
}
