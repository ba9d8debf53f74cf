#!/usr/bin/env python3
"""Write a snapshot of N blocks without frames and no trace: what
torch.cuda.memory._snapshot() gives for a process that recorded no history,
here with many blocks (a heap of small tensors).

    python3 scripts/gen_blocks.py N OUT

Segments hold 1 to 64 blocks of 512 B to 2 MiB, each active, inactive or
pending free (random, seeded). N = 300000 is the nf300k row of
docs/development.md (11 MB).
"""
import pickle
import random
import sys


def main():
    n, out = int(sys.argv[1]), sys.argv[2]
    rnd = random.Random(3)
    segs = []
    addr = 139637976727552
    i = 0
    while i < n:
        k = min(n - i, 1 + rnd.randrange(64))
        blocks = []
        a = addr
        for _ in range(k):
            sz = 512 * (1 + rnd.randrange(4096))
            blocks.append({"address": a, "size": sz, "requested_size": sz - rnd.randrange(512),
                           "state": rnd.choice(["active_allocated", "inactive", "active_pending_free"]), "frames": []})
            a += sz
        segs.append({"device": 0, "address": addr, "total_size": a - addr, "allocated_size": 0, "active_size": 0,
                     "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                     "is_expandable": False, "frames": [], "blocks": blocks})
        addr = a + (1 << 21)
        i += k
    s = {"segments": segs, "device_traces": [[]], "allocator_settings": {}}
    with open(out, "wb") as f:
        pickle.dump(s, f, protocol=4)


if __name__ == "__main__":
    main()
