"""Review 119: a sweep file's string of numbers joined by `,` is one run, said in a warning as on the
command line (L3); standard input is shared by the ranks and the runs of a sweep, as docs/launch.md
says (L4)."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
# one write of one line: the runs' lines never mix
READ_STDIN = 'import os, sys\nos.write(1, f"run {sys.argv[1]} read {sys.stdin.readline()!r}\\n".encode())\n'


def launch(tmp_path, *args, stdin=None):
    return subprocess.run([sys.executable, "-m", "runtime.launch", *args], cwd=tmp_path,
                          env=clean_env(PYTHONPATH=str(REPO)), input=stdin, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("value, shown", [('"1,2"', "[1, 2]"), ('"1; 2"', "[1, 2]"), ('"32 64 128"', "[32, 64, 128]")])
def test_l3_a_sweep_file_string_of_numbers_is_one_run_with_a_warning(tmp_path, value, shown):
    (tmp_path / "t.py").write_text(READ_STDIN)
    (tmp_path / "bad.toml").write_text(f"[sweep]\nn = {value}\n")
    p = launch(tmp_path, "--out", "runs", "--dry-run", "--sweep-file", "bad.toml", "--", "t.py", "{n}")
    assert p.returncode == 0, p.stderr
    assert "1 of 1 runs would run" in p.stdout
    text = value.strip('"')
    count = len(shown.split(","))
    assert (f"scaleprobe launch: warning: --sweep-file bad.toml: n={text!r} is one value, not {count}: a sweep file "
            f"lists them as an array (n = {shown}); one run is made with it") in p.stderr.splitlines(), p.stderr


def test_l3_a_sweep_file_array_and_a_command_line_value_are_as_they_were(tmp_path):
    (tmp_path / "t.py").write_text(READ_STDIN)
    (tmp_path / "good.toml").write_text('[sweep]\nn = [1, 2]\nname = "a,b"\n')
    p = launch(tmp_path, "--out", "runs", "--dry-run", "--sweep-file", "good.toml", "--", "t.py", "{n}{name}")
    # review 128 MED-3: the uninstrumented t.py gets its own warning, which is not the one looked for
    assert p.returncode == 0 and "warning" not in p.stderr.replace("warning: t.py has no probes", ""), p.stderr
    p = launch(tmp_path, "--out", "runs", "--dry-run", "--sweep", "n=1;2", "--", "t.py", "{n}")
    assert "n='1;2' is one value, not 2: values are separated by ',' (n=1,2); one run is made with it" in p.stderr


def test_l4_the_runs_of_a_sweep_share_stdin_as_documented(tmp_path):
    (tmp_path / "t.py").write_text(READ_STDIN)
    p = launch(tmp_path, "--out", "runs", "--sweep", "n=1,2", "--", "t.py", "{n}", stdin="a\nb\n")
    assert p.returncode == 0, p.stderr
    assert [line for line in p.stdout.splitlines() if line.startswith("run ")] == ["run 1 read 'a\\n'", "run 2 read ''"]
    docs = " ".join((REPO / "docs" / "launch.md").read_text().split())
    assert ("the ranks of `--nproc` and the runs of a sweep all inherit it and read it in turn. A rank or run gets "
            "only what the others have not read yet") in docs
