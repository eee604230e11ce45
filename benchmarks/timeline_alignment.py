"""How well `modeler timeline` aligns the ranks of one host: its figure in docs/report.md.

Two ranks (`python -m runtime.launch --nproc 2`, `SCALEPROBE_TRACE=1`) busy-wait until one instant of
the monotonic clock that every process of the host shares (`perf_counter_ns`, CLOCK_MONOTONIC),
then each enters a region `marker`. The raw events say how far apart, on that one clock, the two
markers began; the timeline places each process by its header (`start_unix` at `start_ns`). The
difference of the two is the timeline's alignment error: it would be 0 with headers whose two clocks
were read at one moment (review 90 F1: they were read up to a few ms apart).

    python benchmarks/timeline_alignment.py [--repeat 3]

prints, per run, the alignment error and the spread of the headers' `start_unix - start_ns` (the
same clock's offset, which should be one constant on a host), in µs. Pass `--src DIR` to measure
another checkout's runtime (PYTHONPATH=DIR) in the same run, interleaved, for a before/after.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _args import positive_int  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

PROGRAM = """\
import os, time


def marker():
    t = time.perf_counter() + 0.001
    while time.perf_counter() < t:
        pass


def main():
    deadline = int(os.environ["DEADLINE"])
    while time.perf_counter_ns() < deadline:  # the same CLOCK_MONOTONIC in every process of the host
        pass
    marker()


main()
"""


def measure(src: Path, build: Path, out: Path) -> tuple[float, float]:
    """(alignment error, spread of the header offsets), in µs, of one 2-rank run with `src`'s runtime."""
    deadline = time.perf_counter_ns() + 4_000_000_000  # after both ranks have started
    env = dict(os.environ, PYTHONPATH=str(src), SCALEPROBE_TRACE="1", SCALEPROBE_QUIET="1", DEADLINE=str(deadline))
    # run from the build's folder: `python -m` puts the working directory first on sys.path, and in
    # a checkout that would be its runtime, whatever PYTHONPATH says
    subprocess.run([sys.executable, "-m", "runtime.launch", "--nproc", "2", "--out", str(out), str(build / "main.py")],
                   env=env, check=True, capture_output=True, timeout=300, cwd=build)
    sys.path.insert(0, str(REPO))
    from runtime.runfile import read_run

    placed, raw, offsets = [], [], []
    for f in sorted(glob.glob(str(out / "**" / "rank*.jsonl"), recursive=True)):
        run = read_run(f)
        h = run.header
        names = {rid: reg.name for rid, reg in run.regions.items()}
        start = next(e[1] for e in run.events if names.get(e[0]) == "marker")
        raw.append(start)  # the shared monotonic clock
        placed.append(h["start_unix"] + (start - h["start_ns"]) / 1e9)  # where the timeline puts it
        offsets.append(h["start_unix"] - h["start_ns"] / 1e9)
    if len(raw) != 2:
        raise SystemExit(f"expected 2 rank files under {out}, found {len(raw)}")
    error = (placed[0] - placed[1]) - (raw[0] - raw[1]) / 1e9
    return error * 1e6, (max(offsets) - min(offsets)) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=positive_int, default=3, help="runs per checkout (default 3)")
    ap.add_argument("--src", type=Path, help="another checkout to measure beside this one (its runtime)")
    args = ap.parse_args()
    if args.src is not None and not (args.src / "runtime" / "launch.py").is_file():
        ap.error(f"--src: {args.src} is not a scaleprobe checkout (no runtime/launch.py in it)")
    sources = [("this checkout", REPO)] + ([("--src", args.src.resolve())] if args.src else [])
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "src").mkdir()
        (t / "src" / "main.py").write_text(PROGRAM)
        subprocess.run([sys.executable, "-m", "instrumentor", str(t / "src"), "-o", str(t / "build")],
                       env=dict(os.environ, PYTHONPATH=str(REPO)), check=True, capture_output=True, timeout=300, cwd=t)
        print(f"{'runtime':<16} {'run':>3} {'alignment error µs':>20} {'header offset spread µs':>25}")
        for k in range(args.repeat):
            for label, src in sources:  # interleaved: the machine's load falls on both alike
                err, spread = measure(src, t / "build", t / f"runs-{label.strip('-')}-{k}")
                print(f"{label:<16} {k:>3} {err:>20.1f} {spread:>25.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
