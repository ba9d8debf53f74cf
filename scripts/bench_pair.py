#!/usr/bin/env python3
"""memscope report --json against pickle.load on the same file, in alternating
runs, with wall time and peak RSS per run (os.wait4): bench_snapshot.sh for a
machine with a built memscope but no Go or GNU time (the GPU host).

  bench_pair.py MEMSCOPE FILE RUNS
"""
import os, subprocess, sys, time, statistics
binary, path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def one(cmd):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_maxrss / 1024, status
g, py, ratios = [], [], []
for _ in range(runs):
    a = one([binary, "report", "--json", path])
    b = one([sys.executable, "-c", "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))", path])
    g.append(a); py.append(b); ratios.append(b[0] / a[0])
    print("memscope %.3f s %.0f MiB rc %d | pickle.load %.3f s %.0f MiB" % (a[0], a[1], a[2], b[0], b[1]), flush=True)
m = lambda xs, i: statistics.median(x[i] for x in xs)
print("median memscope %.3f s %.0f MiB; pickle.load %.3f s %.0f MiB; speed-up %.1fx (pairs %.1fx), RSS %.2fx" % (
    m(g, 0), m(g, 1), m(py, 0), m(py, 1), m(py, 0) / m(g, 0), statistics.median(ratios), m(g, 1) / m(py, 1)))
