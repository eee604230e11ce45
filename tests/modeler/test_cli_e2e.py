"""End to end with real run files: instrument a tiny program, sweep it with the launcher, fit and export.

Timing values are noisy on a shared machine, so the assertions rest on what is deterministic
(parameters, call paths, visits) and on a 25-fold difference in work between the sweep's ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = '''\
import argparse


def work(n):
    total = 0
    for i in range(n * n * 200):
        total += i
    return total


def light(n):
    return sum(range(n * 100))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, required=True)
    a = ap.parse_args()
    for _ in range(3):
        work(a.n)
        light(a.n)
    if a.n == 6:
        raise SystemExit(3)  # one point fails: left out with a warning


if __name__ == "__main__":
    main()
'''


def _py(args: list[str], cwd: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    env = clean_env(PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_instrument_sweep_fit_export(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text(PROGRAM)
    done = _py(["-m", "instrumentor.cli", str(src), "-o", str(tmp_path / "build")], tmp_path)
    assert done.returncode == 0, done.stderr
    done = _py(["-m", "runtime.launch", "--sweep", "n=4,6,8,12,16,20", "--repeat", "3", "--out", str(tmp_path / "runs"),
                "--", str(tmp_path / "build" / "main.py"), "--n", "{n}"], tmp_path)
    assert (tmp_path / "runs").is_dir(), done.stderr

    fit = _py(["-m", "modeler", "fit", "runs", "--metric", "visits,time", "--format", "json"], tmp_path)
    assert fit.returncode == 0, fit.stderr
    doc = json.loads(fit.stdout)
    assert doc["parameters"] == ["n"]
    assert doc["at"] == {"n": 20.0}
    assert "left out (failed)" in fit.stderr and "exit_code=3" in fit.stderr
    models = {(m["callpath"], m["metric"]): m for m in doc["models"]}
    work = [cp for cp, metric in models if cp.endswith("->work") and metric == "visits"]
    assert len(work) == 1, sorted(models)
    assert models[(work[0], "visits")]["model"] == "3" or models[(work[0], "visits")]["constant"] == pytest.approx(3.0)
    assert all(m["points"] == 5 for m in doc["models"]), "the failed point n=6 is left out"

    out = tmp_path / "x.jsonl"
    exp = _py(["-m", "modeler", "export", "--extrap", str(out), "runs", "--metric", "time"], tmp_path)
    assert exp.returncode == 0, exp.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    work_time = {l["params"]["n"]: sorted(l["value"])[0] for l in lines if l["callpath"] == work[0]}
    assert sorted(work_time) == [4, 8, 12, 16, 20]
    assert work_time[20] > 5 * work_time[4], work_time
