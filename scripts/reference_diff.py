#!/usr/bin/env python3
"""Reference for `memscope diff --json A B` on allocator snapshots.

Stdlib only; reuses reference_report.py's category and location rules.
Totals sum all devices; categories and call sites group active blocks
(frames from the block, else from its last alloc in the trace); rows are
ordered by |B - A| descending, ties by the larger side then name.

  reference_diff.py A B > expected.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_report as rr  # noqa: E402


def side(path):
    devs = rr.report(path, 10 ** 9)
    totals = {k: sum(d[k] for d in devs) for k in ("reserved_bytes", "allocated_bytes", "active_bytes",
                                                   "requested_bytes", "inactive_bytes", "rounding_waste_bytes",
                                                   "segments", "blocks")}
    if devs:
        # A device without a trace peaks at its active blocks' requested
        # bytes (memory_viz's flat line).
        totals["peak_active_bytes"] = sum(d["peak"]["active_bytes"] if "peak" in d else d["requested_bytes"]
                                          for d in devs)
    peak_cats, peak_sites = {}, {}
    for d in devs:
        live = d["peak"]["live"] if "peak" in d else [dict(t, size=t["requested_size"]) for t in d["top"]]
        for x in live:
            peak_cats[x["category"]] = peak_cats.get(x["category"], 0) + x["size"]
            loc = x["location"] or "(no frames recorded)"
            peak_sites[loc] = peak_sites.get(loc, 0) + x["size"]
    snap = rr.load(path)
    cats, sites = {}, {}
    for dev in devs:
        for c in dev["categories"]:
            cats[c["name"]] = cats.get(c["name"], 0) + c["bytes"]
    # sites over all active blocks (allocated and pending free)
    traces = snap.get("device_traces", snap.get("traces", [])) or []
    for s in snap.get("segments", []):
        trace = traces[s.get("device", 0)] if s.get("device", 0) < len(traces) else []
        last = {}
        for e in trace:
            if e["action"] == "alloc" and e.get("frames"):
                last[e["addr"]] = e["frames"]
        for b in s["blocks"]:
            if b["state"] not in ("active_allocated", "active_pending_free", "active_awaiting_free"):
                continue
            frames = b.get("frames") or last.get(b["address"], [])
            loc = rr.location(frames) or "(no frames recorded)"
            sites[loc] = sites.get(loc, 0) + b["size"]
    return totals, cats, sites, peak_cats, peak_sites


def rows(a, b, key):
    names = list(a) + [n for n in b if n not in a]
    out = [{key: n, "a_bytes": a.get(n, 0), "b_bytes": b.get(n, 0), "delta_bytes": b.get(n, 0) - a.get(n, 0)} for n in names]
    out.sort(key=lambda r: (-abs(r["delta_bytes"]), -max(r["a_bytes"], r["b_bytes"]), r[key]))
    return out


def main():
    a, b = sys.argv[1], sys.argv[2]
    ta, ca, sa, pca, psa = side(a)
    tb, cb, sb, pcb, psb = side(b)
    out = {"a": a, "b": b,
           "totals": {k: {"a": ta[k], "b": tb[k], "delta": tb[k] - ta[k]} for k in ta},
           "categories": rows(ca, cb, "name"), "sites": rows(sa, sb, "location"),
           "peak_categories": rows(pca, pcb, "name"), "peak_sites": rows(psa, psb, "location")}
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
