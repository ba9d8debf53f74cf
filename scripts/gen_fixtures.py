#!/usr/bin/env python3
"""Write the small synthetic snapshot fixtures in testdata/snapshots/synthetic.

Stdlib only; the output is committed, so tests need only Go. Re-run after
changing it and commit the result:

  python3 scripts/gen_fixtures.py testdata/snapshots/synthetic

Each file exercises one form the reader must accept: pickle protocols 2 and
5, gzip, JSON, the _memory_viz HTML page, the legacy bare segment list,
legacy `history` blocks, unknown states/actions/keys, OOM events and
multiple devices. base.pickle (protocol 4) holds the same data as the
protocol/gzip/JSON/HTML variants.
"""
import base64
import gzip
import json
import os
import pickle
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
os.makedirs(out, exist_ok=True)

# A small consistent snapshot from the allocator simulation.
base_path = os.path.join(out, "base.pickle")
subprocess.check_call([sys.executable, os.path.join(here, "gen_snapshot.py"), "--entries", "400",
                       "--depth", "12", "--stacks", "12", "--seed", "7", base_path])
with open(base_path, "rb") as f:
    base = pickle.load(f)


def dump(name, obj, protocol=4):
    with open(os.path.join(out, name), "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


dump("proto2.pickle", base, 2)
dump("proto5.pickle", base, 5)
with open(os.path.join(out, "base.pickle.gz"), "wb") as f:
    f.write(gzip.compress(pickle.dumps(base, protocol=4)))


def jsonable(x):
    if isinstance(x, tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, list):
        return [jsonable(v) for v in x]
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    return x


with open(os.path.join(out, "base.json"), "w") as f:
    json.dump(jsonable(base), f)

# torch.cuda._memory_viz._format_viz: base64 pickle padded with NULs.
buf = pickle.dumps(base)
buf += b"\x00" * (3 - len(buf) % 3)
page = ('\n<!DOCTYPE html>\n<html>\n<head>\n</head>\n<body>\n<script type="module">\n'
        'import {add_local_files} from "https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js"\n'
        'const local_files = %s\nadd_local_files(local_files, %r)\n</script>\n</body>\n'
        % (json.dumps([{"name": "snapshot.pickle", "base64": base64.b64encode(buf).decode()}]), "Active Memory Timeline"))
with open(os.path.join(out, "base.html"), "w") as f:
    f.write(page)

fr = [{"filename": "/w/model.py", "line": 10, "name": "forward"},
      {"filename": "/w/train.py", "line": 3, "name": "<module>"}]

# torch <= 1.13: a bare list of segments; blocks carry history, no address.
legacy = [{"device": 0, "address": 1 << 30, "total_size": 4 << 20, "allocated_size": 3 << 20,
           "active_size": 3 << 20, "stream": 0, "segment_type": "large",
           "blocks": [{"size": 3 << 20, "state": "active_allocated",
                       "history": [{"addr": 1 << 30, "real_size": (3 << 20) - 100, "frames": fr}]},
                      {"size": 1 << 20, "state": "inactive", "history": []}]}]
dump("legacy_list.pickle", legacy, 2)
dump("legacy_history.pickle", {"segments": legacy, "traces": [[{"action": "alloc", "addr": 1 << 30,
                                                                 "size": 3 << 20, "stream": 0}]]})

weird = {"segments": [{"device": 0, "address": 4096, "total_size": 8192, "allocated_size": 4096,
                       "active_size": 4096, "requested_size": 4000, "stream": 0, "segment_type": "small",
                       "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "mystery": 1,
                       "blocks": [{"address": 4096, "size": 4096, "requested_size": 4000,
                                   "state": "active_allocated", "frames": fr},
                                  {"address": 8192, "size": 4096, "requested_size": 0,
                                   "state": "quantum_superposition", "frames": []}]}],
         "device_traces": [[{"action": "alloc", "addr": 4096, "size": 4096, "stream": 0, "time_us": 1,
                             "frames": fr},
                            {"action": "teleport", "addr": 4096, "size": 4096, "stream": 0, "time_us": 2},
                            {"action": "oom", "size": 1 << 34, "device_free": 1 << 20, "stream": 0,
                             "time_us": 3, "frames": fr}]],
         "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1},
         "brand_new_key": [1, 2, 3]}
dump("unknown_and_oom.pickle", weird)

two = {"segments": [dict(s, device=1) for s in base["segments"][:3]] + base["segments"][3:],
       "device_traces": [base["device_traces"][0], [], ]}
dump("two_devices.pickle", two)
print("fixtures written to", out)
