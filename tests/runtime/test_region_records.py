"""A run file holds the region records of the regions its process ran, each before the first record
that uses it (review 21: a run that called 4 functions of a 10,000-function project wrote 10,021
region records into every rank's file)."""
import json
import subprocess
import sys
from pathlib import Path

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''
import os, sys, time
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", tuple((i, "function", f"unused{i}", i) for i in range(100, 400))
                          + ((1, "function", "main", 1), (2, "function", "late", 2), (3, "function", "child", 3)))


def late():
    if __sp_on__: __sp_enter__(2)
    try:
        time.sleep(0.001)
    finally:
        if __sp_on__: __sp_exit__(2)


def child():
    if __sp_on__: __sp_enter__(3)
    try:
        pass
    finally:
        if __sp_on__: __sp_exit__(3)


def main():
    if __sp_on__: __sp_enter__(1)
    try:
        time.sleep(0.3)  # a flush of its own happens here (SCALEPROBE_FLUSH_INTERVAL)
        late()
        if os.fork() == 0:
            child()
            import runtime.probe
            runtime.probe.finish()
            os._exit(0)
        os.wait()
    finally:
        if __sp_on__: __sp_exit__(1)


main()
'''


def test_only_the_regions_that_ran_are_written_each_before_its_first_use(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_FLUSH_INTERVAL="0.1")
    p = subprocess.run([sys.executable, "prog.py"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    files = find_run_files(tmp_path / "out")
    assert len(files) == 2
    for f in files:
        run = read_run(f)
        assert run.problems == [], run.problems
        defined: set[int] = set()
        used: set[int] = set()
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            if rec["type"] == "region":
                defined.add(rec["id"])
            elif rec["type"] == "profile":
                assert set(rec["path"]) <= defined, (f, rec, defined)  # written before it is used
                used.update(rec["path"])
        assert defined == used and not defined & set(range(100, 400)), (f, sorted(defined))
        assert (3 in defined) if "forked_from" in run.header else ({1, 2} <= defined and 3 not in defined)
