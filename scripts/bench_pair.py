#!/usr/bin/env python3
"""memscope report --json against pickle.load on the same file, in alternating
runs, with wall time and peak RSS per run (os.wait4): bench_snapshot.sh for a
machine with a built memscope but no Go or GNU time (the GPU host).

  bench_pair.py MEMSCOPE FILE RUNS [MEMSCOPE ...]

Further binaries (builds to compare) run in the same rounds; a binary may be
given as "VAR=value PATH" (GOMAXPROCS=2 ./memscope). Medians per command, and
each one's ratio to Python's median.
"""
import os, shlex, subprocess, sys, statistics, time

binaries, path, runs = [sys.argv[1]] + sys.argv[4:], sys.argv[2], int(sys.argv[3])


def one(cmd, env=None):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_maxrss / 1024, status


def command(spec):
    parts, env = shlex.split(spec), dict(os.environ)
    while parts and "=" in parts[0]:
        k, v = parts.pop(0).split("=", 1)
        env[k] = v
    return parts + ["report", "--json", path], env


res = {b: [] for b in binaries}
py = []
for _ in range(runs):
    line = []
    for b in binaries:
        cmd, env = command(b)
        r = one(cmd, env)
        res[b].append(r)
        line.append("%s %.3f s %.0f MiB rc %d" % (os.path.basename(b), r[0], r[1], r[2]))
    p = one([sys.executable, "-c", "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))", path])
    py.append(p)
    print(" | ".join(line) + " | pickle.load %.3f s %.0f MiB" % (p[0], p[1]), flush=True)
pt, pm = statistics.median(x[0] for x in py), statistics.median(x[1] for x in py)
for b, xs in res.items():
    t, m = statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs)
    pairs = statistics.median(p[0] / x[0] for p, x in zip(py, xs))
    print("median %s %.3f s %.0f MiB; pickle.load %.3f s %.0f MiB; speed-up %.1fx (pairs %.1fx), RSS %.2fx" % (
        b, t, m, pt, pm, pt / t, pairs, m / pm))
