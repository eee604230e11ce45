"""Review 128, the runtime's and the launcher's findings.

MED-2: a build run after its SRC was edited ran silently, and its tracebacks showed the edited
file's text at the build's line numbers. MED-3: a sweep of an uninstrumented program said so only
after its last run. LOW-7: a swept parameter of 2 values (which the modeler holds constant) got no
note. LOW-8: the runs' output was kept nowhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from instrumentor.cli import main as instrument
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
try:
    from runtime import _teewrite  # noqa: F401 - the output copy's C write (runtime/output_copy.py)
    HAVE_TEE = True
except ImportError:
    HAVE_TEE = False
# skipped where the extension is there to build but was not (installed without a compiler)
NEEDS_TEE = pytest.mark.skipif(not HAVE_TEE and (REPO / "runtime" / "_teewrite.c").is_file(),
                               reason="runtime/_teewrite.c is not built: no output copy")

HELPER = '''\
def make(n):
    if n <= 0:
        raise ValueError("n must be positive")
    return list(range(n))
'''
MAIN = '''\
import sys

import helper


def run(n):
    return helper.make(n)


print("made", len(run(int(sys.argv[1]))), flush=True)
'''
STALE = "warning: {src} changed since the build"


def _build(tmp_path: Path) -> tuple[Path, Path]:
    src, out = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (src / "main.py").write_text(MAIN)
    (src / "helper.py").write_text(HELPER)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    return src, out


def _edit(path: Path) -> None:
    path.write_text("# a new comment\n# another\n" + path.read_text())  # every line moves down by 2


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    e = clean_env(PYTHONPATH=str(REPO), **env)
    return subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True, timeout=120)


# -- MED-2 -----------------------------------------------------------------------------------------


def test_an_edited_module_is_said_once_and_its_frames_show_the_text_that_ran(tmp_path):
    src, out = _build(tmp_path)
    fresh = _run([sys.executable, str(out / "main.py"), "0"], tmp_path, SCALEPROBE_OUT=str(tmp_path / "r0"))
    assert "changed since the build" not in fresh.stderr
    _edit(src / "helper.py")
    proc = _run([sys.executable, str(out / "main.py"), "0"], tmp_path, SCALEPROBE_OUT=str(tmp_path / "r1"))
    assert proc.returncode == 1
    said = [line for line in proc.stderr.splitlines() if STALE.format(src=src / "helper.py") in line]
    assert len(said) == 1 and "run instrument again" in said[0], proc.stderr
    # the frame names SRC's file at the build's line, with the line the build was made from (the
    # edited file has `    if n <= 0:` at line 3 now)
    frame = f'File "{src / "helper.py"}", line 3, in make'
    lines = proc.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if frame in line)
    assert lines[at + 1].strip() == 'raise ValueError("n must be positive")', proc.stderr
    assert "helper.py changed since the build: its frames show the line numbers and text the build" in proc.stderr


def test_an_edited_entry_is_said_too_and_quiet_leaves_the_line_out(tmp_path):
    src, out = _build(tmp_path)
    _edit(src / "main.py")
    proc = _run([sys.executable, str(out / "main.py"), "2"], tmp_path, SCALEPROBE_OUT=str(tmp_path / "r"))
    assert proc.returncode == 0 and "made 2" in proc.stdout
    assert proc.stderr.count(STALE.format(src=src / "main.py")) == 1, proc.stderr
    quiet = _run([sys.executable, str(out / "main.py"), "2"], tmp_path, SCALEPROBE_OUT=str(tmp_path / "q"),
                 SCALEPROBE_QUIET="1")
    assert quiet.returncode == 0 and "changed since" not in quiet.stderr


def test_out_lines_mode_maps_an_edited_file_to_the_built_text(tmp_path):
    # SCALEPROBE_OUT_LINES=1: every module runs at OUT's lines and its frames are mapped by the line
    # map, which read the edited file's line 3 (review 128: linemap._original)
    src, out = _build(tmp_path)
    _edit(src / "helper.py")
    proc = _run([sys.executable, str(out / "main.py"), "0"], tmp_path, SCALEPROBE_OUT=str(tmp_path / "r"),
                SCALEPROBE_OUT_LINES="1")
    lines = proc.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if f'File "{src / "helper.py"}", line 3, in make' in line)
    assert lines[at + 1].strip() == 'raise ValueError("n must be positive")', proc.stderr


def test_a_sweep_of_a_stale_build_says_it_once_before_the_first_run(tmp_path):
    src, out = _build(tmp_path)
    _edit(src / "helper.py")
    proc = _run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--sweep", "n=1,2,3",
                 "main.py", "{n}"], out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("changed since the build") == 1, proc.stderr  # the launcher's; no rank's
    first = proc.stderr.splitlines()[0] if proc.stderr else ""
    assert first.startswith("scaleprobe launch: warning: ") and str(src / "helper.py") in first


def test_a_sweep_says_it_after_the_run_that_found_the_edit(tmp_path, monkeypatch):
    from runtime import launch_build
    from runtime.launch_args import parse
    from runtime.launch_build import StaleCheck

    monkeypatch.setattr(launch_build, "checked", [None])  # the build this test's launcher watches

    src, out = _build(tmp_path)
    cwd = os.getcwd()
    os.chdir(out)
    try:
        check = StaleCheck(parse(["--sweep", "n=1,2", "main.py", "{n}"]))
    finally:
        os.chdir(cwd)
    assert check.warning() is None
    _edit(src / "main.py")
    said = check.warning()
    assert said is not None and str(src / "main.py") in said
    assert check.warning() is None  # once


# -- MED-3 -----------------------------------------------------------------------------------------


PLAIN = "import sys\nprint('plain', sys.argv[1], flush=True)\n"


def test_an_uninstrumented_sweep_is_said_before_and_after_its_first_run(tmp_path):
    (tmp_path / "prog.py").write_text(PLAIN)
    proc = _run([sys.executable, "-m", "runtime.launch", "--out", "runs", "--sweep", "n=1,2,3", "prog.py", "{n}"],
                tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    progress = [i for i, line in enumerate(lines) if "runs, " in line and line.startswith("scaleprobe launch: [")]
    early = [i for i, line in enumerate(lines) if "has no probes and is in no instrumented build" in line]
    after_first = [i for i, line in enumerate(lines) if "the runs after it will most likely write none" in line]
    assert early and early[0] < progress[0], proc.stderr
    assert len(after_first) == 1 and progress[0] < after_first[0] < progress[1], proc.stderr
    assert "3 of 3 runs completed but no run file was written" in proc.stderr  # the end's warning stays


def test_the_dry_run_says_it_and_an_instrumented_entry_or_instrument_does_not(tmp_path):
    (tmp_path / "prog.py").write_text(PLAIN)
    cmd = [sys.executable, "-m", "runtime.launch", "--dry-run", "--out", "runs", "--sweep", "n=1,2,3"]
    proc = _run([*cmd, "prog.py", "{n}"], tmp_path)
    assert proc.returncode == 0 and "has no probes" in proc.stderr
    assert "has no probes" not in _run([*cmd, "--instrument", "prog.py", "{n}"], tmp_path).stderr
    (tmp_path / "b").mkdir()
    src, out = _build(tmp_path / "b")
    assert "has no probes" not in _run([*cmd, "main.py", "{n}"], out).stderr


# -- LOW-7 -----------------------------------------------------------------------------------------


def test_a_parameter_of_two_values_gets_a_note_at_the_dry_run(tmp_path):
    (tmp_path / "prog.py").write_text(PLAIN)
    cmd = [sys.executable, "-m", "runtime.launch", "--dry-run", "--instrument", "--out", "runs"]
    proc = _run([*cmd, "--sweep", "n=1,2", "--sweep", "m=1,2,4", "prog.py", "{n}{m}"], tmp_path)
    assert proc.returncode == 0
    notes = [line for line in proc.stderr.splitlines() if "note:" in line]
    assert len(notes) == 1 and "--sweep n=1,2: 2 values of 'n'" in notes[0], proc.stderr
    assert "at least 3 values" in notes[0] and "--param n=N" in notes[0]
    quiet = _run([*cmd, "--sweep", "n=1,2", "prog.py", "{n}"], tmp_path, SCALEPROBE_QUIET="1")
    assert "note:" not in quiet.stderr


def test_the_note_quotes_the_modelers_minimum():
    from modeler.estimator import MIN_POINTS
    from runtime.sweep_checks import MIN_VALUES

    assert MIN_VALUES == MIN_POINTS


# -- LOW-8 -----------------------------------------------------------------------------------------


TALK = '''\
import os
import sys

rank = os.environ["RANK"]
# one argument per print: under PYTHONUNBUFFERED each piece of a print is its own write to the pipe
# the two ranks share, so "out", " ", "0" could interleave with the other rank's words
print(f"out {rank} {sys.stdout.isatty()}")
print(f"err {rank}", file=sys.stderr)
if os.fork() == 0:
    print(f"child {rank}", flush=True)
    os._exit(0)
os.wait()
print(f"last {rank}", flush=True)
'''


@NEEDS_TEE
def test_each_ranks_output_is_kept_in_its_run_directory_and_still_passed_through(tmp_path):
    (tmp_path / "talk.py").write_text(TALK)
    proc = _run([sys.executable, "-m", "runtime.launch", "--instrument", "--out", "runs", "--nproc", "2",
                 "talk.py"], tmp_path, SCALEPROBE_QUIET="1")
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        assert f"out {rank} False" in proc.stdout and f"err {rank}" in proc.stderr  # passed through as before
        (kept,) = (tmp_path / "runs").glob(f"talk/*/rank{rank}.output.txt")
        assert kept.read_text().splitlines() == [f"out {rank} False", f"err {rank}", f"child {rank}",
                                                 f"last {rank}"]


@NEEDS_TEE
def test_the_copy_leaves_the_stream_as_it_is(tmp_path, monkeypatch):
    import io

    from runtime import output_copy

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return True

    out, err = Stream(), Stream()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(output_copy, "_installed", [False])
    monkeypatch.setenv("SCALEPROBE_OUT", str(tmp_path))
    assert output_copy.install(3)
    assert not (tmp_path / "rank3.output.txt").exists()  # made at the first text: none for a silent rank
    print("a", 1)
    print("b", file=sys.stderr)
    assert sys.stdout is out and sys.stdout.isatty() and out.getvalue() == "a 1\n" and err.getvalue() == "b\n"
    assert sys.stdout.write("c") == 1
    assert (tmp_path / "rank3.output.txt").read_text() == "a 1\nb\nc"


@NEEDS_TEE
def test_the_copy_adds_no_python_frame_to_a_print(tmp_path):
    # a print at the bottom of a low recursion limit prints as without the launcher (its stack depth
    # is the program's: tests/runtime/test_review_fixes2.py)
    (tmp_path / "low.py").write_text(
        "import sys\n"
        "def down(n):\n"
        "    return down(n + 1) if n < 30 else print('bottom', n)\n"
        "sys.setrecursionlimit(40)\n"
        "down(0)\n")
    plain = _run([sys.executable, "low.py"], tmp_path)
    launched = _run([sys.executable, "-m", "runtime.launch", "--out", "runs", "--nproc", "1", "low.py"], tmp_path,
                    SCALEPROBE_QUIET="1")
    assert (plain.returncode, plain.stdout) == (0, "bottom 30\n")
    assert (launched.returncode, launched.stdout) == (0, "bottom 30\n"), launched.stderr
    (kept,) = (tmp_path / "runs").glob("low/*/rank0.output.txt")
    assert kept.read_text() == "bottom 30\n"
