"""How much memory the modeler needs for its input: peak resident memory of `modeler fit` against the
size of the run files, and what the files read keep, packed (as the modeler holds them) and as
`read_run` gives them (the baseline: a dict of objects per profile record, as before review 21).

    python benchmarks/modeler_memory.py [--paths 1000,4000] [--ranks 4] [--keep DIR]

For each number of call paths it writes a sweep (one parameter, five points, five repetitions,
`--ranks` rank files per run: 100 files at 4 ranks), then in fresh processes: reads them with
`load_runs` (resident memory growth, packed and not), and runs `modeler fit` on them (peak resident
memory, VmHWM). Memory is not timing: the figures repeat from run to run within a few MB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

READ = r"""
import gc, json, sys
sys.path.insert(0, sys.argv[1])
from runtime import runfile
from modeler.readers import runs
def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024
if sys.argv[3] == "plain":
    runfile.Run.pack = lambda self, shared=None: None  # the baseline: the files as read_run gives them
gc.collect()
before = rss()
loaded = runs.load_runs([sys.argv[2]])
gc.collect()
records = sum(len(f.run.profile) for r in loaded.runs for f in r.files)
print(json.dumps({"held": rss() - before, "records": records}))
"""

PEAK = r"""
import atexit, runpy, sys
sys.path.insert(0, sys.argv[1])
def report():
    status = open("/proc/self/status").read()
    print("VmHWM", int(status.split("VmHWM:")[1].split()[0]) * 1024, file=sys.stderr)
atexit.register(report)
sys.argv = ["modeler", "fit", sys.argv[2], "-q"]
runpy.run_module("modeler", run_name="__main__")
"""


def write_sweep(out: Path, paths: int, ranks: int, steps: int = 0) -> int:
    """Run files of `paths` call paths (a tree three levels deep under `main`), with `steps` step
    records and a comm record per 5 steps each; their total size."""
    regions = [{"type": "region", "id": i, "kind": "function", "name": f"f{i}", "file": f"m{i % 7}.py", "line": i}
               for i in range(1, paths + 2)]
    size = 0
    for p in (1, 2, 4, 8, 16):
        for rep in range(5):
            d = out / f"p{p}-{rep}"
            d.mkdir(parents=True)
            for rank in range(ranks):
                header = {"type": "header", "format": "scaleprobe-run", "version": 1, "run_id": f"r{p}-{rep}",
                          "experiment": "mem", "params": {"p": p}, "repetition": rep, "rank": rank,
                          "world_size": ranks, "pid": 1000 + rank}
                recs = [header, *regions]
                for i in range(paths):
                    path = [1, 2 + i % 40, 2 + i] if i >= 40 else [1, 2 + i]
                    t = (i + 1) * 1000 * p + rep
                    recs.append({"type": "profile", "flush": 1, "path": path, "visits": p * 3, "incl_ns": t,
                                 "excl_ns": t // 2, "min_ns": t // 9, "max_ns": t // 2, "sumsq_ns": float(t) * t,
                                 "recursive": 0})
                recs.append({"type": "profile", "flush": 1, "path": [1], "visits": 1, "incl_ns": 10**10 * p,
                             "excl_ns": 10**6, "min_ns": 10**10 * p, "max_ns": 10**10 * p, "sumsq_ns": 0.0,
                             "recursive": 0})
                if steps:
                    recs.append({"type": "region", "id": paths + 2, "kind": "step", "name": "train:for@3", "file": "m.py",
                                 "line": 3})
                for i in range(steps):
                    recs.append({"type": "step", "region": paths + 2, "index": i, "step": i, "start_ns": i * 10**6,
                                 "duration_ns": 9 * 10**5 + p * i, "data_wait_ns": 10**4, "comm_ns": 0, "gpu_ns": None,
                                 "memory": None, "tid": 4711})
                    if i % 5 == 0:
                        recs.append({"type": "comm", "flush": 1, "op": "all_reduce", "bytes": 4096 * p, "group_size": ranks,
                                     "calls": 1, "time_ns": 10**5, "gpu_ns": None, "gpu_calls": 0, "callpath": [1, 2]})
                recs.append({"type": "end", "status": "ok", "exit_code": 0})
                text = "".join(json.dumps(r) + "\n" for r in recs)
                (d / f"rank{rank}.{1000 + rank}.jsonl").write_text(text)
                size += len(text)
    return size


def run(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, str(REPO), *args], capture_output=True, text=True,
                          check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paths", default="1000,4000", help="numbers of call paths, comma-separated")
    ap.add_argument("--ranks", type=int, default=4, help="rank files per run (default 4)")
    ap.add_argument("--keep", type=Path, help="write the run files here and keep them")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="sp-mem-"))
    mb = 2**20
    print(f"{'paths':>6} {'files MB':>9} {'records':>8} | {'held, as read':>14} {'held, packed':>13} "
          f"{'ratio':>6} | {'fit peak MB':>11} {'peak / files':>12}")
    try:
        for n in (int(x) for x in args.paths.split(",")):
            d = work / f"paths{n}"
            shutil.rmtree(d, ignore_errors=True)
            size = write_sweep(d, n, args.ranks)
            plain = json.loads(run(READ, str(d), "plain").stdout)
            packed = json.loads(run(READ, str(d), "packed").stdout)
            fit = run(PEAK, str(d))
            peak = int(fit.stderr.strip().splitlines()[-1].split()[1])
            per = lambda r: r["held"] / r["records"]  # noqa: E731
            print(f"{n:>6} {size / mb:>9.1f} {packed['records']:>8} | {per(plain):>10.0f} B/r {per(packed):>9.0f} B/r "
                  f"{plain['held'] / max(packed['held'], 1):>5.1f}x | {peak / mb:>11.0f} {peak / size:>11.1f}x")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
