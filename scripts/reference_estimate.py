#!/usr/bin/env python3
"""Reference for `memscope report --json` on peak snapshots, from json.load.

Stdlib only; implements the README's definitions for estimates.

  reference_estimate.py [--top N] FILE... > expected.json
"""
import argparse
import json
import math
import re
import sys

FRAME = re.compile(r'File "([^"]*)", line (\d+), in ([^\n]*)')
NOISE_NAMES = ["unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main",
               "PyEval_", "PyObject_", "PyFunction_"]


LIBRARY = ["/site-packages/", "/dist-packages/", "/torch/", "/lib/python", "<frozen"]


def profiler_frame(f, fn):
    """README: PyTorch-Memory-Profiler's package and the torch dispatch machinery it runs through."""
    f = f.replace("\\", "/")
    return ("/memory_profiler/" in f or f.startswith("memory_profiler/") or f.endswith("torch/utils/_pytree.py")
            or f.endswith("torch/utils/_python_dispatch.py") or fn == "__torch_dispatch__")


def fmt(f, line, fn):
    return "%s:%s %s" % (f, line, fn) if int(line) > 0 else "%s %s" % (f, fn)


TORCH_PATH = re.compile(r"(^|/)torch/(_[^/]*|nn|optim|autograd|utils|cuda|distributed|amp|fx|jit|profiler|backends|"
                        r"ao|export|func|nested|sparse|testing|onnx|multiprocessing|quantization|library\.py|"
                        r"functional\.py|serialization\.py|overrides\.py|random\.py|storage\.py|hub\.py|"
                        r"__init__\.py)(/|$)")


def parse(stack):
    frames = []
    for s in stack:
        if isinstance(s, str):
            frames += FRAME.findall(s)
    return [(f, line, fn.strip()) for f, line, fn in frames]


def op(stack):
    """The innermost torch frame (estimates carry Python frames only), the
    path cut to start at torch/; the profiler's own frames never count."""
    for f, line, fn in reversed(parse(stack)):
        p = f.replace("\\", "/")
        if profiler_frame(f, fn) or not (p.endswith(".py") or (p.startswith("<") and p.endswith(">"))):
            continue
        if TORCH_PATH.search(p):
            for root in ("/site-packages/", "/dist-packages/"):
                i = p.rfind(root + "torch/")
                if i >= 0:
                    p = p[i + len(root):]
                    break
            else:
                p = f
            return fmt(p, line, fn)
    return ""


def location(stack):
    frames = []
    for s in stack:
        if isinstance(s, str):
            frames += FRAME.findall(s)
    frames = [(f, line, fn.strip()) for f, line, fn in frames]
    kept = [x for x in reversed(frames) if not profiler_frame(x[0], x[2]) and not any(n in x[2] for n in NOISE_NAMES)]
    # README: the innermost Megatron frame, else the innermost frame of the
    # model's own code (outside installed libraries), else the old rule.
    for f, line, fn in kept:
        if "megatron/" in f.replace("\\", "/"):
            return fmt(f, line, fn)
    for f, line, fn in kept:
        if not any(d in f.replace("\\", "/") for d in LIBRARY):
            return fmt(f, line, fn)
    frames = [x for x in frames if not profiler_frame(x[0], x[2])]
    for f, line, fn in reversed(frames):  # innermost first
        fn = fn.strip()
        if any(n in fn for n in NOISE_NAMES):
            continue
        if f.endswith(".py"):
            return "%s:%s %s" % (f, line, fn) if int(line) > 0 else "%s %s" % (f, fn)
    for f, line, fn in reversed(frames):
        fn = fn.strip()
        if not any(n in fn for n in NOISE_NAMES):
            return "%s:%s %s" % (f, line, fn) if int(line) > 0 else "%s %s" % (f, fn)
    return ""


PHASES = ["initialization", "setup_model_and_optimizer", "forward_backward_iter_", "optimizer_step_iter_"]


def phase_key(name):
    for i, p in enumerate(PHASES[:2]):
        if name == p:
            return (i, 0, 0, name)
    for i, p in enumerate(PHASES[2:], 2):
        if name.startswith(p) and name[len(p):].isdigit():
            return (2, int(name[len(p):]), i, name)
    return (9, 0, 0, name)


def device(key, d, top):
    tensors = d.get("tensors", [])
    listed = sum(t["size_bytes"] for t in tensors)
    peak = int(round(d["peak_memory_mb"] * 2**20)) if "peak_memory_mb" in d else listed
    phases, mods = {}, {}
    for t in tensors:
        ph = t.get("phase") or "unknown"
        p = phases.setdefault(ph, [0, 0])
        p[0] += t["size_bytes"]
        p[1] += 1
        mod = t.get("module") or "Unknown"
        pat = ".".join("*" if x.isdigit() else x for x in mod.split("."))
        if mod == "Unknown":
            pat = "Unknown (%s)" % ph  # README: split by phase, as the profiler's viewer does
        m = mods.setdefault(pat, [0, 0, set()])
        m[0] += t["size_bytes"]
        m[1] += 1
        m[2].add(mod)
    order = sorted(range(len(tensors)), key=lambda i: -tensors[i]["size_bytes"])
    return {"device": key, "peak_bytes": peak, "listed_bytes": listed, "unlisted_bytes": max(0, peak - listed),
            "tensors": len(tensors),
            "phases": [{"name": n, "bytes": v[0], "tensors": v[1]} for n, v in sorted(phases.items(), key=lambda kv: phase_key(kv[0]))],
            "modules": [{"pattern": p, "bytes": v[0], "tensors": v[1], "instances": len(v[2])}
                        for p, v in sorted(mods.items(), key=lambda kv: (-kv[1][0], kv[0]))],
            "top": [{"size": tensors[i]["size_bytes"], "shape": tensors[i].get("shape", ""),
                     "module": tensors[i].get("module") or "Unknown", "phase": tensors[i].get("phase") or "unknown",
                     "site": location(stack_of(tensors[i])), "op": op(stack_of(tensors[i])),
                     "location": location(stack_of(tensors[i]))}
                    for i in order[:top]]}


def stack_of(t):
    return t.get("create_stack_trace") or t.get("stack_trace") or []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = []
    for p in a.paths:
        with open(p) as f:
            data = json.load(f)
        devs = [device(k, v, a.top) for k, v in data.items() if isinstance(v, dict)]
        # README: GPUs first by number, then the rest ("cpu") by name.
        devs.sort(key=lambda d: (not d["device"].startswith("cuda"),
                                 int(d["device"].split(":")[-1]) if d["device"].split(":")[-1].isdigit() else 1 << 30, d["device"]))
        files.append({"path": p, "kind": "estimated-snapshot", "error": None, "devices": devs})
    json.dump({"files": files}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
