#!/usr/bin/env python3
"""Generate Megatron-style per-rank memory traces (the newer format, with
static_memory_MB and theoretical_memory_MB) for a real run and a simulation.

Stdlib only. Used for committed test fixtures (small) and by the trace
benchmarks (256 ranks, ~2 GB):

  gen_traces.py --ranks 8 --iterations 3 --samples 200 OUTDIR

writes OUTDIR/memory_traces/memory_trace_rank{R}_x.json (real, iterations
0..K-1) and OUTDIR/memory_traces_scaling/memory_trace_rank{R}_x_sim.json (one
iteration). Some figures are -1 (unset) or 0 (no line), some samples NaN
or Infinity, peak_allocated_MB comes in four shapes (unset, reset every
iteration, cumulative: never reset, and distinct values above the
samples), static memory differs between the sides on some ranks, and the
simulation under- or overestimates some ranks, so every code path runs.
"""
import argparse
import json
import math
import os
import random


def curve(rng, n, base, peak, t0, dur, noise):
    """A training-like iteration: rise through forward, fall through backward."""
    out = []
    for i in range(n):
        u = i / max(n - 1, 1)
        level = base + (peak - base) * math.sin(math.pi * u) ** 2
        level += rng.uniform(-noise, noise)
        out.append({"timestamp_s": round(t0 + u * dur, 4),
                    "reserved_memory_MB": round(peak * 1.2, 4),
                    "allocated_memory_MB": level})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--compact", action="store_true", help="no indentation (the large benchmark files)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    real_dir = os.path.join(a.out, "memory_traces")
    sim_dir = os.path.join(a.out, "memory_traces_scaling")
    os.makedirs(real_dir, exist_ok=True)
    os.makedirs(sim_dir, exist_ok=True)
    indent = None if a.compact else 1
    for r in range(a.ranks):
        base = 20000 + 1000 * (r % 4)
        peak = 60000 + 500 * r
        static = 18000.0 + r if r % 3 else (0.0 if r % 6 == 0 else -1)
        theo = 58000.0 + 400 * r if r % 2 == 0 else -1
        real = {}
        t = 5.0
        for it in range(a.iterations):
            samples = curve(rng, a.samples, base, peak, t, 1.5, 50)
            if r == 1 and it == a.iterations - 1 and samples:
                samples[len(samples) // 3]["allocated_memory_MB"] = float("nan")
            if r == 2 and it == a.iterations - 1 and len(samples) > 2:
                samples[1]["timestamp_s"] = float("inf")
            own = max(x["allocated_memory_MB"] for x in samples if not math.isnan(x["allocated_memory_MB"]))
            pk = {3: -1, 1: peak + 10, 0: round(own, 2), 2: round(own + 5 + it, 2)}[r % 4]
            real[str(it)] = {"samples": samples, "peak_allocated_MB": pk,
                             "static_memory_MB": static, "theoretical_memory_MB": theo}
            t += 2.0
        # the simulation: some ranks under, some over, one exact
        factor = {0: 1.0, 1: 0.97, 2: 1.02}.get(r % 5, 1.0 + (r % 7 - 3) / 100.0)
        sim_samples = curve(rng, max(a.samples * 2 // 3, 1), base * factor, peak * factor, 0.0, 0.9, 20)
        sim_static = static * 0.98 if r % 2 and static > 0 else static
        sim = {"0": {"samples": sim_samples, "peak_allocated_MB": round(peak * factor + 10, 2),
                     "static_memory_MB": sim_static, "theoretical_memory_MB": theo}}
        with open(os.path.join(real_dir, "memory_trace_rank%d_tp2_pp4.json" % r), "w") as f:
            json.dump(real, f, indent=indent)
        with open(os.path.join(sim_dir, "memory_trace_rank%d_tp2_pp4_sim.json" % r), "w") as f:
            json.dump(sim, f, indent=indent)


if __name__ == "__main__":
    main()
