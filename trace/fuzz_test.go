package trace

import "testing"

// FuzzParse feeds arbitrary bytes to every trace reader (Megatron JSON,
// torchtitan export, logs): errors are fine, panics are not.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"0": {"samples": [{"timestamp_s": 1.0, "reserved_memory_MB": 10.0, "allocated_memory_MB": 5.0}], "peak_allocated_MB": -1, "static_memory_MB": NaN}}`))
	f.Add([]byte(`[{"step": 1, "timestamp": 1.5, "device_mem_stats": {"max_active_gib": 1, "max_reserved_gib": 2}}]`))
	f.Add([]byte("[Rank 0] (after 10 iterations) memory (MB) | allocated: 1 | max allocated: 2 | reserved: 3 | max reserved: 4\n"))
	f.Add([]byte("[rank0]:[titan] step:  1  loss: 1  memory: 27.34GiB(28.78%)  tps: 375\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ranks, err := Parse("memory_trace_rank0.json", data)
		if err != nil {
			return
		}
		for _, r := range ranks {
			for i := range r.Iterations {
				it := &r.Iterations[i]
				if len(it.T) != len(it.Allocated) || len(it.T) != len(it.Reserved) {
					t.Fatal("series of different lengths")
				}
				_ = it.Peak()
				_ = Resample(it, 16)
			}
		}
	})
}
