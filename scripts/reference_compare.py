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


def fin(v):
    return isinstance(v, (int, float)) and not math.isnan(v) and not math.isinf(v)


def series(it):
    """The samples with a finite time and allocated value (the README: others are skipped)."""
    t, a, res = [], [], []
    for x in it.get("samples", []):
        tt, aa = x.get("timestamp_s"), x.get("allocated_memory_MB")
        if not fin(tt) or not fin(aa):
            continue
        r = x.get("reserved_memory_MB")
        t.append(tt)
        a.append(aa)
        res.append(r if fin(r) else float("nan"))
    return t, a, res


def written_peak(it):
    v = it.get("peak_allocated_MB", -1)
    return v if fin(v) and v >= 0 else None


def cumulative(data, key):
    """README: a peak_allocated_MB equal (within 0.006 MiB, the fork rounds to
    two decimals) to a neighbouring iteration's and more than 0.006 MiB above
    the iteration's own samples is cumulative."""
    keys = sorted((int(k), k) for k in data if k.lstrip("-").isdigit())
    pos = [k for _, k in keys].index(key)
    mine = written_peak(data[key])
    if mine is None:
        return False
    same = False
    for j in (pos - 1, pos + 1):
        if 0 <= j < len(keys):
            other = written_peak(data[keys[j][1]])
            if other is not None and abs(other - mine) <= 0.006:
                same = True
    own = nmax(series(data[key])[1])
    return same and not math.isnan(own) and mine - own > 0.006


def side(path, data, iteration):
    num, key = pick(data, iteration)
    it = data[key]
    t, a, res = series(it)
    pk = written_peak(it)
    cum = cumulative(data, key)
    if pk is None or cum:
        pk = nmax(a)
    pos = lambda v: v if fin(v) and v > 0 else None
    st = dict(path=path, iteration=num, samples=len(t), duration_s=(max(t) - min(t)) if len(t) >= 2 else 0,
              peak=pk, max_alloc=nmax(a), max_res=nmax(res), cum=cum, file_peak=written_peak(it),
              static=pos(it.get("static_memory_MB")), theo=pos(it.get("theoretical_memory_MB")))
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
        row = {"rank": r, "real": None, "sim": None, "peak_error_pct": None, "curve_error_pct": None,
               "duration_ratio": None}
        sides = {}
        for name, src in (("real", real), ("sim", sim)):
            if r in src:
                st, series = side(src[r][0], src[r][1], a.iteration)
                sides[name] = (st, series)
                row[name] = dict(path=st["path"], iteration=st["iteration"], samples=st["samples"],
                                 duration_s=st["duration_s"], peak_bytes=to_bytes(st["peak"]),
                                 max_allocated_bytes=to_bytes(st["max_alloc"]),
                                 max_reserved_bytes=to_bytes(st["max_res"]),
                                 max_active_bytes=None,  # Megatron traces give no active memory
                                 static_bytes=to_bytes(st["static"]), theoretical_bytes=to_bytes(st["theo"]),
                                 file_peak_bytes=to_bytes(st["file_peak"]), peak_cumulative=st["cum"])
        if len(sides) == 2:
            rd, sd = sides["real"][0]["duration_s"], sides["sim"][0]["duration_s"]
            if rd > 0:
                row["duration_ratio"] = sd / rd
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
