"""The real-GPU checks of the runtime in one run (needs an NVIDIA GPU and torch with CUDA).

    .venv/bin/python benchmarks/gpu_check.py            # on a GPU machine
    .venv/bin/python benchmarks/gpu_check.py --fake     # anywhere: same checks, fake CUDA events

It runs a small instrumented training loop in a subprocess with GPU timing on, then checks from
the run file that every step and epoch got a GPU time and a CUDA memory peak, that GPU time does
not exceed wall time, and prints the cost of a pooled event pair per step and the step-time
overhead of GPU timing (same loop with SCALEPROBE_GPU=0, same run). Exit status 0: all passed;
1: a check failed; 2: no CUDA (and no --fake).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROGRAM = '''
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, iterate as __sp_iterate__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "gpu_prog.py", ((0, "function", "train", 4), (1, "epoch", "train.epoch", 6),
                                                              (2, "step", "train.step", 8), (3, "function", "forward", 20)))
import sys, torch
def train(device, epochs, steps, size):
    if __sp_on__: __sp_enter__(0)
    try:
        w = torch.randn(size, size, device=device, requires_grad=True)
        opt = torch.optim.SGD([w], lr=1e-3)
        if __sp_on__: __sp_enter__(1)
        try:
            for e in __sp_iterate__(1, range(epochs)):
                if __sp_on__: __sp_enter__(2)
                try:
                    for s in __sp_iterate__(2, range(steps)):
                        x = torch.randn(size, size, device=device)
                        loss = forward(w, x)
                        opt.zero_grad(); loss.backward(); opt.step()
                finally:
                    if __sp_on__: __sp_exit__(2)
        finally:
            if __sp_on__: __sp_exit__(1)
        if device == "cuda":
            torch.cuda.synchronize()
    finally:
        if __sp_on__: __sp_exit__(0)
def forward(w, x):
    if __sp_on__: __sp_enter__(3)
    try:
        return (x @ w).relu().sum()
    finally:
        if __sp_on__: __sp_exit__(3)
device = sys.argv[1]
if device == "cuda":
    torch.zeros(1, device="cuda")  # CUDA initialised before the loops, as in any GPU program
train(device, int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
'''


def run_program(tmp: Path, device: str, gpu_mode: str, epochs: int, steps: int, size: int, tag: str):
    from runtime.runfile import find_run_files, read_run

    prog = tmp / "gpu_prog.py"
    prog.write_text(PROGRAM)
    out = tmp / tag
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_")}
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(out), SCALEPROBE_GPU=gpu_mode, SCALEPROBE_QUIET="1")
    p = subprocess.run([sys.executable, str(prog), device, str(epochs), str(steps), str(size)], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"program failed ({tag}):\n{p.stderr[-3000:]}")
    [f] = find_run_files(out)
    return read_run(f)


def event_cost(torch, n: int = 2000) -> float:
    """Microseconds per pooled start/stop pair on the current stream, resolved lazily."""
    from runtime.gpu import CudaBackend, GpuTimer

    t = GpuTimer(CudaBackend(torch))
    for _ in range(50):
        t.stop(t.start(), {})
    torch.cuda.synchronize()
    t.resolve()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        t.stop(t.start(), {})
    dt = time.perf_counter_ns() - t0
    t.resolve(wait=True)
    return dt / n / 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fake", action="store_true", help="no GPU needed: CPU tensors and fake CUDA events")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--size", type=int, default=1024)
    a = ap.parse_args(argv)
    if a.fake:
        device, mode, size = "cpu", "fake", min(a.size, 64)
    else:
        try:
            import torch
        except ImportError:
            print("no CUDA: torch is not installed (use --fake for the CPU dry run)")
            return 2
        if not torch.cuda.is_available():
            print("no CUDA: torch.cuda.is_available() is False on this machine (use --fake for the CPU dry run)")
            return 2
        device, mode, size = "cuda", "1", a.size
        print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    failures = []

    def check(ok: bool, what: str) -> None:
        print(f"  [{'ok' if ok else 'FAILED'}] {what}")
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="sp-gpu-") as d:
        tmp = Path(d)
        timed = run_program(tmp, device, mode, a.epochs, a.steps, size, "timed")
        plain = run_program(tmp, device, "0", a.epochs, a.steps, size, "plain")
    steps = timed.steps
    print(f"run file checks ({len(steps)} steps, {len(timed.epochs)} epochs):")
    check(len(steps) == a.epochs * a.steps, "one record per step")
    check(all(isinstance(s["gpu_ns"], int) and s["gpu_ns"] > 0 for s in steps), "every step has a GPU time")
    check(all(isinstance(e["gpu_ns"], int) and e["gpu_ns"] > 0 for e in timed.epochs), "every epoch has a GPU time")
    check(all((s["memory"] or {}).get("cuda_peak_bytes") is not None for s in steps), "every step has a CUDA memory peak")
    if not a.fake:
        # The GPU may run behind the CPU, but over a whole epoch its busy time cannot exceed wall time much.
        check(all(e["gpu_ns"] <= e["duration_ns"] * 1.05 + 1e6 for e in timed.epochs), "epoch GPU time <= wall time")
    check(timed.end is not None and timed.end["status"] == "ok", "end record ok")
    check(all(s["gpu_ns"] is None for s in plain.steps), "SCALEPROBE_GPU=0 records no GPU time")
    med_t = statistics.median(s["duration_ns"] for s in steps[len(steps) // 4:])
    med_p = statistics.median(s["duration_ns"] for s in plain.steps[len(plain.steps) // 4:])
    print(f"median step: {med_p / 1e3:.1f} us without GPU timing, {med_t / 1e3:.1f} us with ({100 * (med_t - med_p) / med_p:+.1f}%)")
    if not a.fake:
        import torch

        print(f"pooled CUDA event start+stop: {event_cost(torch):.2f} us per timed interval")
        gpu_med = statistics.median(s["gpu_ns"] for s in steps)
        print(f"median step GPU time {gpu_med / 1e3:.1f} us")
    print("all GPU checks passed" if not failures else f"{len(failures)} check(s) FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
