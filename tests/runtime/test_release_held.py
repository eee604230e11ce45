"""A generator that yields while it is being closed ("generator ignored GeneratorExit") leaves a
suspension note that no back() takes; the note holds the frame object, and with it what the frame
held. Before (review 55 F3), those objects were never finalized, not even at exit: the original
prints `close inner` at shutdown, the built program did not. Now the exit handler lets the notes go
after the last write. Both backends, built with the instrumentor."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

MAIN = """\
import t


def main():
    t.run()
    print("main done")


main()
"""

T = """\
class Resource:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        print("open", self.name)
        return self

    def __exit__(self, *exc):
        print("close", self.name)


def inner():
    with Resource("inner"):
        yield 1


def outer():
    try:
        yield 0
    finally:
        yield from inner()  # yields while being closed


def run():
    print(next(outer()))  # dropped at once, suspended
    print("after drop")
"""


def _run(cwd: Path, env: dict) -> list[str]:
    done = subprocess.run([sys.executable, "main.py"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ignored GeneratorExit" in done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("pure", ["0", "1"])
def test_what_an_ignored_generator_exit_holds_is_finalized_at_exit(tmp_path: Path, pure: str):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(MAIN)
    (src / "t.py").write_text(T)
    env = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"), SCALEPROBE_PURE=pure)
    original = _run(src, env)
    assert original[-1] == "close inner"  # at shutdown
    subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path, env=env,
                   check=True, timeout=120)
    assert _run(out, env) == original  # before: no `close inner`
    assert list((tmp_path / "runs").glob("*.jsonl"))
