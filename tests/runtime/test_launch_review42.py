"""Review 42 F1: under the launcher the run file was ended as soon as the script's code returned,
before Python waits for non-daemon threads and runs the atexit handlers: a training thread that
outlived the main code, and instrumented work in an atexit handler, were not recorded."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''\
import atexit, concurrent.futures, sys, threading, time
MODE = sys.argv[1]


def epoch_work():
    time.sleep(0.05)


def trainer():
    for epoch in range(3):
        epoch_work()
    print("TRAINER DONE", flush=True)


def at_exit_work():
    epoch_work()
    print("AT EXIT", flush=True)


def main():
    atexit.register(at_exit_work)
    pool = concurrent.futures.ThreadPoolExecutor(2)  # never shut down: its idle workers wait at exit
    pool.submit(epoch_work).result()
    threading.Thread(target=trainer).start()
    print("MAIN RETURNS", flush=True)
    if MODE == "exit3":
        sys.exit(3)
    if MODE == "raise":
        raise ValueError("boom")
    if MODE == "hang":
        threading.Thread(target=lambda: time.sleep(60)).start()


main()
'''


def _env():
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_QUIET="1", OMP_NUM_THREADS="1")
    return env


def _files(out: Path) -> list[list[dict]]:
    return [[json.loads(line) for line in p.read_text().splitlines()] for p in sorted(out.rglob("*.jsonl"))]


def _visits(records: list[dict], name: str) -> int:
    ids = {r["id"] for r in records if r["type"] == "region" and r["name"] == name}
    return sum(r["visits"] for r in records if r["type"] == "profile" and r["path"][-1] in ids)


# (a rank that fails under --nproc has the launcher stop the others: their end then says `signal`)
@pytest.mark.parametrize("mode, code, status, ranks", [
    ("ok", 0, "ok", []), ("exit3", 3, "exit", []), ("raise", 1, "exception", []), ("ok", 0, "ok", ["--nproc", "2"])])
def test_threads_and_atexit_work_after_the_main_code_are_recorded(tmp_path, mode, code, status, ranks):
    (tmp_path / "prog.py").write_text(PROGRAM)
    p = subprocess.run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), *ranks,
                        "--instrument", "prog.py", mode], cwd=tmp_path, env=_env(), capture_output=True,
                       text=True, timeout=120)
    # the program as without scaleprobe: the thread and the atexit handler ran after main returned
    assert p.returncode == code and "TRAINER DONE" in p.stdout and "AT EXIT" in p.stdout, (p.stdout, p.stderr)
    files = _files(tmp_path / "runs")
    assert len(files) == (2 if ranks else 1)
    for records in files:
        [end] = [r for r in records if r["type"] == "end"]
        assert (end["status"], end["exit_code"], end["closed_at_end"]) == (status, code, 0), end
        # 3 visits in the thread's loop, 1 in the pool, 1 at exit: the end came after all of them
        assert _visits(records, "epoch_work") == 5, records
        assert _visits(records, "at_exit_work") == 1
        assert end["duration_ns"] > 0.2e9
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("launch.json")]
    assert record["wall_s"] > 0.2


def test_a_sigterm_while_threads_are_waited_for_ends_the_run_interrupted(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    with subprocess.Popen([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument",
                           "prog.py", "hang"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            if line.startswith("MAIN RETURNS"):
                break
        time.sleep(0.5)  # the trainer is done; the launcher waits for the sleeping thread
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        out = proc.stdout.read()
    assert code == 143 and "AT EXIT" in out, (code, out)
    [records] = _files(tmp_path / "runs")
    [end] = [r for r in records if r["type"] == "end"]
    assert (end["status"], end["exit_code"]) == ("signal", 143), end
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("launch.json")]
    assert record["status"] == "interrupted", record


CHILD_RAISES = '''\
import multiprocessing as mp, sys


def work(x):
    if x == 1:
        raise ValueError("boom")
    return x


def target():
    work(1)


if __name__ == "__main__":
    for method in ("fork", "spawn"):
        p = mp.get_context(method).Process(target=target)
        p.start()
        p.join()
        print(method, p.exitcode, flush=True)
'''


def test_a_child_whose_target_raises_prints_the_traceback_of_the_original(tmp_path):
    """Review 42 F5: the traceback a multiprocessing child prints showed the recorder's wrapper
    (`recorder.py, in watched`); its end record still says `exception`."""
    (tmp_path / "prog.py").write_text(CHILD_RAISES)
    plain = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                           timeout=120)
    launched = subprocess.run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument",
                               "prog.py"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert (launched.returncode, launched.stdout) == (plain.returncode, plain.stdout) == (0, "fork 1\nspawn 1\n")
    assert launched.stderr == plain.stderr, launched.stderr
    ends = [next(r for r in records if r["type"] == "end") for records in _files(tmp_path / "runs")]
    assert sorted((e["status"], e["exception"]) for e in ends) == [
        ("exception", "builtins.ValueError"), ("exception", "builtins.ValueError"), ("ok", None)]


SLEEPER = '''\
import os, time


def epoch():
    time.sleep(0.05)


def main():
    print("READY", os.getpid(), flush=True)
    for e in range(400):
        epoch()


main()
'''


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_sigterm_taken_by_the_handler_keeps_the_open_visits_as_the_watch_does(tmp_path, pure):
    """Review 42 F6: a SIGTERM left to its default action and taken by the recorder's handler dropped
    the main thread's open visits (no `main` in the profile); taken by the watch (main thread blocked
    in C) it kept them (`closed_at_end`)."""
    from instrumentor.cli import main as instrument

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "prog.py").write_text(SLEEPER)
    assert instrument([str(tmp_path / "src"), "-o", str(tmp_path / "b"), "--main", "prog.py", "-q"]) == 0
    env = dict(_env(), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_PURE=pure)
    with subprocess.Popen([sys.executable, "prog.py"], cwd=tmp_path / "b", env=env, stdout=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout.readline().startswith("READY")
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM  # killed by it, as uninstrumented
    [records] = _files(tmp_path / "out")
    [end] = [r for r in records if r["type"] == "end"]
    assert (end["status"], end["dropped"], end["closed_at_end"]) == ("signal", 0, 3), end
    names = {r["id"]: r["name"] for r in records if r["type"] == "region"}
    paths = {tuple(names[i] for i in r["path"]) for r in records if r["type"] == "profile"}
    assert ("main",) in paths and ("main", "main:for@10", "epoch") in paths, paths
