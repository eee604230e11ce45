"""How fast the modeler reads run files: `load_runs` (every check, the sums over flushes, the
ranks put together, the records packed) against parsing the same lines as JSON and nothing more
(the reader's own parser, `runtime.runfile._loads`): the part no reader can save. Taken in the same
process, interleaved, CPU time; the ratio is what to compare between commits (absolute times do
not hold on a shared machine).

    python benchmarks/read_speed.py [--paths 1000] [--ranks 4] [--rounds 5] [--steps 0]

The sweep is `modeler_memory.write_sweep`'s: one parameter, five points, five repetitions,
`--ranks` files per run, `--paths` call paths each, `--steps` step records each (and a comm record
per 5 steps: the records whose fields the reader checks one by one, review 101).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _args import positive_int  # noqa: E402
from modeler_memory import write_sweep  # noqa: E402  (benchmarks/ is the script's folder)

from modeler.readers.runs import load_runs  # noqa: E402
from runtime.runfile import _loads  # noqa: E402


def parse_only(files: list[Path]) -> int:
    loads = _loads()
    n = 0
    for f in files:
        with open(f, "rb") as stream:
            for line in stream:
                loads(line)
                n += 1
    return n


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paths", type=positive_int, default=1000, help="call paths per file (default 1000)")
    ap.add_argument("--ranks", type=positive_int, default=4, help="rank files per run (default 4)")
    ap.add_argument("--rounds", type=positive_int, default=5, help="interleaved rounds (default 5; medians are shown)")
    ap.add_argument("--steps", type=int, default=0, help="step records per file, and a comm record per 5 (default 0)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sp-read-"))
    try:
        size = write_sweep(work / "runs", args.paths, args.ranks, args.steps)
        files = sorted((work / "runs").rglob("*.jsonl"))
        lines = parse_only(files)
        base, read = [], []
        for _ in range(args.rounds):
            base.append(cpu(lambda: parse_only(files)))
            read.append(cpu(lambda: load_runs([work / "runs"])))
        b, r = statistics.median(base), statistics.median(read)
        print(f"{len(files)} files, {size / 2**20:.1f} MB, {lines} lines; medians of {args.rounds} interleaved rounds, CPU")
        print(f"  parse only (baseline) {b:8.3f} s   {b / lines * 1e6:6.2f} us/line")
        print(f"  load_runs             {r:8.3f} s   {r / lines * 1e6:6.2f} us/line")
        print(f"  ratio load_runs / parse only: {r / b:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
