#!/usr/bin/env python3
"""Compare `memscope report --json` with the Python references on random
generated shapes: each run draws `gen_snapshot.py` flags (entries, shared or
unshared frames, depth, distinct stacks, protocol, frees, frame pool, ring
buffer size, live blocks, annotated ranges), writes the file, and checks
every figure `reference_report.py` computes (pickle.load, the README's
definitions) and the peak of `memviz_port.py` (MemoryViz.js). Stdlib only.

    scripts/sweep_references.py MEMSCOPE SEED [RUNS]

Prints each shape whose figures differ, then the count; the exit status is
1 when any differs. A shape the generator refuses (a frame pool too small
for the stacks asked) is skipped and said.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def subset_equal(got, want):
    """Whether got equals want in every field want has (as main_test.go's
    subsetEqual: the reference need not compute every figure)."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(subset_equal(got.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            subset_equal(a, b) for a, b in zip(got, want))
    return got == want


def draw(rnd):
    frames = rnd.choice(["shared", "unshared"])
    # 100000 entries make a file over 8 MiB, which memscope decodes on
    # several cores (helpers that join at batch boundaries).
    args = ["--entries", str(rnd.choice([200, 1000, 5000, 20000, 100000])),
            "--frames", frames,
            "--depth", str(rnd.choice([1, 2, 5, 20, 60])),
            "--stacks", str(rnd.choice([1, 10, 300, 5000])),
            "--seed", str(rnd.randrange(1000)),
            "--protocol", str(rnd.choice([2, 3, 4, 5])),
            "--frees", rnd.choice(["step", "random"])]
    if frames == "shared" and rnd.random() < 0.4:
        args += ["--frame-pool", str(rnd.choice([3, 50, 2000]))]
    if rnd.random() < 0.3:
        args += ["--max-entries", str(rnd.choice([100, 999, 4000]))]
    if rnd.random() < 0.3:
        args += ["--live", str(rnd.choice([10, 500, 5000]))]
    if rnd.random() < 0.3:
        args += ["--ranges", str(rnd.choice([1, 4, 30]))]
    return args


def run_json(cmd):
    return json.loads(subprocess.run(cmd, capture_output=True, check=True).stdout)


def check(memscope, path):
    """The differences between memscope's report of path and the references'."""
    diffs = []
    ref = run_json(["python3", os.path.join(HERE, "reference_report.py"), "--top", "10", path])["files"][0]
    got = run_json([memscope, "report", "--json", "--top", "10", path])["files"][0]
    if len(got["devices"]) != len(ref["devices"]):
        return ["devices: %d, want %d" % (len(got["devices"]), len(ref["devices"]))]
    for rd, gd in zip(ref["devices"], got["devices"]):
        for key, want in rd.items():
            if not subset_equal(gd.get(key), want):
                diffs.append("cuda:%s %s: %.200s, want %.200s" % (rd.get("device"), key, gd.get(key), want))
    viz = run_json(["python3", os.path.join(HERE, "memviz_port.py"), path])
    for want in next(iter(viz.values())):
        for gd in got["devices"]:
            if gd["device"] != want["device"]:
                continue
            peak = gd.get("peak") or {}
            if (peak.get("active_bytes"), peak.get("event_index")) != (want["peak_bytes"], want["peak_event_index"]):
                diffs.append("cuda:%d peak %s at %s, memory_viz %d at %d" % (
                    want["device"], peak.get("active_bytes"), peak.get("event_index"),
                    want["peak_bytes"], want["peak_event_index"]))
    return diffs


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    memscope, seed = sys.argv[1], int(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    rnd = random.Random(seed)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "shape.pickle")
        for _ in range(runs):
            args = draw(rnd)
            gen = subprocess.run(["python3", os.path.join(HERE, "gen_snapshot.py")] + args + [path],
                                 capture_output=True, text=True)
            if gen.returncode != 0:
                print("skipped:", " ".join(args), "-", gen.stderr.strip().splitlines()[-1])
                continue
            diffs = check(memscope, path)
            if diffs:
                bad += 1
                print("differs:", " ".join(args))
                for d in diffs:
                    print("   ", d)
    print("%d shapes, %d differ" % (runs, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
