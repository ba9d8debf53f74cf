#!/usr/bin/env python3
"""Write torchtitan memory exports the way their writers do (json.dump).

Stdlib only. Two layouts:
- MemoryDataCollector: a list of {step, timestamp, device_mem_stats,
  metadata}, here with DeviceMemStats dumped as the namedtuple it is (a JSON
  array in field order), an OOM and allocation retries, and an infinite tps;
- the memory_tracker fork's export_to_json: {"metadata", "snapshots": [{step,
  timestamp, memory_stats{... peak_allocated_gib, peak_allocated_pct},
  metadata}]}, with a NaN loss.

  gen_titan_exports.py OUTDIR
"""
import collections
import json
import os
import sys

DeviceMemStats = collections.namedtuple("DeviceMemStats", [
    "max_active_gib", "max_active_pct", "max_reserved_gib", "max_reserved_pct", "num_alloc_retries", "num_ooms"])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    history = []
    for step in (1, 2, 3, 4):
        stats = DeviceMemStats(20.0 + step, 25.0 + step, 24.0 + step, 30.0 + step,
                               3 if step == 2 else 0, 1 if step == 4 else 0)
        history.append({"step": step, "timestamp": 1717000000.0 + step,
                        "device_mem_stats": stats, "metadata": {"loss": 2.5, "tps": float("inf") if step == 1 else 375.0}})
    with open(os.path.join(out, "collector_rank2_memory.json"), "w") as f:
        json.dump(history, f)
    snaps = []
    for step in (10, 20, 30):
        snaps.append({"step": step, "timestamp": 1717000100.0 + step,
                      "memory_stats": {"max_active_gib": 30.0 + step / 10, "max_active_pct": 31.6,
                                       "max_reserved_gib": 36.0 + step / 10, "max_reserved_pct": 37.9,
                                       "num_alloc_retries": 0, "num_ooms": 0,
                                       "peak_allocated_gib": 32.0 + step / 10, "peak_allocated_pct": 33.7},
                      "metadata": {"loss": float("nan") if step == 20 else 2.0, "lr": 3e-4}})
    with open(os.path.join(out, "memory_tracker_rank1.json"), "w") as f:
        json.dump({"metadata": {"model": "llama3_8b", "world_size": 8, "created": "2025-06-04T08:51:48"},
                   "snapshots": snaps}, f, indent=2)


if __name__ == "__main__":
    main()
