"""Review 51 (third-party code built with `instrument`): a built program ends as the original."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

MODULE = """\
import os, sys

sink = []
MARK = os.environ["MARK"]


class Cleanup:
    def __del__(self):
        sink.append(1)  # its module's globals are still there
        os.remove(MARK)  # a temporary file of the program's
        print("finalized", len(sink), file=sys.stderr)


def use():
    return len(sink)


keep = Cleanup()
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_objects_in_an_instrumented_module_s_globals_are_finalized_at_exit(tmp_path, pure):
    """F1: the recorder kept every instrumented module's globals to switch probes on and off, to
    the very end: at exit, their objects were never finalized (a `__del__` that removes a temporary
    file never ran) or only after the globals had been cleared."""
    src = tmp_path / "src"
    (src / "q").mkdir(parents=True)
    (src / "q" / "__init__.py").write_text("")
    (src / "q" / "m.py").write_text(MODULE)
    (src / "main.py").write_text("import q.m\n\ndef main():\n    print(q.m.use())\n\nmain()\n")
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_PURE=pure, SCALEPROBE_OUT=str(tmp_path / "runs"))
    subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path, env=env,
                   check=True, timeout=120)
    seen = []
    for tree in ("src", "out"):
        mark = tmp_path / f"{tree}.tmp"
        mark.write_text("")
        done = subprocess.run([sys.executable, "main.py"], cwd=tmp_path / tree, env=dict(env, MARK=str(mark)),
                              capture_output=True, text=True, timeout=60)
        seen.append((done.returncode, done.stdout, done.stderr, mark.exists()))
    assert seen[0] == (0, "0\n", "finalized 1\n", False)
    assert seen[1] == seen[0]
    assert list((tmp_path / "runs").glob("*.jsonl"))  # it did record


FORK_KILLED = """\
import os, signal
import runtime.recorder as R

told = R.Recorder._tell_mp_children


def tell(self):  # SIGTERM arrives in the at-fork callback, after the child's file got its header
    if R._in_fork_callback[0]:
        os.kill(os.getpid(), signal.SIGTERM)
    return told(self)


R.Recorder._tell_mp_children = tell


def main():
    pid = os.fork()
    if pid == 0:
        os._exit(7)  # never reached: the child dies in the callback, as a Pool worker terminate()d
    _, status = os.waitpid(pid, 0)
    print("child", os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, flush=True)


main()
"""


def test_a_forked_child_killed_in_the_at_fork_callback_ends_its_file(tmp_path):
    """F3: a forked Pool worker stopped by terminate() while the runtime set it up died by the
    signal's default action with its file holding only its header: read as a process that died."""
    from runtime.runfile import read_run

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text(FORK_KILLED)
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"))
    subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path, env=env,
                   check=True, timeout=120)
    done = subprocess.run([sys.executable, "main.py"], cwd=tmp_path / "out", env=env, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "child True\n"), done.stderr
    runs = {r.header["pid"]: r for r in map(read_run, (tmp_path / "runs").glob("*.jsonl"))}
    assert len(runs) == 2
    [child] = [r for r in runs.values() if r.header.get("forked_from")]
    assert child.end is not None and (child.end["status"], child.end["signal"]) == ("signal", 15), child.end


def test_a_run_file_is_created_with_its_header_already_encoded(tmp_path, monkeypatch):
    """F2: the file was created before the encoder was made (orjson's import): a spawned Pool worker
    stopped by terminate() in between left an empty file, which readers refuse."""
    from runtime import runfile

    seen = []
    real_dumps, real_write = runfile._dumps, os.write

    def dumps():
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        return real_dumps()

    short = [True]

    def write(fd, data):  # the first write is short: the rest follows, never a second header
        if short[0]:
            short[0] = False
            return real_write(fd, bytes(data)[:7])
        return real_write(fd, data)

    monkeypatch.setattr(runfile, "_dumps", dumps)
    monkeypatch.setattr(runfile.os, "write", write)
    w = runfile.RunWriter.create(str(tmp_path), 0, 5, {"run_id": "x", "rank": 0})
    w.write_records([{"type": "end", "status": "ok", "exit_code": 0}])
    w.close()
    assert seen and seen[0] == []  # the encoder before the file
    run = runfile.read_run(tmp_path / "rank0.5.jsonl")
    assert (run.header["run_id"], run.end["status"], run.problems) == ("x", "ok", [])
