"""Review 105 MED-1: a spawned (or forkserver) multiprocessing child whose target raises prints the
traceback itself (`BaseProcess._bootstrap` calls `traceback.print_exc()`, no excepthook), and a
built tree's child showed OUT's file at OUT's line where the original showed its own. The child's
entry runs as `__mp_main__` at OUT's lines (documented); the printed traceback is mapped back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env
from tests.runtime.test_entry_relined import build

REPO = Path(__file__).resolve().parents[2]

PROGRAM = '''import multiprocessing as mp
import sys
import traceback


def work(n):
    total = 0
    for i in range(n):
        total += i
    return total


def target_raise():
    work(3)
    raise ValueError("target raised")


def target_prints():
    try:
        raise KeyError("kept")
    except KeyError:
        traceback.print_exc(file=sys.stdout)


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    for target in (target_raise, target_prints):
        p = ctx.Process(target=target)
        p.start()
        p.join()
        print(target.__name__, p.exitcode, flush=True)
'''


def _run(cwd: Path, method: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "main.py", method], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(cwd.parent / "runs"),
                                        SCALEPROBE_QUIET="1"))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_spawned_child_s_traceback_names_the_original_file_and_line(tmp_path, method):
    src, out = build(tmp_path, PROGRAM), tmp_path / "out"
    original = _run(src, method)
    built = _run(out, method)
    assert original.returncode == 0 and "target_raise 1" in original.stdout, original.stderr
    assert built.returncode == 0, built.stderr
    # the frames and the error as the original printed them: its file, its lines
    assert built.stderr.replace(str(out), str(src)) == original.stderr.replace(str(out), str(src))
    assert f'{src / "main.py"}", line 15, in target_raise' in built.stderr, built.stderr
    assert str(out) not in built.stderr
    # a program's own print_exc is left as it is (here: OUT's file, as documented for formatted text)
    assert built.stdout.replace(str(out), str(src)).splitlines()[-1] == original.stdout.splitlines()[-1]
    assert "KeyError: 'kept'" in built.stdout
