#!/usr/bin/env python3
"""Generate a synthetic, internally consistent PyTorch allocator snapshot.

Stdlib only. Simulates a caching allocator (large/small pools, block splitting
and merging, segment_alloc/segment_free) over a training-like workload and
writes what torch.cuda.memory._dump_snapshot would: segments with blocks, a
device_traces ring buffer, allocator_settings and external_annotations.

Used by benchmarks (80 MB / 1 GB files) and by the replay tests: replaying the
trace from an empty allocator reproduces the final segment state exactly when
the trace is not truncated.

  gen_snapshot.py --entries 100000 --frames unshared --depth 40 OUT.pickle

Shapes (vary them: a figure from one shape is not a claim about the engine):
  --frames unshared           every frame its own dict (no memo sharing)
  --frames shared             a stack's frames shared wherever that stack recurs
  --frame-pool N              stacks drawn from N frame dicts shared by all
                              stacks through the pickle memo, as PyTorch
                              interns them; with --stacks large, many distinct
                              stacks over few frames
  --frees random              blocks outlive their step and are freed at
                              random among all live ones (a scattered heap)
  --ranges N                  N annotated ranges a step, one after another
                              (record_function around each layer): many
                              stages
"""
import argparse
import bisect
import pickle
import random
import sys

SMALL = 1 << 20           # blocks <= 1 MiB come from the small pool
SMALL_SEG = 2 << 20       # small pool segments are 2 MiB
LARGE_SEG = 20 << 20      # mid-size requests get 20 MiB segments
ROUND = 512

FILES = [
    ("/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py", "forward", 116),
    ("/workspace/megatron/core/transformer/attention.py", "forward", 412),
    ("/workspace/megatron/core/transformer/moe/experts.py", "forward", 210),
    ("/workspace/megatron/core/transformer/mlp.py", "forward", 120),
    ("/opt/conda/lib/python3.11/site-packages/torch/optim/adam.py", "_multi_tensor_adam", 580),
    ("/opt/conda/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "all_gather_into_tensor", 2900),
    ("/opt/conda/lib/python3.11/site-packages/torch/distributed/fsdp/_flat_param.py", "_init_flat_param", 700),
    ("/opt/conda/lib/python3.11/site-packages/torch/autograd/__init__.py", "backward", 266),
    ("/opt/conda/lib/python3.11/site-packages/torch/nn/functional.py", "gelu", 1700),
    ("/workspace/train.py", "train_step", 88),
    ("/workspace/train.py", "main", 140),
]
CPP = [("??", "torch::unwind::unwind()", 0), ("??", "torch::CapturedTraceback::gather(bool, bool, bool)", 0),
       ("??", "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", 0),
       ("??", "at::native::empty_cuda", 0), ("/usr/lib/python3.11/ceval.c", "_PyEval_EvalFrameDefault", 4200)]


def make_pooled_stacks(rng, n, depth, pool):
    """n distinct stacks whose frames are references into one pool of
    shared frame dicts (PyTorch interns frames, so pickle memoises them)."""
    frames = []
    for i in range(pool):
        f, fn, l = FILES[i % len(FILES)]
        frames.append(dict(filename=f, name=fn, line=l + i // len(FILES)))
    top = [dict(filename="/workspace/train.py", name="<module>", line=200)]
    if pool ** max(depth - 1, 0) < n:
        raise SystemExit("--stacks %d: a pool of %d frames has only %d distinct stacks of depth %d"
                         % (n, pool, pool ** max(depth - 1, 0), depth))
    stacks, seen = [], set()
    while len(stacks) < n:
        idx = tuple(rng.randrange(pool) for _ in range(depth - 1))
        if idx in seen:
            continue
        seen.add(idx)
        stacks.append([frames[j] for j in idx] + top)
    return stacks


def make_stacks(rng, n, depth):
    stacks = []
    for i in range(n):
        frames = [dict(filename=f, name=fn, line=l) for f, fn, l in CPP[: rng.randint(0, len(CPP))]]
        while len(frames) < depth - 2:
            f, fn, l = rng.choice(FILES)
            frames.append(dict(filename=f, name=fn, line=l + rng.randint(0, 40)))
        frames.append(dict(filename="/workspace/train.py", name="train_step", line=88 + i % 7))
        frames.append(dict(filename="/workspace/train.py", name="<module>", line=200))
        stacks.append(frames)
    return stacks


class Sim:
    def __init__(self, rng, stacks, unshared, max_entries):
        self.rng = rng
        self.stacks = stacks
        self.unshared = unshared
        self.segments = {}              # base -> [base, size, pool, blocks(list of [addr,size,req,state,stack])]
        self.seg_bases = []             # sorted bases
        self.free = {"small": [], "large": []}  # sorted (size, addr)
        self.blocks = {}                # addr -> block list
        self.next_addr = 0x7f0000000000
        self.trace = []
        self.max_entries = max_entries
        self.total = 0
        self.t = 1_700_000_000_000_000

    def frames(self, stack):
        if self.unshared:
            return [dict(f) for f in stack]
        return list(stack)  # own list, shared frame dicts (as PyTorch writes them)

    def emit(self, action, addr, size, stack):
        self.t += self.rng.randint(1, 30)
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.t}
        if stack is not None:
            e["frames"] = self.frames(stack)
        self.trace.append(e)
        self.total += 1
        if len(self.trace) > 2 * self.max_entries:
            del self.trace[: len(self.trace) - self.max_entries]

    def seg_of(self, addr):
        i = bisect.bisect_right(self.seg_bases, addr) - 1
        return self.segments[self.seg_bases[i]]

    def malloc(self, req, stack):
        size = max(ROUND, (req + ROUND - 1) // ROUND * ROUND)
        pool = "small" if size <= SMALL else "large"
        fl = self.free[pool]
        i = bisect.bisect_left(fl, (size, 0))
        if i < len(fl):
            bsize, addr = fl.pop(i)
        else:
            if pool == "small":
                seg_size = SMALL_SEG
            elif size < 10 << 20:
                seg_size = LARGE_SEG
            else:
                seg_size = (size + (2 << 20) - 1) // (2 << 20) * (2 << 20)
            addr = self.next_addr
            self.next_addr += seg_size + (2 << 20)
            blk = [addr, seg_size, 0, "inactive", None]
            seg = [addr, seg_size, pool, [blk]]
            self.segments[addr] = seg
            bisect.insort(self.seg_bases, addr)
            self.blocks[addr] = blk
            self.emit("segment_alloc", addr, seg_size, stack)
            bsize = seg_size
        blk = self.blocks[addr]
        rem = bsize - size
        if rem >= (ROUND if pool == "small" else SMALL + 1):
            seg = self.seg_of(addr)
            bl = seg[3]
            j = bl.index(blk)
            nb = [addr + size, rem, 0, "inactive", None]
            bl.insert(j + 1, nb)
            self.blocks[addr + size] = nb
            bisect.insort(fl, (rem, addr + size))
            blk[1] = size
        blk[2] = req
        blk[3] = "active_allocated"
        blk[4] = stack
        self.emit("alloc", addr, blk[1], stack)
        return addr

    def dealloc(self, addr):
        blk = self.blocks[addr]
        stack = blk[4]
        self.emit("free_requested", addr, blk[1], stack)
        self.emit("free_completed", addr, blk[1], stack)
        blk[3] = "inactive"
        blk[4] = None
        seg = self.seg_of(addr)
        pool = seg[2]
        fl = self.free[pool]
        bl = seg[3]
        j = bl.index(blk)
        # merge with the next and previous inactive neighbours
        if j + 1 < len(bl) and bl[j + 1][3] == "inactive":
            nb = bl.pop(j + 1)
            fl.remove((nb[1], nb[0]))
            del self.blocks[nb[0]]
            blk[1] += nb[1]
        if j > 0 and bl[j - 1][3] == "inactive":
            pb = bl[j - 1]
            fl.remove((pb[1], pb[0]))
            bl.pop(j)
            del self.blocks[blk[0]]
            pb[1] += blk[1]
            blk = pb
        bisect.insort(fl, (blk[1], blk[0]))

    def empty_cache(self):
        for base in list(self.seg_bases):
            seg = self.segments[base]
            if len(seg[3]) == 1 and seg[3][0][3] == "inactive":
                self.free[seg[2]].remove((seg[1], base))
                del self.blocks[base]
                del self.segments[base]
                self.seg_bases.remove(base)
                self.emit("segment_free", base, seg[1], None)


class RangeWriter:
    """Annotated ranges inside a step, one after another, as record_function
    around each layer writes them: the step's allocations split evenly
    among n ranges named layers.0 to layers.n-1, the same names each step."""

    def __init__(self, anns, sim, n, allocs):
        self.anns, self.sim, self.n, self.allocs = anns, sim, n, allocs
        self.open = None

    def at(self, k):
        """Before the step's allocation k: a range starts at its first."""
        if not self.n:
            return
        j = k * self.n // self.allocs
        if k and j == (k - 1) * self.n // self.allocs:
            return
        self.close()
        self.open = "layers.%d" % j
        self.anns.append({"name": self.open, "stage": "START", "device": 0, "time_us": self.sim.t})

    def close(self):
        if self.open is not None:
            self.anns.append({"name": self.open, "stage": "END", "device": 0, "time_us": self.sim.t})
            self.open = None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--entries", type=int, default=100000, help="trace entries to produce (approx.)")
    ap.add_argument("--max-entries", type=int, default=0, help="ring buffer size (0 = keep all)")
    ap.add_argument("--frames", choices=["shared", "unshared"], default="shared")
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--stacks", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--protocol", type=int, default=4)
    ap.add_argument("--frame-pool", type=int, default=0,
                    help="draw the stacks' frames from this many frame dicts shared by all stacks (0: off)")
    ap.add_argument("--frees", choices=["step", "random"], default="step",
                    help="step: a step frees what it made; random: blocks outlive steps, freed at random among all live")
    ap.add_argument("--live", type=int, default=2000,
                    help="--frees random: the most blocks kept live between steps (the heap the snapshot's segments hold)")
    ap.add_argument("--ranges", type=int, default=0,
                    help="annotated ranges a step, one after another, named layers.K (0: only the steps)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    if a.frame_pool:
        if a.frames == "unshared":
            ap.error("--frame-pool shares frames; it does not go with --frames unshared")
        stacks = make_pooled_stacks(rng, a.stacks, a.depth, a.frame_pool)
    else:
        stacks = make_stacks(rng, a.stacks, a.depth)
    max_entries = a.max_entries or (a.entries * 10)
    sim = Sim(rng, stacks, a.frames == "unshared", max_entries)
    params = [sim.malloc(rng.choice([4 << 20, 16 << 20, 64 << 20, 3 << 19]), rng.choice(stacks)) for _ in range(50)]
    anns = []
    heap = []  # --frees random: blocks live across steps
    step = 0
    while sim.total < a.entries:
        step += 1
        anns.append({"name": "ProfilerStep#%d" % step, "stage": "START", "device": 0, "time_us": sim.t})
        live = heap if a.frees == "random" else []
        allocs = rng.randint(100, 300)
        ranges = RangeWriter(anns, sim, a.ranges, allocs)
        for k in range(allocs):
            ranges.at(k)
            req = rng.choice([rng.randint(1, 4096), rng.randint(4096, SMALL), rng.randint(SMALL, 40 << 20)])
            live.append(sim.malloc(req, rng.choice(stacks)))
            if live and rng.random() < (0.45 if a.frees == "random" else 0.3):
                i = rng.randrange(len(live))
                live[i], live[-1] = live[-1], live[i]
                sim.dealloc(live.pop())
            if sim.total >= a.entries:
                break
        ranges.close()
        if a.frees == "random":
            # The heap lives on: trim it back to a working set, freeing at
            # random, so memory stays bounded while frees stay scattered.
            while len(heap) > a.live and sim.total < a.entries:
                i = rng.randrange(len(heap))
                heap[i], heap[-1] = heap[-1], heap[i]
                sim.dealloc(heap.pop())
            anns.append({"name": "ProfilerStep#%d" % step, "stage": "END", "device": 0, "time_us": sim.t})
            if step % 7 == 0 and sim.total < a.entries:
                sim.empty_cache()
            continue
        keep = live[: rng.randint(0, 3)] if sim.total < a.entries else live
        for addr in live[len(keep):]:
            if sim.total >= a.entries:
                keep.append(addr)
                continue
            sim.dealloc(addr)
        anns.append({"name": "ProfilerStep#%d" % step, "stage": "END", "device": 0, "time_us": sim.t})
        if step % 7 == 0 and sim.total < a.entries:
            sim.empty_cache()
    trace = sim.trace[-max_entries:]
    segments = []
    for base in sim.seg_bases:
        b0, size, pool, bl = sim.segments[base]
        blocks = []
        alloc = active = requested = 0
        for addr, bsize, req, state, stack in bl:
            blocks.append({"address": addr, "size": bsize, "requested_size": req, "state": state,
                           "frames": sim.frames(stack) if stack is not None else []})
            if state == "active_allocated":
                alloc += bsize
                active += bsize
                requested += req
        segments.append({"device": 0, "address": base, "total_size": size, "allocated_size": alloc,
                         "active_size": active, "requested_size": requested, "stream": 0,
                         "segment_type": pool, "segment_pool_id": (0, 0), "is_expandable": False,
                         "frames": [], "blocks": blocks})
    snap = {
        "segments": segments,
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                               "garbage_collection_threshold": 0.0, "expandable_segments": False,
                               "trace_alloc_max_entries": max_entries,
                               "trace_alloc_overflowed": sim.total > len(trace)},
        "external_annotations": anns,
    }
    with open(a.out, "wb") as f:
        pickle.dump(snap, f, protocol=a.protocol)
    print("%s: %d segments, %d trace entries (%d produced)" % (a.out, len(segments), len(trace), sim.total),
          file=sys.stderr)


if __name__ == "__main__":
    main()
