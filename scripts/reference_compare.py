#!/usr/bin/env python3
"""Reference for `memscope compare --json`, from json.load.

Stdlib only; implements the README's definitions independently of the Go
code. Pairs files by the rank(\\d+) in their names.

  reference_compare.py [--iteration N] REAL_DIR SIM_DIR > expected.json
"""
import argparse
import glob
import json
import math
import os
import re

POINTS = 256


def rank_of(path):
    m = re.search(r"rank_?(\d+)", os.path.basename(path))
    return int(m.group(1)) if m else -1


def load_dir(d):
    out = {}
    for p in sorted(glob.glob(os.path.join(d, "*.json"))):
        with open(p) as f:
            out[rank_of(p)] = (p, json.load(f))
    return out


def nmax(xs):
    xs = [x for x in xs if not math.isnan(x)]
    return max(xs) if xs else float("nan")


def pick(data, iteration):
    keys = sorted((int(k), k) for k in data if k.lstrip("-").isdigit())
    if iteration < 0 or len(keys) == 1:
        return keys[-1]
    for n, k in keys:
        if n == iteration:
            return n, k
    raise KeyError(iteration)


def side(path, data, iteration):
    num, key = pick(data, iteration)
    it = data[key]
    s = it.get("samples", [])
    t = [x.get("timestamp_s", float("nan")) for x in s]
    a = [x.get("allocated_memory_MB", float("nan")) for x in s]
    res = [x.get("reserved_memory_MB", float("nan")) for x in s]
    pk = it.get("peak_allocated_MB", -1)
    if pk is None or pk < 0 or math.isnan(pk):
        pk = nmax(a)
    opt = lambda v: None if v is None or v < 0 or math.isnan(v) or math.isinf(v) else v
    st = dict(path=path, iteration=num, samples=len(s), duration_s=(t[-1] - t[0]) if len(t) >= 2 else 0,
              peak=pk, max_alloc=nmax(a), max_res=nmax(res),
              static=opt(it.get("static_memory_MB", -1)), theo=opt(it.get("theoretical_memory_MB", -1)))
    return st, (t, a)


def resample(t, a, n):
    pts = sorted(((x, y) for x, y in zip(t, a) if not math.isnan(x) and not math.isnan(y)), key=lambda p: p[0])
    if not pts:
        return None
    t0, t1 = pts[0][0], pts[-1][0]
    out, j = [], 0
    for k in range(n):
        u = k / (n - 1) if n > 1 else 0.0
        x = t0 + u * (t1 - t0)
        while j + 1 < len(pts) - 1 and pts[j + 1][0] <= x:
            j += 1
        if len(pts) == 1 or t1 == t0:
            out.append(pts[0][1])
            continue
        (ax, ay), (bx, by) = pts[j], pts[j + 1]
        out.append(by if bx == ax else ay + (by - ay) * ((x - ax) / (bx - ax)))
    return out


def to_bytes(mib):
    if mib is None or math.isnan(mib) or mib < 0:
        return None
    return int(round(mib * 2**20))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iteration", type=int, default=-1)
    ap.add_argument("real")
    ap.add_argument("sim")
    a = ap.parse_args()
    real, sim = load_dir(a.real), load_dir(a.sim)
    rows = []
    for r in sorted(set(real) | set(sim)):
        row = {"rank": r, "real": None, "sim": None, "peak_error_pct": None, "curve_error_pct": None}
        sides = {}
        for name, src in (("real", real), ("sim", sim)):
            if r in src:
                st, series = side(src[r][0], src[r][1], a.iteration)
                sides[name] = (st, series)
                row[name] = dict(path=st["path"], iteration=st["iteration"], samples=st["samples"],
                                 duration_s=st["duration_s"], peak_bytes=to_bytes(st["peak"]),
                                 max_allocated_bytes=to_bytes(st["max_alloc"]),
                                 max_reserved_bytes=to_bytes(st["max_res"]),
                                 static_bytes=to_bytes(st["static"]), theoretical_bytes=to_bytes(st["theo"]))
        if len(sides) == 2:
            rp, sp = sides["real"][0]["peak"], sides["sim"][0]["peak"]
            if rp > 0 and not math.isnan(sp):
                row["peak_error_pct"] = (sp - rp) / rp * 100
                ra, sa = resample(*sides["real"][1], POINTS), resample(*sides["sim"][1], POINTS)
                if ra and sa:
                    row["curve_error_pct"] = sum(abs(y - x) for x, y in zip(ra, sa)) / POINTS / rp * 100
        row["_peaks"] = {k: v[0]["peak"] for k, v in sides.items()}
        rows.append(row)
    errs = [abs(r["peak_error_pct"]) for r in rows if r["peak_error_pct"] is not None]
    worst = None
    best = -1
    for r in rows:
        if r["peak_error_pct"] is not None and abs(r["peak_error_pct"]) > best:
            best, worst = abs(r["peak_error_pct"]), r["rank"]
    summary = {"ranks": len(rows), "paired": sum(1 for r in rows if r["real"] and r["sim"]),
               "worst_rank": worst, "mean_abs_peak_error_pct": sum(errs) / len(errs) if errs else None,
               "underestimated_ranks": [r["rank"] for r in rows if r["real"] and r["sim"]
                                        and r["_peaks"]["sim"] < r["_peaks"]["real"]]}
    for r in rows:
        del r["_peaks"]
    print(json.dumps({"ranks": rows, "summary": summary, "errors": []}, indent=1))


if __name__ == "__main__":
    main()
