#!/usr/bin/env python3
"""Capture real allocator snapshots with PyTorch on a GPU, with the numbers
PyTorch itself reports, so memscope's replay can be checked against them.

Needs torch with CUDA. Each scenario runs in a fresh process (the allocator
starts empty, so the trace covers the whole run) and writes:

  NAME.pickle      torch.cuda.memory._dump_snapshot
  NAME.stats.json  torch.cuda.memory_stats() taken just before the dump, plus
                   torch/CUDA versions and the scenario's settings

Scenarios (chosen to exercise memory_viz's semantics):
  train        a small transformer, 3 AdamW steps, python stacks
  record_stream cross-stream frees: free_requested long before free_completed
  expandable   expandable_segments:True (segment_map/segment_unmap)
  ring         max_entries=300: the window starts mid-run with frees
  empty_cache  'train' then torch.cuda.empty_cache() before the dump
  cpp          stacks='all' (C++ frames), one step
  html         'train' as torch.cuda._memory_viz.trace_plot's HTML page
  big          8 layers of d=1024, 30 steps: a larger real file for benchmarks

  capture_real_snapshots.py OUTDIR [SCENARIO...]
"""
import json
import os
import subprocess
import sys


def workload(torch, steps, d=256, layers=2):
    model = torch.nn.Sequential(*[torch.nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)
                                  for _ in range(layers)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x = torch.randn(16, 128, d, device="cuda")
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return model, opt


def record_stream_workload(torch):
    side = torch.cuda.Stream()
    keep = []
    for i in range(6):
        x = torch.empty((1 << 20) + 1000 * i, dtype=torch.uint8, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            # A long kernel on the side stream keeps x's free pending.
            a = torch.randn(2048, 2048, device="cuda")
            for _ in range(20):
                a = a @ a
                a = a / a.norm()
            y = x.float().sum()
            keep.append(y)
        x.record_stream(side)
        del x
        # Allocations on the default stream while the free is pending.
        z = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
        del z
    torch.cuda.synchronize()
    # The next allocation processes the completed events: free_completed.
    w = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
    del w
    torch.cuda.synchronize()
    return keep


def run_scenario(name, out):
    import torch
    cfg = {"scenario": name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name(0),
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    torch.cuda.init()
    torch.cuda.reset_peak_memory_stats()
    stacks = "all" if name == "cpp" else "python"
    max_entries = 300 if name == "ring" else 1_000_000
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks=stacks, max_entries=max_entries)
    keep = None
    if name == "record_stream":
        keep = record_stream_workload(torch)
    elif name == "big":
        keep = workload(torch, 30, d=1024, layers=8)
    elif name == "cpp":
        keep = workload(torch, 1, d=128, layers=1)
    else:
        keep = workload(torch, 3)
    if name == "empty_cache":
        torch.cuda.empty_cache()
    stats = torch.cuda.memory_stats()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    if name == "html":
        from torch.cuda import _memory_viz
        with open(os.path.join(out, name + ".html"), "w") as f:
            f.write(_memory_viz.trace_plot(snap))
    else:
        import pickle
        with open(os.path.join(out, name + ".pickle"), "wb") as f:
            pickle.dump(snap, f)
    cfg["memory_stats"] = {k: v for k, v in stats.items()}
    cfg["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    cfg["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    with open(os.path.join(out, name + ".stats.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
    del keep


SCENARIOS = ["train", "record_stream", "expandable", "ring", "empty_cache", "cpp", "html", "big"]


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or SCENARIOS
    if len(names) == 1 and os.environ.get("CAPTURE_CHILD"):
        run_scenario(names[0], out)
        return
    os.makedirs(out, exist_ok=True)
    for n in names:
        env = dict(os.environ, CAPTURE_CHILD="1")
        if n == "expandable":
            env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        r = subprocess.run([sys.executable, __file__, out, n], env=env)
        print(n, "exit", r.returncode, flush=True)


if __name__ == "__main__":
    main()
