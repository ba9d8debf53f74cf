#!/usr/bin/env python3
"""Write snapshot, estimate and trace fixtures whose strings carry terminal
control sequences (OSC window title, clear screen, BEL, C1 controls, DEL).

Stdlib only. memscope must show them as visible escapes everywhere and keep
them exact in JSON:

  gen_hostile_strings.py OUTDIR
"""
import json
import os
import pickle
import sys

TITLE = "\x1b]0;PWNED\x07"
CLEAR = "\x1b[2J"
C1 = "\u009b31m"
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
fr = [{"filename": "/w/" + TITLE + "evil.py", "line": 7, "name": CLEAR + "forward"},
      {"filename": "/w/train" + C1 + ".py", "line": 3, "name": "<module>\x7f"}]
snap = {"segments": [{"device": 0, "address": 1 << 20, "total_size": 2 << 20, "allocated_size": 1 << 20,
                      "active_size": 1 << 20, "requested_size": 1000, "stream": 0, "segment_type": "large",
                      "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr,
                      "blocks": [{"address": 1 << 20, "size": 1 << 20, "requested_size": 1000,
                                  "state": "active_allocated", "frames": fr},
                                 {"address": 2 << 20, "size": 1 << 20, "requested_size": 0,
                                  "state": "inactive", "frames": []}]}],
        "device_traces": [[{"action": "alloc", "addr": 1 << 20, "size": 1000, "stream": 0, "time_us": 1,
                            "frames": fr, "compile_context": TITLE, "user_metadata": CLEAR},
                           {"action": "oom", "size": 1 << 34, "device_free": 1 << 20, "stream": 0,
                            "time_us": 3, "frames": fr}]],
        "external_annotations": [{"name": TITLE + "ProfilerStep#1", "stage": "START", "device": 0, "time_us": 0}],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": CLEAR}}
with open(os.path.join(out, "hostile_strings.pickle"), "wb") as f:
    pickle.dump(snap, f, protocol=4)
stack = ['  File "/w/%smodel.py", line 4, in %sbuild\n    x = torch.empty(1)\n' % (TITLE, CLEAR)]
est = {"cuda:0": {"peak_memory_mb": 4.0, "tensors": [
    {"size_bytes": 2 << 20, "size_mb": 2.0, "shape": "torch.Size([%s])" % CLEAR, "module": "GPT." + TITLE + "mlp",
     "phase": "forward" + C1, "create_stack_trace": stack, "release_stack_trace": []}]}}
with open(os.path.join(out, "hostile_peak_snapshot.json"), "w") as f:
    json.dump(est, f)
