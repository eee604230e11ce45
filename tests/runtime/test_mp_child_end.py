"""A multiprocessing child's end record says how the child ended (review 20: a target that raised
was recorded ok/0, in children started by fork, spawn and forkserver alike: `_bootstrap` prints the
traceback itself, no excepthook runs, and its finalizers ran before its exit status was decided)."""
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''
import multiprocessing as mp, sys
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "prog.py", ((1, "function", "work", 6),))


def work(mode):
    if __sp_on__: __sp_enter__(1)
    try:
        if mode == "raise":
            raise RuntimeError("child failed")
        if mode == "exit3":
            sys.exit(3)
        if mode == "interrupt":
            raise KeyboardInterrupt
    finally:
        if __sp_on__: __sp_exit__(1)


if __name__ == "__main__":
    p = mp.get_context(sys.argv[1]).Process(target=work, args=(sys.argv[2],))
    p.start()
    p.join()
    print(p.exitcode, p.pid)
'''


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("mode, code, status, exception", [
    ("ok", 0, "ok", None),
    ("raise", 1, "exception", "builtins.RuntimeError"),
    ("exit3", 3, "exit", None),
    ("interrupt", 1, "signal", "builtins.KeyboardInterrupt"),
])
def test_the_child_end_record_matches_its_exit_status(tmp_path, method, mode, code, status, exception):
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"))
    p = subprocess.run([sys.executable, "prog.py", method, mode], env=env, capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    exitcode, pid = map(int, p.stdout.split())
    assert exitcode == code, p.stderr
    (child,) = [read_run(f) for f in find_run_files(tmp_path / "out") if read_run(f).header["pid"] == pid]
    end = child.end
    assert (end["status"], end["exit_code"], end["exception"]) == (status, code, exception), p.stderr
