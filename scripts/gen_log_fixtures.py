#!/usr/bin/env python3
"""Write training-log fixtures in the forms launchers and loggers give them.

Stdlib only. Each file is what Megatron-LM or torchtitan print once a
launcher (torchrun, srun -l, torchelastic) and a logger have wrapped the
lines: rank prefixes, timestamps, CRLF, ANSI colours, carriage-return
progress, validation steps, a fork's extra fields.

  gen_log_fixtures.py OUTDIR
"""
import os
import sys

ESC = "\x1b"


def megatron(rank, it, mx_alloc, mx_res):
    return ("[Rank %d] (after %d iterations) memory (MB) | allocated: %.2f | max allocated: %.2f | "
            "reserved: %.1f | max reserved: %.1f" % (rank, it, mx_alloc * 0.8, mx_alloc, mx_res * 0.95, mx_res))


def titan(step, mem_gib, pct, peak=None):
    extra = "  peak: %.2fGiB" % peak if peak is not None else ""
    return ("[titan] 2025-06-04 08:5%d:48,074 - root - INFO - %sstep: %2d  %sloss: %7.4f  %smemory: %5.2fGiB(%.2f%%)%s  tps: 375%s"
            % (step % 10, ESC + "[31m", step, ESC + "[32m", 12.0 - step / 10, ESC + "[33m", mem_gib, pct, extra, ESC + "[39m"))


def write(out, name, lines, newline="\n"):
    with open(os.path.join(out, name), "w", newline="") as f:
        f.write(newline.join(lines) + newline)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # torchrun --tee 3: "[rankN]:" before Megatron's own "[Rank N]", CRLF
    # line ends, NCCL chatter, four ranks interleaved.
    lines = ["[rank%d]:NCCL INFO Bootstrap : Using eth0:10.0.0.%d<0>" % (r, r) for r in range(4)]
    lines.append("[rank0]:Theoretical memory footprints: weight and optimizer=40960.00 MB, activation=12000.50 MB, total=52960.50 MB")
    for it in (10, 20):
        for r in range(4):
            lines.append("[rank%d]:%s" % (r, megatron(r, it, 12000 + 100 * r + it, 14000 + 100 * r)))
    write(out, "megatron_torchrun.log", lines, "\r\n")
    # A logger's timestamp and level first, the fork's "(estimated)"
    # theoretical line, no launcher prefix.
    lines = ["2025-06-04 08:51:40,000 INFO Theoretical memory footprints (estimated): weight and optimizer=40960.00 MB, activation=9000.00 MB, total=49960.00 MB"]
    for it in (10, 20):
        for r in (1, 0):
            lines.append("2025-06-04 08:51:%02d,074 INFO megatron.training: %s" % (40 + it, megatron(r, it, 11000 + 50 * r + it, 13000 + 50 * r)))
    write(out, "megatron_logger.log", lines)
    # srun -l: "N: " task prefixes on torchtitan lines, which carry no rank
    # of their own; a carriage-return progress bar on one line.
    lines = []
    for step in (1, 2, 3):
        for r in (2, 3):
            lines.append("%d: %s" % (r, titan(step, 20 + r + step / 10, 21.0 + r)))
    lines.insert(2, "2: loading shards 10%\r2: loading shards 100%\r" + "2: " + titan(9, 99.0, 99.0))
    write(out, "titan_srun.log", lines)
    # torchelastic "[defaultN]:" prefixes, validation lines between training
    # steps, the fork's "peak:" field.
    lines = []
    for step in (10, 20):
        for r in (0, 1):
            lines.append("[default%d]:%s" % (r, titan(step, 30 + r, 31.58, peak=28 + r + step / 100)))
            lines.append("[default%d]:[titan] 2025-06-04 08:52:48,074 - root - INFO - validate step: %d  loss: 3.1  memory: 12.00GiB(12.63%%)" % (r, step))
    write(out, "titan_default.log", lines)
    # Only the estimate, as a run that died before its first report leaves.
    write(out, "megatron_theory_only.log", [
        "[rank0]:Theoretical memory footprints (estimated): weight and optimizer=40960.00 MB, activation=9000.00 MB, total=49960.00 MB",
        "[rank0]:Traceback (most recent call last):",
    ])


if __name__ == "__main__":
    main()
