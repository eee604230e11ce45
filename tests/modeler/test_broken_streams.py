"""Readers that go away early: stderr's as well as stdout's (`modeler fit runs/ 2>&1 | head -1`)
keeps the exit code of the command, and `export --extrap -` says that its output was cut off
instead of how many lines it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from modeler import cli
from modeler_synthetic_runs import write_sweep

ROOT = Path(__file__).resolve().parents[2]
VALUES = (2, 4, 8, 16, 32)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A sweep of five runs, one of whose rank files is unreadable: every command exits 3."""
    root = tmp_path / "runs"
    write_sweep(root, {"n": list(VALUES)}, time_s=lambda p, rank, rep: 0.01 * p["n"] ** 2)
    (root / "run1-0" / "rank1.1000.jsonl").write_text("garbage\n", encoding="utf-8")
    return root


@pytest.fixture
def many(tmp_path: Path) -> tuple[Path, Path]:
    """An Extra-P file whose export (about 300 kB) is more than a pipe holds, so that a reader that
    leaves after one line surely breaks the pipe; and a file that is neither format."""
    lines = [{"params": {"n": v}, "callpath": f"main->region_{i:04d}", "metric": "time", "value": [v + i, v + i + 0.5]}
             for v in VALUES for i in range(600)]
    good = tmp_path / "many.jsonl"
    good.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("garbage\n", encoding="utf-8")
    return good, bad


# stdout and stderr both on a pipe whose reader has gone; what main did is told on a copy of the
# test's own stderr (descriptor `told`), since stderr itself goes nowhere
BOTH_GONE = textwrap.dedent("""
    import os, sys
    told = os.dup(2)
    r, w = os.pipe()
    os.close(r)
    os.dup2(w, 1)
    os.dup2(w, 2)
    os.close(w)
    from modeler.cli import main
    try:
        rc = main(sys.argv[1:])
    except BaseException as exc:
        os.write(told, f"raised {exc!r}\\n".encode())
        raise
    os.write(told, f"exit {rc}\\n".encode())
    sys.exit(rc)
""")

# stdout alone on a pipe whose reader has gone (`modeler export --extrap - runs/ | head -1`)
STDOUT_GONE = textwrap.dedent("""
    import os, sys
    r, w = os.pipe()
    os.close(r)
    os.dup2(w, 1)
    os.close(w)
    from modeler.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _env(unbuffered: bool) -> dict[str, str]:
    """The environment with PYTHONUNBUFFERED set, or not: a text stdout over an unbuffered one
    loses the rest of a write that its reader cut short without an error."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return {**env, "PYTHONUNBUFFERED": "1"} if unbuffered else env


def _script(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, timeout=180)


@pytest.mark.parametrize("argv, code", [
    (["fit"], cli.EXIT_PARTIAL),
    (["fit", "--format", "json", "-q"], cli.EXIT_PARTIAL),
    (["export", "--extrap", "-"], cli.EXIT_PARTIAL),
    (["report", "--format", "markdown"], cli.EXIT_PARTIAL),
    (["fit", "--at", "n=x"], cli.EXIT_ERROR),  # the error message itself meets the broken pipe
    (["fit", "--no-such-option"], cli.EXIT_USAGE),
])
def test_stdout_and_stderr_gone_keep_the_exit_code(runs, argv, code):
    p = _script(BOTH_GONE, *argv, str(runs))
    told = p.stderr.decode("utf-8", "backslashreplace")
    assert f"exit {code}\n" in told and "raised" not in told, told  # main returned its code, raised nothing
    assert p.returncode == code, told  # nor failed at the interpreter's exit (120: "Exception ignored")


@pytest.mark.parametrize("unbuffered", [False, True])
def test_a_reader_of_both_streams_that_leaves_after_one_line_keeps_exit_code_3(many, unbuffered):
    """`modeler export --extrap - many.jsonl bad.jsonl 2>&1 | head -1`, with a real pipe."""
    good, bad = many
    p = subprocess.Popen([sys.executable, "-m", "modeler", "export", "--extrap", "-", str(good), str(bad)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(unbuffered))
    try:
        first = p.stdout.readline()
        p.stdout.close()
        assert p.wait(timeout=180) == cli.EXIT_PARTIAL
    finally:
        p.kill()
    assert json.loads(first)["callpath"] == "main->region_0000"


def test_a_reader_of_both_streams_gone_before_the_output_keeps_exit_code_3(runs):
    """`modeler fit runs/ 2>&1 | true`: the reader leaves before anything was written."""
    p = subprocess.Popen([sys.executable, "-m", "modeler", "fit", str(runs)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        p.stdout.close()
        assert p.wait(timeout=180) == cli.EXIT_PARTIAL
    finally:
        p.kill()


# `export --extrap -` whose reader went away


def test_export_to_a_stdout_gone_says_its_output_was_cut_off(runs):
    p = _script(STDOUT_GONE, "export", "--extrap", "-", str(runs))
    err = p.stderr.decode("utf-8", "backslashreplace")
    assert p.returncode == cli.EXIT_PARTIAL, err  # as `fit`: the reader leaving is not an error of ours
    assert "rank1.1000.jsonl" in err and "skipped" in err
    assert "wrote" not in err, err
    assert "output cut off: the reader of <stdout> closed it before the end of the 85 lines (17 series at 5 points)" in err, err
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.parametrize("unbuffered", [False, True])
def test_export_to_a_reader_that_leaves_after_one_line_says_so(many, unbuffered):
    """`modeler export --extrap - many.jsonl | head -1`, with a real pipe; stderr is intact."""
    good, _ = many
    p = subprocess.Popen([sys.executable, "-m", "modeler", "export", "--extrap", "-", str(good)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(unbuffered))
    try:
        first = p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode("utf-8", "backslashreplace")
        assert p.wait(timeout=180) == cli.EXIT_OK, err  # as `fit` with every input read
    finally:
        p.kill()
    assert json.loads(first)["callpath"] == "main->region_0000"
    assert "wrote" not in err, err
    assert "output cut off: the reader of <stdout> closed it before the end of the 3000 lines" in err, err


class _Gone:
    """An in-memory stdout whose reader has gone."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_export_cut_off_in_process(runs, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _Gone())
    assert cli.main(["export", "--extrap", "-", str(runs)]) == cli.EXIT_PARTIAL
    err = capsys.readouterr().err
    assert "output cut off: the reader of <stdout> closed it before the end of the 85 lines (17 series at 5 points)" in err
    assert "wrote" not in err


def test_export_to_an_intact_stdout_still_says_what_it_wrote(runs, capsys):
    assert cli.main(["export", "--extrap", "-", str(runs)]) == cli.EXIT_PARTIAL
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 85
    assert "wrote 85 lines (17 series at 5 points) to <stdout>" in err
