#!/usr/bin/env python3
"""An independent, stdlib-only port of pytorch.org/memory_viz's Active Memory
Timeline: `annotate_snapshot` and `process_alloc_data` from PyTorch's
torch/utils/viz/MemoryViz.js (plot_segments=false), translated statement by
statement, so memscope's replay can be checked against the numbers the
browser viewer shows. It shares no code or rule with memscope.

What memory_viz computes, per device:
  - elements: every `alloc`, every free (`free`, i.e. a free_requested
    immediately followed by its free_completed, or a lone `free_completed`)
    whose address has no open alloc, and every `active_allocated` block of
    the final segments whose address has no open alloc (requested_size);
  - max_size: the maximum, after each action, of the live elements' sizes.
    It never looks at the level before the first action.

This port adds, beside memory_viz's own max_size:
  - start_bytes: the level before the first action (what memory_viz omits);
  - peak_bytes: max(max_size, start_bytes);
  - peak_event_index: the raw trace index of the first event after which
    peak_bytes is reached (-1: the start);
  - end_bytes: the level after the last action.

  memviz_port.py FILE.pickle [FILE...] > out.json
"""
import json
import pickle
import sys


def annotate(trace):
    """annotate_snapshot's trace pass: elide free_requested immediately
    followed by free_completed at the same address into one 'free'. Each kept
    event carries its raw index ("raw")."""
    out = []
    for raw, t in enumerate(trace):
        t = dict(t)
        t["raw"] = raw
        if t.get("action") == "free_completed" and out:
            prev = out[-1]
            if prev["action"] == "free_requested" and prev.get("addr") == t.get("addr"):
                prev["action"] = "free"
                continue
        out.append(t)
    return out


def block_requested(b):
    if "frames" not in b:
        if "history" in b:
            return b.get("requested_size") or b["history"][0].get("real_size")
        return b.get("requested_size") or b["size"]
    # memory_viz reads b.requested_size as it is; files without it do not
    # reach this branch in practice (PyTorch writes both keys together).
    return b.get("requested_size", b["size"])


def process_alloc_data(snapshot, device, with_live=False):
    traces = snapshot.get("device_traces") or []
    trace = annotate(traces[device] if device < len(traces) else [])
    elements = []
    initially_allocated = []
    actions = []          # (element index, raw trace index)
    addr_to_alloc = {}
    for e in trace:
        a = e.get("action")
        if a == "alloc":
            elements.append(e)
            addr_to_alloc[e["addr"]] = len(elements) - 1
            actions.append((len(elements) - 1, e["raw"]))
        elif a in ("free", "free_completed"):
            if e["addr"] in addr_to_alloc:
                actions.append((addr_to_alloc[e["addr"]], e["raw"]))
                del addr_to_alloc[e["addr"]]
            else:
                elements.append(e)
                initially_allocated.append(len(elements) - 1)
                actions.append((len(elements) - 1, e["raw"]))
    for seg in snapshot.get("segments", []):
        if seg.get("device") != device:
            continue
        addr = seg["address"]
        for b in seg.get("blocks", []):
            b_addr = addr
            addr += b["size"]
            if b.get("state") == "active_allocated" and b_addr not in addr_to_alloc:
                elements.append({"size": block_requested(b), "addr": b_addr, "frames": b.get("frames", [])})
                initially_allocated.append(len(elements) - 1)
    initially_allocated.reverse()
    if not actions and initially_allocated:
        actions.append((initially_allocated.pop(), -1))

    # Sizes only: memory_viz's drawing state (offsets, summarised elements)
    # does not change totals, so the level is the sum of live elements.
    live = set()
    total = 0
    for el in initially_allocated:
        live.add(el)
        total += elements[el]["size"]
    start = total
    max_size = 0
    peak, peak_at, peak_live = start, -1, set(live)
    for el, raw in actions:
        if el in live:
            live.discard(el)
            total -= elements[el]["size"]
        else:
            live.add(el)
            total += elements[el]["size"]
        max_size = max(max_size, total)
        if total > peak:
            peak, peak_at, peak_live = total, raw, set(live)
    result = {"device": device, "memory_viz_max_size": max_size, "start_bytes": start,
              "peak_bytes": peak, "peak_event_index": peak_at, "end_bytes": total,
              "actions": len(actions)}
    if with_live:
        result["live"] = [elements[el] for el in peak_live]
    return result


def devices(snapshot):
    ds = {s.get("device") for s in snapshot.get("segments", [])}
    for d, t in enumerate(snapshot.get("device_traces") or []):
        if t:
            ds.add(d)
    return sorted(d for d in ds if d is not None)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        import gzip
        data = gzip.decompress(data)
    if data.lstrip()[:1] == b"<":
        import base64
        import re
        m = re.search(rb'"base64"\s*:\s*"([^"]*)"', data)
        data = base64.b64decode(m.group(1))
    snap = pickle.loads(data)
    if isinstance(snap, list):
        snap = {"segments": snap, "device_traces": []}
    return snap


def main():
    out = {}
    for p in sys.argv[1:]:
        snap = load(p)
        out[p.rsplit("/", 1)[-1]] = [process_alloc_data(snap, d) for d in devices(snap)]
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
