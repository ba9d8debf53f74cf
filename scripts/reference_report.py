#!/usr/bin/env python3
"""Reference for `memscope report --json`, computed from pickle.load.

Stdlib only. Implements the definitions in the README independently of the
Go code (same category rules, same location rule, same frame fallback), so
the Go tests can compare every figure against it.

  reference_report.py [--top N] SNAPSHOT... > expected.json

Only for trusted files: pickle.load runs whatever the file says.
"""
import argparse
import gzip
import json
import pickle
import re
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memviz_port  # noqa: E402

RULES = [
    ("Expert/MoE", ["moe", "expert", "experts", "router", "token_dispatcher", "grouped_gemm", "deepep", "deep_ep"]),
    ("Attention", ["attention", "attn", "flash", "sdpa", "scaled_dot_product", "rotary", "kv_cache"]),
    ("Linear/MatMul", ["linear", "matmul", "addmm", "gemm", "bmm", "einsum", "baddbmm"]),
    ("Optimizer State", ["optim", "optimizer", "adam", "adamw", "sgd", "lamb", "lion", "zero_grad", "multi_tensor",
                         "fused_adam", "fused_adamw", "distrib_optimizer"]),
    ("Communication", ["nccl", "all_gather", "reduce_scatter", "all_to_all", "all_reduce", "distributed_c10d", "c10d",
                       "broadcast", "deepep", "functional_collectives"]),
    ("FSDP", ["fsdp", "flat_param", "fully_shard"]),
    ("Gradient", ["backward", "autograd", "grad_acc", "accumulate_grad", "grad", "grad_buffer"]),
    ("Activation", ["forward", "activation", "activations", "gelu", "relu", "silu", "swiglu", "dropout", "layer_norm",
                    "rms_norm", "softmax", "checkpoint", "embedding", "embeddings"]),
]
ORDER = {name: i for i, (name, _) in enumerate(RULES)}
ORDER["Unknown"] = len(RULES)

NOISE_NAMES = ["unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main",
               "PyEval_", "PyObject_", "PyFunction_"]
# Allocator and dispatcher plumbing: never the answer to "who allocated this".
PLUMBING = ["CachingAllocator", "c10::cuda::", "at::detail::empty", "at::empty", "empty_strided", "empty_cuda",
            "wrap_kernel_functor", "at::_ops::", "at::native::empty"]
NOISE_FILES = ["core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c",
               "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"]


def noise(f):
    return any(n in f["name"] for n in NOISE_NAMES) or any(n in f["filename"] for n in NOISE_FILES)


def line_of(f):
    line = f["line"]
    return line if 0 <= line < 2**63 else -1


def fmt_frame(f):
    line = line_of(f)
    if line > 0:
        return "%s:%d %s" % (f["filename"], line, f["name"])
    return "%s %s" % (f["filename"], f["name"])


TORCH_PATH = re.compile(r"(^|/)torch/(_[^/]*|nn|optim|autograd|utils|cuda|distributed|amp|fx|jit|profiler|backends|"
                        r"ao|export|func|nested|sparse|testing|onnx|multiprocessing|quantization|library\.py|"
                        r"functional\.py|serialization\.py|overrides\.py|random\.py|storage\.py|hub\.py|"
                        r"__init__\.py)(/|$)")
DISPATCHER = re.compile(r"(Register|VariableType|ADInplaceOrView|TraceType).*\.cpp$")
PROFILER = ("/memory_profiler/", "torch/utils/_pytree.py", "torch/utils/_python_dispatch.py")


def is_python(f):
    fn = f["filename"]
    return fn.endswith(".py") or fn.endswith(".pyx") or (fn.startswith("<") and fn.endswith(">"))


def is_profiler(f):
    fn = f["filename"].replace("\\", "/")
    return (any(p in fn for p in PROFILER) or fn.startswith("memory_profiler/")) or f["name"] == "__torch_dispatch__"


def is_library(f):
    """torch, installed packages, the standard library (the issue's "not the user's own code")."""
    fn = f["filename"].replace("\\", "/")
    low = fn.lower()
    if "/site-packages/" in low or "/dist-packages/" in low or fn.startswith("<frozen"):
        return True
    if "/lib/python" in low or "/lib/pypy" in low:
        return True
    if "/Lib/" in fn and "/Lib/site-packages/" not in fn:
        return True
    return TORCH_PATH.search(fn) is not None


def strip_args(name):
    """A C++ signature's qualified name: no parameters, const, [clone …],
    template arguments or return type."""
    s = name.strip()
    s = re.sub(r"( \[clone [^\]]*\])+$", "", s)
    if s.endswith(" const"):
        s = s[:-len(" const")]
    if s.endswith(")"):
        depth, cut = 0, -1
        for i in range(len(s) - 1, -1, -1):
            if s[i] == ")":
                depth += 1
            elif s[i] == "(":
                depth -= 1
                if depth == 0:
                    cut = i
                    break
        if cut <= 0:
            return name
        s = s[:cut]
    if "operator" in s:
        return s
    out, depth = [], 0
    for i, c in enumerate(s):
        if c == "<":
            depth += 1
        elif c == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            if c == " " and not s[:i].endswith("(anonymous"):
                out = []
                continue
            out.append(c)
    return "".join(out) if out and depth == 0 else s


def fmt_site(f):
    if is_python(f):
        return fmt_frame(f)
    name = strip_args(f["name"])
    if f["filename"] in ("", "??"):
        return name
    return fmt_frame(dict(f, name=name))


def location(frames):
    """The site: innermost user frame, else innermost Python frame, else the
    innermost autograd node, else the innermost shown non-plumbing frame;
    never a frame memory_viz's frameFilter hides."""
    python = node = native = None
    for f in frames:
        if noise(f) or is_profiler(f):
            continue
        if is_python(f):
            if not is_library(f):
                return fmt_site(f)
            python = python or f
            continue
        if any(p in f["name"] for p in PLUMBING) or DISPATCHER.match(re.split(r"[/\\]", f["filename"])[-1]):
            continue
        n = f["name"]
        if node is None and "torch::autograd::" in n and ("Backward" in n or "AccumulateGrad" in n) and "::apply(" in n:
            node = f
        native = native or f
    for f in (python, node, native):
        if f is not None:
            return fmt_site(f)
    return ""


# Identifier words: runs of letters/digits, split before an upper-case letter
# that follows a lower-case letter or digit, or that starts a capitalised
# word after an acronym (NCCLComm -> NCCL, Comm).
WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+[a-z]*")


def words(text):
    out = []
    for chunk in re.split(r"[^0-9A-Za-z]+", text):
        out += [w.lower() for w in WORD.findall(chunk)]
    return out


def keyword_matches(kw, ws):
    """kw (its words joined) equals some run of consecutive words joined."""
    key = "".join(words(kw))
    joined = ["".join(ws[i:j]) for i in range(len(ws)) for j in range(i + 1, len(ws) + 1)]
    return key in joined


def category(frames):
    if not frames:
        return "Unknown"
    texts = []
    for python_only in (True, False):
        for f in frames:
            if noise(f) or (python_only and not f["filename"].endswith(".py")):
                continue
            base = re.split(r"[/\\]", f["filename"])[-1]
            texts += [words(base), words(f["name"])]
        if texts:
            break
    for name, kws in RULES:
        for kw in kws:
            if any(keyword_matches(kw, t) for t in texts):
                return name
    return "Unknown"


def peak(snapshot, segments, dev, trace, top_n):
    """The peak of memory_viz's active series, from the independent port of
    MemoryViz.js (memviz_port.py), with the live set at it and the reserved
    memory after that event (final segments, later segment events undone)."""
    if "device_traces" not in snapshot and "traces" in snapshot:
        # torch ~2.0 named the key "traces"; memory_viz reads device_traces.
        snapshot = dict(snapshot, device_traces=snapshot["traces"])
    p = memviz_port.process_alloc_data(snapshot, dev, with_live=True)
    at = p["peak_event_index"]
    reserved = sum(s["total_size"] for s in segments if s.get("device", 0) == dev)
    for e in trace[at + 1:]:
        if e["action"] in ("segment_alloc", "segment_map"):
            reserved -= e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved += e["size"]
    items = sorted(p["live"], key=lambda x: (-x["size"], x["addr"]))
    time_us = trace[max(at, 0)].get("time_us", 0)
    return dict(active_bytes=p["peak_bytes"], event_index=at, time_us=time_us, reserved_bytes=reserved,
                efficiency_pct=round(100.0 * p["peak_bytes"] / reserved, 2) if reserved else 0.0,
                live=[dict(size=x["size"], category=category(x.get("frames") or []),
                           location=location(x.get("frames") or [])) for x in items[:top_n]])


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return pickle.loads(data)


def report(path, top_n):
    snap = load(path)
    if isinstance(snap, list):
        snap = {"segments": snap}
    segments = snap.get("segments", [])
    for s in segments:
        # torch ~2.0 blocks have no address/requested_size/frames: they
        # follow from the segment base and history[0].
        addr = s["address"]
        for i, b in enumerate(s["blocks"]):
            hist = (b.get("history") or [{}])[0]
            b = dict(b)
            b.setdefault("address", addr)
            b.setdefault("requested_size", hist.get("real_size", b["size"]))
            if "frames" not in b:
                b["frames"] = hist.get("frames", [])
            s["blocks"][i] = b
            addr = b["address"] + b["size"]
    traces = snap.get("device_traces", snap.get("traces", [])) or []
    devices = sorted({s.get("device", 0) for s in segments} | {i for i, t in enumerate(traces) if t})
    out = []
    for dev in devices:
        trace = traces[dev] if dev < len(traces) else []
        last_alloc = {}
        for e in trace:
            if e["action"] == "alloc" and e.get("frames"):
                last_alloc[e["addr"]] = e["frames"]
        d = dict(device="cuda:%d" % dev, reserved_bytes=0, allocated_bytes=0, active_bytes=0, requested_bytes=0,
                 inactive_bytes=0, rounding_waste_bytes=0, segments=0, blocks=0, active_blocks=0)
        cats = {}
        allocs = []
        for s in segments:
            if s.get("device", 0) != dev:
                continue
            d["segments"] += 1
            d["reserved_bytes"] += s["total_size"]
            for b in s["blocks"]:
                d["blocks"] += 1
                state, size = b["state"], b["size"]
                if state == "inactive":
                    d["inactive_bytes"] += size
                    continue
                if state not in ("active_allocated", "active_pending_free", "active_awaiting_free"):
                    continue
                d["active_blocks"] += 1
                d["active_bytes"] += size
                if state == "active_allocated":
                    d["allocated_bytes"] += size
                    d["requested_bytes"] += b["requested_size"]
                    d["rounding_waste_bytes"] += size - b["requested_size"]
                frames = b.get("frames") or last_alloc.get(b["address"], [])
                cat = category(frames)
                c = cats.setdefault(cat, [0, 0])
                c[0] += size
                c[1] += 1
                if state == "active_allocated":
                    allocs.append((size, b["requested_size"], b["address"], state, cat, location(frames)))
        reserved = d["reserved_bytes"]
        d["efficiency_pct"] = round(100.0 * d["allocated_bytes"] / reserved, 2) if reserved else 0.0
        d["trace_entries"] = len(trace)
        d["oom_events"] = sum(1 for e in trace if e["action"] == "oom")
        d["categories"] = [dict(name=n, bytes=v[0], blocks=v[1])
                           for n, v in sorted(cats.items(), key=lambda kv: (-kv[1][0], ORDER.get(kv[0], 99)))]
        allocs.sort(key=lambda a: (-a[0], a[2]))
        d["top"] = [dict(size=a[0], requested_size=a[1], address=a[2], state=a[3], category=a[4], location=a[5])
                    for a in allocs[:top_n]]
        if trace:
            d["peak"] = peak(snap, segments, dev, trace, top_n)
        out.append(d)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    files = [{"path": p, "kind": "torch-snapshot", "devices": report(p, a.top)} for p in a.paths]
    json.dump({"files": files}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
