"""Review 95 MED-1: a sweep whose stderr is a pipe whose reader went away (make demo's filter,
stopped by the same Ctrl-C; `| head`) ended at its next progress line in an uncaught
BrokenPipeError, exit 1: the rest of the sweep did not run, and the interrupt was not said."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

from runtime.stderr_gone import TolerantStream, tolerant_stderr
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]


def test_a_sweep_goes_on_when_the_reader_of_its_stderr_is_gone(tmp_path):
    (tmp_path / "prog.py").write_text("import sys\nprint('hi', sys.argv[1:])\n")
    p = subprocess.Popen([sys.executable, "-m", "runtime.launch", "--out", "runs", "--sweep", "n=1,2,3", "--",
                          "prog.py", "{n}"], cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         env=clean_env(PYTHONPATH=str(REPO)))
    p.stderr.close()  # the reader is gone before the first line
    assert p.wait(timeout=240) == 0
    records = [json.loads(Path(f).read_text()) for f in glob.glob(str(tmp_path / "runs" / "**" / "launch.json"),
                                                                   recursive=True)]
    assert sorted(r["status"] for r in records) == ["ok", "ok", "ok"]


class _Closed:
    def __init__(self):
        self.writes = 0

    def write(self, text):
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self):
        return False


def test_the_stand_in_drops_what_follows_a_broken_pipe_and_passes_the_rest_on():
    inner = _Closed()
    s = TolerantStream(inner)
    assert s.write("one\n") == 4 and s.gone
    s.write("two\n")
    s.flush()
    assert inner.writes == 1 and s.isatty() is False


def test_it_is_in_place_only_inside_the_block():
    before = sys.stderr
    with tolerant_stderr() as stand_in:
        assert sys.stderr is stand_in and stand_in.inner is before
    assert sys.stderr is before
