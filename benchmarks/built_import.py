"""What compiling a built tree's modules with their original lines costs at import.

    .venv/bin/python benchmarks/built_import.py [--modules 40] [--functions 30] [--rounds 7]

Generates a project of N modules (functions with loops), instruments it, and times importing all
of them in fresh processes, three ways, interleaved round by round:
- `OUT lines`: SCALEPROBE_OUT_LINES=1, Python's own loader with its warm `__pycache__` (the
  baseline: what a built tree cost before `runtime.original_lines`);
- `original, cached`: the runtime's loader with its warm `opt-scaleprobe` cache;
- `original, cold`: the runtime's loader with its cache removed before each run (a read-only tree,
  or the first run after a build).
Prints the median import time of each and the ratio to the baseline (the machine is shared and
noisy: compare ratios, not times).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # (benchmarks/_args.py)

from _args import positive_int  # noqa: E402

MODULE_FUNCTION = '''
def f{i}(n, scale=1.0):
    """Function {i}."""
    total = 0.0
    for k in range(n):
        if k % 3 == 0:
            total += k * scale
        else:
            total -= {i} / (k + 1)
    while total > 1e6:
        total /= 2
    return total
'''


def make_project(root: Path, modules: int, functions: int) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    for m in range(modules):
        body = "import math\n" + "".join(MODULE_FUNCTION.format(i=i) for i in range(functions))
        (root / "pkg" / f"mod{m}.py").write_text(body)
    (root / "main.py").write_text(
        "import sys\nimport time\n\n\ndef main():\n    start = time.perf_counter()\n"
        + "\n".join(f"    import pkg.mod{m}" for m in range(modules))
        + "\n    print(f'IMPORT {time.perf_counter() - start:.6f}')\n    return pkg.mod0.f0(3)\n\n\nmain()\n"
    )


def run_once(out: Path, env: dict) -> float:
    proc = subprocess.run([sys.executable, str(out / "main.py")], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"the built program failed:\n{proc.stderr}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("IMPORT "))
    return float(line.split()[1])


def clear(out: Path, pattern: str) -> None:
    for cache in (out / "pkg" / "__pycache__").glob(pattern):
        cache.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=positive_int, default=40)
    parser.add_argument("--functions", type=positive_int, default=30)
    parser.add_argument("--rounds", type=positive_int, default=7)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sp-built-import-"))
    try:
        src, out = work / "src", work / "out"
        make_project(src, args.modules, args.functions)
        build = subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(out), "-q"],
                               cwd=REPO, capture_output=True, text=True)
        if build.returncode != 0:
            raise SystemExit(f"instrument failed:\n{build.stdout}{build.stderr}")
        lines = sum(len(p.read_text().splitlines()) for p in (out / "pkg").glob("mod*.py"))
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SCALEPROBE_", "PYTHONDONTWRITEBYTECODE"))}
        base.update(PYTHONPATH=str(REPO), SCALEPROBE_DISABLE="1")
        kinds = {
            "OUT lines": dict(base, SCALEPROBE_OUT_LINES="1"),
            "original, cached": dict(base),
            "original, cold": dict(base),
        }
        for env in kinds.values():  # warm both caches
            run_once(out, env)
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.rounds):
            for kind, env in kinds.items():
                if kind == "original, cold":
                    clear(out, "*.opt-scaleprobe*.pyc")
                times[kind].append(run_once(out, env))
        print(f"{args.modules} modules, {lines} instrumented lines; median of {args.rounds} rounds, "
              f"import of all modules in a fresh process")
        baseline = statistics.median(times["OUT lines"])
        for kind, values in times.items():
            med = statistics.median(values)
            print(f"  {kind:18s} {med * 1e3:8.1f} ms  {med / args.modules * 1e3:6.2f} ms/module  "
                  f"ratio {med / baseline:5.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
