#!/usr/bin/env python3
"""Write a snapshot whose segments hold many live blocks, as
torch.cuda.memory._dump_snapshot would at an OOM of a large model: the
segments come first and are about half of the file, so the trace's keys
are first written far into it (past where a decoder helper's prefix
reaches).

    scripts/gen_many_blocks.py BLOCKS ENTRIES STACKS OUT.pickle

BLOCKS live blocks in segments of 100, ENTRIES trace entries (allocs and
free pairs of random live addresses), every stack drawn from STACKS
distinct stacks of 20 frames over a pool of 2,000 frame dicts (STACKS 0:
every stack distinct). Stdlib only; deterministic (seed 1).

  gen_many_blocks.py 300000 200000 5000 blocks.pickle   # 25 MiB
  gen_many_blocks.py 300000 200000 0 blocks_distinct.pickle   # 83 MiB
"""
import pickle
import random
import sys


def main():
    nblocks, nentries, nstacks, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(1)
    frames = [{'filename': '/src/m%d.py' % (i % 50), 'line': i, 'name': 'f%d' % i} for i in range(2000)]

    def fresh():
        return [frames[rng.randrange(len(frames))] for _ in range(20)]

    pool = [fresh() for _ in range(nstacks)]

    def stack():
        return pool[rng.randrange(nstacks)] if pool else fresh()

    segs = []
    addr = 1 << 30
    for _ in range(nblocks // 100):
        base, blocks = addr, []
        for _ in range(100):
            blocks.append({'address': addr, 'size': 4096, 'requested_size': 4000,
                           'state': 'active_allocated', 'frames': stack()})
            addr += 4096
        segs.append({'device': 0, 'address': base, 'total_size': 409600, 'allocated_size': 409600,
                     'active_size': 409600, 'requested_size': 400000, 'stream': 0, 'segment_type': 'large',
                     'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [], 'blocks': blocks})
    trace, live, t = [], [], 1
    for _ in range(nentries):
        if live and rng.random() < 0.5:
            a = live.pop(rng.randrange(len(live)))
            for action in ('free_requested', 'free_completed'):
                trace.append({'action': action, 'addr': a, 'size': 512, 'stream': 0, 'time_us': t, 'frames': stack()})
        else:
            a, addr = addr, addr + 512
            live.append(a)
            trace.append({'action': 'alloc', 'addr': a, 'size': 512, 'stream': 0, 'time_us': t, 'frames': stack()})
        t += 1
    with open(out, 'wb') as f:
        pickle.dump({'segments': segs, 'device_traces': [trace], 'allocator_settings': {},
                     'external_annotations': []}, f, protocol=4)


if __name__ == '__main__':
    main()
