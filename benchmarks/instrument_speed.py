"""How fast the instrumentor is, as ratios against a bare libcst round trip measured in the same run.

    .venv/bin/python benchmarks/instrument_speed.py [--limit 300] [--jobs 1,2] [--source DIR]
    .venv/bin/python benchmarks/instrument_speed.py --start-methods fork,forkserver [--limit 120] [--rounds 5]

Default corpus: the standard library's .py files (without its test suites), the first --limit of
them in sorted order. Prints:
- the bare baseline: libcst parse_module + .code of every file, in this process;
- instrument_source on the same files in this process (the rewrite alone) and its ratio;
- `instrument --all` on a copy of the files (hashing, worker processes, writing) per --jobs value,
  files/s, ratio to a baseline re-estimated just before and after (every 4th file, x4) and
  speed-up over --jobs 1;
- a re-run with nothing changed, as a fraction of the first run.
Absolute times are noisy on a shared machine; the ratios are what to compare.

With --start-methods: how long `instrument SRC -o OUT --jobs 2` takes from a fresh process (what a
user waits for: the worker pool's start included) with each way of starting workers
(`instrumentor.project.START_METHOD`), on testdata/sample_code and on the --limit corpus, rounds
interleaved; the first method named is the baseline of the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import libcst

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from instrumentor.project import Options, Project, decode  # noqa: E402
from instrumentor.regions import IdAllocator, region_bound  # noqa: E402
from instrumentor.transform import instrument_source  # noqa: E402

_SKIP = {"test", "tests", "idle_test", "site-packages", "__pycache__", "lib2to3", "turtledemo"}


def corpus(root: Path, limit: int) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP)
        files.extend(Path(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    files.sort()
    return files[:limit] if limit else files


def roundtrip(text: str) -> None:
    try:
        libcst.parse_module(text).code
    except Exception:
        pass


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path(os.__file__).parent, help="code base (default: the stdlib)")
    parser.add_argument("--limit", type=int, default=300, help="files to use (0: all)")
    parser.add_argument("--jobs", default="1,2", help="comma-separated --jobs values")
    parser.add_argument("--start-methods", default="", help="e.g. fork,forkserver: compare pool start methods")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per start method (--start-methods)")
    args = parser.parse_args()

    files = corpus(args.source, args.limit)
    if args.start_methods:
        return compare_start_methods(files, args.source, args.start_methods.split(","), args.rounds)
    texts = []
    for path in files:
        try:
            texts.append((path, decode(path.read_bytes())[0]))
        except (SyntaxError, UnicodeDecodeError):
            continue
    mb = sum(len(t) for _, t in texts) / 1e6
    print(f"corpus: {len(texts)} files, {mb:.1f} MB from {args.source}")

    # File by file, baseline and rewrite alternate: load from other processes on a shared machine
    # then hits both sides alike instead of whichever phase it happens to overlap.
    base = ours = 0.0
    for index, (path, text) in enumerate(texts):
        def baseline() -> None:
            roundtrip(text)

        def rewrite() -> None:
            instrument_source(text, path.name, ids=IdAllocator(range(region_bound(text))))

        if index % 2:
            ours += timed(rewrite)
            base += timed(baseline)
        else:
            base += timed(baseline)
            ours += timed(rewrite)
    print(f"baseline parse+code:   {base:7.2f} s  {len(texts) / base:7.1f} files/s")
    print(f"instrument_source:     {ours:7.2f} s  {len(texts) / ours:7.1f} files/s  ratio {ours / base:.2f}")

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "src")
        for path, _ in texts:
            dest = src / path.relative_to(args.source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        first_by_jobs = {}
        for jobs in [int(j) for j in args.jobs.split(",")]:
            out = Path(tmp, f"out{jobs}")
            base_now = timed(lambda: [roundtrip(t) for _, t in texts[::4]]) * 4
            first = timed(lambda: Project(Options(src, out, all=True, jobs=jobs)).build())
            base_now = (base_now + 4 * timed(lambda: [roundtrip(t) for _, t in texts[::4]])) / 2
            first_by_jobs[jobs] = first
            speedup = first_by_jobs[min(first_by_jobs)] / first
            print(
                f"instrument --jobs {jobs}:   {first:7.2f} s  {len(texts) / first:7.1f} files/s  "
                f"ratio {first / base_now:.2f} (to a baseline estimate taken around it)  speed-up {speedup:.2f}x"
            )
            again = timed(lambda: Project(Options(src, out, all=True, jobs=jobs)).build())
            print(f"  re-run, no change:   {again:7.2f} s  = {100 * again / first:.1f}% of the first run")
    print(f"cores available: {os.cpu_count()}")
    return 0


_BUILD = """
import sys
sys.path.insert(0, {repo!r})
from instrumentor import project
from instrumentor.cli import main
project.START_METHOD = {method!r}
args = [{src!r}, "-o", {out!r}, "--jobs", "2", "-q", "--all"]
sys.exit(main(args) or (main(args) if {again!r} else 0))
"""


def compare_start_methods(files: list[Path], source: Path, methods: list[str], rounds: int) -> int:
    import statistics
    import subprocess

    repo = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        corpus_dir = Path(tmp, "corpus")
        for path in files:
            dest = corpus_dir / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        trees = [("testdata/sample_code", Path(repo, "testdata", "sample_code")),
                 (f"{len(files)} files of {source}", corpus_dir)]
        for name, src in trees:
            times: dict[tuple[str, bool], list[float]] = {(m, a): [] for m in methods for a in (False, True)}
            for round_ in range(rounds):
                for method in methods if round_ % 2 == 0 else methods[::-1]:
                    for again in (False, True):  # a first build; then a build and a no-change re-run
                        out = Path(tmp, f"out-{method}-{round_}-{again}")
                        code = _BUILD.format(repo=repo, method=method, src=str(src), out=str(out), again=again)
                        start = time.perf_counter()
                        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
                        times[method, again].append(time.perf_counter() - start)
                        if done.returncode != 0:
                            print(f"{method}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
                        elif done.stderr:
                            print(f"{method}: stderr: {done.stderr.strip()[-300:]}")
            print(f"{name}, instrument --jobs 2 from a fresh process, best / median of {rounds}:")
            for again, what in ((False, "build"), (True, "build + no-change re-run in the same process")):
                base = min(times[methods[0], again])
                print(f"  {what}:")
                for method in methods:
                    best, median = min(times[method, again]), statistics.median(times[method, again])
                    print(f"    {method:11s} {best:6.2f} s / {median:6.2f} s   best ratio to {methods[0]}: {best / base:.2f}")
    print(f"cores available: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
