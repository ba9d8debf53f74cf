#!/usr/bin/env python3
"""Generate a PyTorch-Memory-Profiler peak snapshot (--save-peak-memory-snapshot).

Stdlib only; matches memory_profiler/core/memory_dispatch_mode.py's writer:
one key per device, tensors >= 1 MiB sorted by size, the peak above the
listed sum. Used for the committed fixture and the 200k-tensor benchmark:

  gen_estimate.py --tensors 200000 --devices 8 OUT.json
"""
import argparse
import json
import random

MODULES = ["self_attention.linear_qkv", "self_attention.core_attention", "self_attention.linear_proj",
           "mlp.linear_fc1", "mlp.linear_fc2", "input_layernorm", "pre_mlp_layernorm"]
PHASES = ["initialization", "setup_model_and_optimizer"]
FILES = [("/workspace/megatron-lm/megatron/core/transformer/attention.py", "forward", "query, key, value = self.get_query_key_value_tensors(hidden_states)"),
         ("/workspace/megatron-lm/megatron/core/transformer/mlp.py", "forward", "intermediate_parallel, bias_parallel = self.linear_fc1(hidden_states)"),
         ("/workspace/megatron-lm/megatron/core/tensor_parallel/layers.py", "__init__", "self.weight = Parameter(torch.empty("),
         ("/workspace/megatron-lm/megatron/core/optimizer/distrib_optimizer.py", "step", "self.optimizer.step()"),
         ("/workspace/megatron-lm/megatron/core/pipeline_parallel/schedules.py", "backward_step", "torch.autograd.backward(")]


def frame(f, line, fn, code):
    return '  File "%s", line %d, in %s\n    %s\n' % (f, line, fn, code)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--tensors", type=int, default=2000, help="tensors in all, spread over the devices")
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    stacks = []
    for i in range(60):
        depth = rng.randint(3, 9)
        st = [frame("/workspace/megatron-lm/pretrain_gpt.py", 300, "<module>", "pretrain(")]
        for _ in range(depth):
            f, fn, code = rng.choice(FILES)
            st.append(frame(f, rng.randint(10, 900), fn, code))
        stacks.append(st)
    phases = PHASES + ["%s_iter_%d" % (p, it) for it in range(a.iterations)
                       for p in ("forward_backward", "optimizer_step")]
    out = {}
    per = a.tensors // a.devices
    for d in range(a.devices):
        tensors = []
        for _ in range(per):
            layer = rng.randrange(a.layers)
            mod = "Unknown" if rng.random() < 0.15 else "GPTModel.decoder.layers.%d.%s" % (layer, rng.choice(MODULES))
            size = rng.choice([1, 2, 4, 8, 16, 64, 256]) << 20
            size += rng.randrange(0, 1 << 16) * 512
            dims = [rng.choice([1, 2, 4, 8]), rng.choice([1024, 4096]), size // 4096]
            tensors.append({"size_bytes": size, "size_mb": round(size / 2**20, 4),
                            "shape": "torch.Size([%d, %d, %d])" % tuple(dims),
                            "module": mod, "phase": rng.choice(phases),
                            "create_stack_trace": rng.choice(stacks) if rng.random() > 0.05 else [],
                            "release_stack_trace": rng.choice(stacks) if rng.random() < 0.3 else []})
        tensors.sort(key=lambda t: -t["size_bytes"])
        listed = sum(t["size_bytes"] for t in tensors)
        out["cuda:%d" % d] = {"peak_memory_mb": round(listed / 2**20 * 1.07 + 300, 2), "tensors": tensors}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
