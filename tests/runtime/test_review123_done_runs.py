"""Review 123 LOW-2: a run whose ranks had all written their `ok` end record when Ctrl-C came was
recorded `interrupted` and made again on resume. It is now `ok`, and the sweep still stops after
it; a rank that was stopped mid-run (its end record says `signal`) keeps the run interrupted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from runtime.launch_ranks import Outcome
from runtime.sweep_files import done_before_the_signal
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
INTERRUPTED = Outcome("interrupted", 130, None, "interrupted by SIGINT", 1.0, signal.SIGINT)


def _rank_file(directory: Path, rank: int, end: dict | None, helper: bool = False) -> None:
    header = {"type": "header", "format": "scaleprobe-run", "version": 1, "rank": rank, "pid": 100 + rank}
    if helper:
        header["child_of"] = 99  # a DataLoader worker's (runtime.runfile.is_helper_process)
    lines = [header, {"type": "region", "callpath": "main"}] + ([end] if end is not None else [])
    (directory / f"rank{rank}.{100 + rank + (50 if helper else 0)}.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in lines))


def _ok(status: str = "ok") -> dict:
    return {"type": "end", "status": status, "exit_code": 0, "signal": None if status == "ok" else 2}


def test_an_interrupted_run_whose_every_rank_had_ended_ok_is_ok_and_still_stops_the_sweep(tmp_path):
    for rank in range(3):
        _rank_file(tmp_path, rank, _ok())
    out = done_before_the_signal(INTERRUPTED, tmp_path, 3)
    assert (out.status, out.exit_code, out.error) == ("ok", 0, None)
    assert out.signal == signal.SIGINT  # the sweep stops after it (sweep_run: a signal with another status)


def test_a_rank_stopped_mid_run_or_missing_keeps_the_run_interrupted(tmp_path):
    for rank in range(2):
        _rank_file(tmp_path, rank, _ok())
    assert done_before_the_signal(INTERRUPTED, tmp_path, 3) == INTERRUPTED  # rank 2 never wrote a file
    _rank_file(tmp_path, 2, _ok("signal"))  # it caught Ctrl-C and exited 0: its end says signal
    assert done_before_the_signal(INTERRUPTED, tmp_path, 3) == INTERRUPTED
    _rank_file(tmp_path, 2, None)  # no end record: cut off
    assert done_before_the_signal(INTERRUPTED, tmp_path, 3) == INTERRUPTED
    _rank_file(tmp_path, 2, _ok())
    _rank_file(tmp_path, 1, None, helper=True)  # a worker's file may end without its end record
    assert done_before_the_signal(INTERRUPTED, tmp_path, 3).status == "ok"
    failed = Outcome("failed", 1, 0, "boom", 1.0)
    assert done_before_the_signal(failed, tmp_path, 3) is failed  # only an interruption is looked at


SLOW_EXIT = ("import sys, time\n"
             "class Slow:\n"
             "    def __del__(self):\n"  # after the recorder's end record (atexit), at the module's teardown
             "        time.sleep(4)\n"
             "keep = Slow()\n"
             "print('done', flush=True)\n")


def test_ctrl_c_after_the_ranks_wrote_their_end_records_keeps_the_run(tmp_path):
    (tmp_path / "prog.py").write_text(SLOW_EXIT)
    e = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1")
    cmd = [sys.executable, "-m", "runtime.launch", "--out", "runs", "--sweep", "n=1,2", "--instrument", "--",
           "prog.py", "{n}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ended() -> bool:
        return any(f.read_text().rstrip().endswith("}") and '"type":"end"' in f.read_text().splitlines()[-1]
                   for f in (tmp_path / "runs").glob("prog/*n-1*/rank*.jsonl"))

    try:
        deadline = time.monotonic() + 60
        while not ended() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ended(), "the rank never wrote its end record"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err  # the sweep stops
    (first,) = (tmp_path / "runs" / "prog").glob("*n-1*")
    record = json.loads((first / "launch.json").read_text())
    assert record["status"] == "ok" and record["exit_code"] == 0, (record, err)
    assert not list((tmp_path / "runs" / "prog").glob("*n-2*/rank*.jsonl"))  # the next point never started
    # a resume makes only the point that was not made
    again = subprocess.run(cmd, cwd=tmp_path, env=e, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads((first / "launch.json").read_text())["run_id"] == record["run_id"]
