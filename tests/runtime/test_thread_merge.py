"""A process's `profile` records are one per call path and flush, merged over its threads
(docs/format.md). Review 54 F3: the recorder wrote one per thread and path (16 records of each
path per flush from a pool of 16 threads; a thread per task wrote 491,777 records for 3 call
paths). Both backends, in a subprocess each."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from runtime.runfile import read_run

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """\
import threading
from runtime.manual import region

@region("task")
def task(k):
    with region("inner"):
        return sum(i * i for i in range(200 + k))

def worker(n):
    for k in range(n):
        task(k)

threads = [threading.Thread(target=worker, args=(5 + t,)) for t in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
task(0)
"""


@pytest.mark.parametrize("backend", ["c", "python"])
def test_one_profile_record_per_call_path_and_flush(tmp_path: Path, backend: str):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"),
                    **({"SCALEPROBE_PURE": "1"} if backend == "python" else {}))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [f] = (tmp_path / "runs").glob("*.jsonl")
    records = [json.loads(line) for line in f.read_text().splitlines()]
    per_flush = Counter((r["flush"], tuple(r["path"])) for r in records if r["type"] == "profile")
    assert per_flush and max(per_flush.values()) == 1, per_flush
    run = read_run(f)
    assert run.header["backend"] == backend
    names = {rid: reg.name for rid, reg in run.regions.items()}
    profile = {tuple(names[i] for i in p): st for p, st in run.profile.items()}
    # nothing lost in the merge: 5 + 6 + ... + 10 calls on the threads, one on the main thread
    assert profile[("task",)].visits == sum(range(5, 11)) + 1
    assert profile[("task", "inner")].visits == sum(range(5, 11)) + 1
    st = profile[("task",)]
    assert 0 < st.min_ns <= st.max_ns and st.incl_ns >= st.excl_ns > 0
    assert st.sumsq_ns >= st.visits * st.min_ns ** 2
