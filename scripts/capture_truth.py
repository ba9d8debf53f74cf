#!/usr/bin/env python3
"""Capture real allocator snapshots with ground truth: what each live tensor
IS, read from the objects at dump time (not from stacks or any rule of ours).

Needs torch with CUDA. Each scenario runs in a fresh process and writes:

  NAME.pickle      torch.cuda.memory._dump_snapshot, PyTorch's defaults
                   (_record_memory_history() with no arguments)
  NAME.truth.json  {"tensors": [[data_ptr, storage bytes, role, name], ...],
                    "sums": {role: bytes}, "memory_allocated": ..., ...}
                   role: Parameter, Gradient, Optimizer State, Buffer,
                   Input, Loss (as in gpt_adamw.truth.json)

Scenarios (shapes gpt_adamw does not have):
  cnn_sgd    a ResNet-style CNN (conv, BatchNorm buffers), SGD with
             momentum, fp16 autocast with GradScaler, 4 steps
  gpt_ckpt   a transformer with activation checkpointing, Adam
             (foreach), 3 steps, gradients kept

  capture_truth.py OUTDIR [SCENARIO...]
"""
import json
import os
import subprocess
import sys


def truth_of(torch, model, opt, batch, loss, extra=()):
    seen = {}

    def add(t, role, name):
        if t is None or not t.is_cuda:
            return
        s = t.untyped_storage()
        ptr = s.data_ptr()
        if ptr in seen:
            return
        seen[ptr] = [ptr, s.nbytes(), role, name]

    for n, p in model.named_parameters():
        add(p, "Parameter", n)
        add(p.grad, "Gradient", n)
    names = {id(p): n for n, p in model.named_parameters()}
    for p, st in opt.state.items():
        for k, v in st.items():
            if torch.is_tensor(v):
                add(v, "Optimizer State", names.get(id(p), "?") + "." + k)
    for n, b in model.named_buffers():
        add(b, "Buffer", n)
    for i, x in enumerate(batch):
        add(x, "Input", "batch.%d" % i)
    add(loss, "Loss", "loss")
    for t, role, name in extra:
        add(t, role, name)
    tensors = sorted(seen.values())
    sums = {}
    for _, size, role, _ in tensors:
        sums[role] = sums.get(role, 0) + size
    return {"tensors": tensors, "sums": sums}


def cnn_sgd(torch):
    nn = torch.nn

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    model = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                          block(64, 64, 1), block(64, 128, 2), block(128, 256, 2), block(256, 512, 2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(4):
        x = torch.randn(32, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (32,), device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if step < 3:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    # The last step's gradients are kept (its backward ran, its step did not).
    return model, opt, (x, y), loss, [(scaler._scale, "Optimizer State", "scaler._scale"),
                                      (scaler._growth_tracker, "Optimizer State", "scaler._growth_tracker")]


def gpt_ckpt(torch):
    from torch.utils.checkpoint import checkpoint
    nn = torch.nn
    d, layers, vocab, seq = 512, 6, 8192, 256

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
                                        for _ in range(layers))
            self.head = nn.Linear(d, vocab)

        def forward(self, idx):
            h = self.emb(idx)
            for b in self.blocks:
                h = checkpoint(b, h, use_reentrant=False)
            return self.head(h)

    model = GPT().cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)
    for step in range(3):
        idx = torch.randint(0, vocab, (8, seq), device="cuda")
        tgt = torch.randint(0, vocab, (8, seq), device="cuda")
        loss = nn.functional.cross_entropy(model(idx).view(-1, vocab), tgt.view(-1))
        loss.backward()
        if step < 2:
            opt.step()
            opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return model, opt, (idx, tgt), loss, []


SCENARIOS = {"cnn_sgd": cnn_sgd, "gpt_ckpt": gpt_ckpt}


def run_scenario(name, out):
    import torch
    torch.cuda.init()
    torch.cuda.memory._record_memory_history()  # PyTorch's defaults
    model, opt, batch, loss, extra = SCENARIOS[name](torch)
    truth = truth_of(torch, model, opt, batch, loss, extra)
    truth.update({"scenario": name, "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                  "memory_allocated": torch.cuda.memory_allocated(),
                  "max_memory_allocated": torch.cuda.max_memory_allocated()})
    torch.cuda.memory._dump_snapshot(os.path.join(out, name + ".pickle"))
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(os.path.join(out, name + ".truth.json"), "w") as f:
        json.dump(truth, f)


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(SCENARIOS)
    if len(names) == 1 and os.environ.get("CAPTURE_CHILD"):
        run_scenario(names[0], out)
        return
    os.makedirs(out, exist_ok=True)
    for n in names:
        r = subprocess.run([sys.executable, __file__, out, n], env=dict(os.environ, CAPTURE_CHILD="1"))
        print(n, "exit", r.returncode, flush=True)


if __name__ == "__main__":
    main()
