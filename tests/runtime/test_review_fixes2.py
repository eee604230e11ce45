"""Second round of review fixes: errors of a loop's data iterator keep the original traceback, the
recursion limit leaves the program the headroom it has uninstrumented (built tree and launcher),
`sys.exit(x)` under the launcher prints and exits as Python does, and epoch ends do not flood the
flush thread."""

from __future__ import annotations

import gc
import json
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
import traceback
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime import series
from runtime.runfile import find_run_files, read_run
from runtime.sysexit import exit_status, print_message
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
HAVE_C = importlib.util.find_spec("runtime._cprobe") is not None


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = clean_env()
    env.update({"PYTHONPATH": str(REPO), "SCALEPROBE_QUIET": "1"})
    env.update(extra or {})
    return env


def _python(args: list[str], cwd: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = _env({"SCALEPROBE_OUT": str(cwd / "runs"), **(extra or {})})
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _launch(args: list[str], cwd: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return _python(["-m", "runtime.launch", "--out", str(cwd / "launched"), *args], cwd, extra)


def _build(tmp_path: Path, source: str) -> tuple[Path, Path]:
    from instrumentor.cli import main as instrument

    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(source)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    return src, out


def _same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    assert (b.returncode, b.stdout, b.stderr) == (a.returncode, a.stdout, a.stderr)


# ----- bug 8: the data iterator's errors ------------------------------------------------------------

LOOPS = '''\
import sys
import traceback


class BadIter:
    def __iter__(self):
        raise ValueError("no iterator today")


def loader(fail_at):
    for i in range(3):
        if i == fail_at:
            raise OSError("disk gone")
        yield i


def train(data):
    seen = []
    for batch in data:  # scaleprobe: step
        seen.append(batch)
    return seen


def epochs(data):
    for epoch in data:  # scaleprobe: epoch
        train(range(2))


for case in (loader(1), 5, BadIter()):
    for run in (train, epochs):
        try:
            run(case)
        except Exception:
            traceback.print_exc()
print(train(loader(9)))
epochs(loader(1))
'''


def _frames(text: str) -> list[tuple[str, str]]:
    return re.findall(r'File "[^"]*/([^/"]+)", line \d+, in (\S+)', text)


def test_data_iterator_errors_keep_the_original_traceback(tmp_path):
    src, out = _build(tmp_path, LOOPS)
    assert "__sp_iterate__" in (out / "main.py").read_text()
    original = _python([str(src / "main.py")], tmp_path)
    assert original.returncode == 1 and "OSError: disk gone" in original.stderr
    # on the fly: the same files and lines, so the very same text, print_exc() output included
    _same(original, _launch(["--instrument", "--cache-dir", str(tmp_path / "cache"), str(src / "main.py")], tmp_path))
    built = _python([str(out / "main.py")], tmp_path)
    assert built.stdout == original.stdout == "[0, 1, 2]\n"
    assert built.returncode == 1
    # the uncaught one is mapped back to the original exactly
    last = original.stderr.rindex("Traceback (most recent call last):")
    assert built.stderr[built.stderr.rindex("Traceback (most recent call last):"):] == original.stderr[last:]
    # print_exc() of a built tree shows the copy's line numbers (documented), but the same frames:
    # the user's loop, then the user's iterator, and nothing of the runtime's in between
    assert "/runtime/" not in built.stderr
    assert _frames(built.stderr) == _frames(original.stderr)
    assert ("main.py", "__iter__") in _frames(original.stderr)


class _Item:
    pass


def test_a_recorded_loop_keeps_no_item_and_closes_its_iteration_when_released():
    records = []
    rec = SimpleNamespace(cfg=SimpleNamespace(schedule=None), comm_ns=[0], gpu=None, gpu_rotation=None,
                          finished=False, steps_seen=0, series=records, request_flush=lambda: None)
    it = series.wrap(1, (_Item() for _ in range(3)), "step", rec)
    n = 0
    for item in it:  # (not enumerate(): it keeps its last result tuple, item included)
        ref = weakref.ref(item)
        del item
        gc.collect()
        assert ref() is None  # the loop variable was the last reference
        if n == 1:
            break
        n += 1
    assert [r["index"] for r in records] == [0]  # the second iteration is still open ...
    del it
    assert [r["index"] for r in records] == [0, 1]  # ... and closed when the loop lets go of it


def test_loop_reraises_what_iter_raised_from_the_for_statement():
    def user_iter():
        raise KeyError("k")

    def stop():
        raise StopIteration

    class Odd:
        __iter__ = None  # explicitly not iterable

    raising = type("S", (), {"__iter__": lambda s: user_iter()})()
    for bad, kind in ((5, TypeError), (Odd(), TypeError), (raising, KeyError)):
        with pytest.raises(kind) as err:
            for _ in series.loop(3, bad):
                pass
        frames = [f.name for f in traceback.extract_tb(err.value.__traceback__)]
        assert "loop" not in frames and frames[0] == "test_loop_reraises_what_iter_raised_from_the_for_statement"
    # a StopIteration from __iter__ is an error of the `for` statement, not the end of the loop
    with pytest.raises(StopIteration):
        for _ in series.loop(3, type("T", (), {"__iter__": lambda s: stop()})()):
            pass


# ----- bug 9: recursion headroom --------------------------------------------------------------------

# The deepest calls that fit under a limit of 60, from the module's loop: Python 3.10 also counts its
# C-level recursion checks (a comparison, the call of a C function) as a level, one less each.
DOWN, BOTTOM, BYE = (58, 57, 58) if sys.version_info >= (3, 11) else (57, 57, 57)
EXCEEDED = "maximum recursion depth exceeded" + ("" if sys.version_info >= (3, 11) else " in comparison")
# the lowest limit sys.setrecursionlimit accepts in depth() (module and depth() in use): 4 before
# Python 3.12, 3 from 3.12 on (the program's own output, the same uninstrumented)
LOWEST = 4 if sys.version_info < (3, 12) else 3

RECURSION = f'''\
import sys


def depth():
    limit = sys.getrecursionlimit()
    level = 1
    while True:  # the lowest limit Python accepts here is one above the depth in use
        try:
            sys.setrecursionlimit(level)
            break
        except RecursionError:
            level += 1
    sys.setrecursionlimit(limit)
    return level


def down(n):
    if n == 0:
        return 0
    return 1 + down(n - 1)


def leaf():
    return 1


def first_call_at_the_bottom(n):
    if n == 0:
        return leaf()
    return first_call_at_the_bottom(n - 1)


def bye(n):
    if n == 0:
        sys.exit(7)
    return bye(n - 1)


for _ in range(20):  # Python checks the limit on the first few calls of sys.exit (a C function) only
    try:
        bye(2)
    except SystemExit:
        pass
print("depth", depth(), sys.getrecursionlimit())
sys.setrecursionlimit(60)
print(down({DOWN}))
print(first_call_at_the_bottom({BOTTOM}))
try:
    bye({BYE})
except SystemExit as exc:
    print("exit", exc.code)
print(sys.getrecursionlimit())
down({DOWN + 1})
'''


@pytest.mark.skipif(not HAVE_C, reason="the C probes are not built")
def test_recursion_headroom_is_the_originals(tmp_path):
    src, out = _build(tmp_path, RECURSION)
    original = _python([str(src / "main.py")], tmp_path)
    assert original.returncode == 1
    assert original.stdout == f"depth {LOWEST} 1000\n{DOWN}\n1\nexit 7\n60\n"
    assert original.stderr.rstrip().endswith(f"RecursionError: {EXCEEDED}")
    _same(original, _python([str(out / "main.py")], tmp_path))  # the built tree, C probes
    _same(original, _launch([str(out / "main.py")], tmp_path))  # ... and under the launcher
    _same(original, _launch(["--instrument", "--cache-dir", str(tmp_path / "cache"), str(src / "main.py")], tmp_path))


@pytest.mark.skipif(not HAVE_C, reason="the launcher runs the script at depth 1 with the C extension only")
def test_launcher_gives_back_a_limit_below_its_own_depth(tmp_path):
    (tmp_path / "low.py").write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('at exit', sys.getrecursionlimit()))\n"
        "sys.setrecursionlimit(4)\n"
        "print(sys.getrecursionlimit())\n"
        "raise ValueError('low')\n")
    original = _python(["low.py"], tmp_path)
    assert original.stdout == "4\nat exit 4\n"
    launched = _launch(["low.py"], tmp_path)
    assert (launched.returncode, launched.stdout) == (original.returncode, original.stdout)
    # (at a limit of 4 Python cannot read the source line for its traceback; the launcher, which
    # shows the traceback under a limit raised for its own frames, can)
    assert launched.stderr.endswith("ValueError: low\n") and original.stderr.endswith("ValueError: low\n")


# ----- bug 12: sys.exit(x) under the launcher -------------------------------------------------------

EXIT = '''\
import sys


class Shown:
    def __str__(self):
        return "shown as str"


class Unprintable:
    def __str__(self):
        raise ValueError("no str")


print("before")
sys.exit(eval(sys.argv[1]))
'''


_LEAKED = {"2**70": "OverflowError: Python int too large to convert to C long", "Unprintable()": "ValueError: no str"}


@pytest.mark.parametrize("value", ["None", "'a message'", "[1, 2]", "True", "-1", "2**70", "1.5", "Shown()",
                                   "Unprintable()"])
def test_sys_exit_values_end_the_launched_script_as_python_does(tmp_path, value):
    (tmp_path / "ex.py").write_text(EXIT)
    original = _python(["ex.py", value], tmp_path)
    launched = _launch(["ex.py", value], tmp_path)
    # ex.py is not instrumented: after a run that ended ok the launcher adds one line saying so
    warning = "scaleprobe launch: warning: the run completed but no run file was written: is ex.py instrumented?"
    lines = launched.stderr.splitlines(keepends=True)
    if original.returncode == 0:
        assert lines[-1].startswith(warning)
        launched.stderr = "".join(lines[:-1])
    leaked = _LEAKED.get(value)
    if leaked is not None and sys.version_info >= (3, 12) and original.stderr != launched.stderr:
        # CPython 3.12.1 and 3.13.0 (not 3.11) leave the error of converting or printing the code
        # set and report it at shutdown; later releases clear it (python/cpython#125842). The
        # launcher ends such a script as Python does without that bug: same status, message, output.
        assert original.stderr.startswith(launched.stderr)
        assert original.stderr[len(launched.stderr):].rstrip().endswith(leaked)
        original.stderr = launched.stderr
    _same(original, launched)
    (run_dir,) = (tmp_path / "launched" / "ex").iterdir()
    assert json.loads((run_dir / "launch.json").read_text())["exit_code"] == original.returncode


def test_sys_exit_list_on_the_fly_prints_once(tmp_path):
    (tmp_path / "ex.py").write_text(EXIT)
    launched = _launch(["--instrument", "--cache-dir", str(tmp_path / "cache"), "ex.py", "[1, 2]"], tmp_path)
    assert (launched.returncode, launched.stderr) == (1, "[1, 2]\n")


def test_exit_status_and_message_rules(capsys, monkeypatch):
    assert [exit_status(c) for c in (None, 0, 3, 256, -1, True, 2**40 + 7, 2**63, -(2**63), -(2**63) - 1, "x", [1])] == \
        [0, 0, 3, 0, 255, 1, 7, 255, 0, 255, 1, 1]
    for code in (None, 3):
        print_message(code)
    print_message([1, 2])
    assert capsys.readouterr().err == "[1, 2]\n"
    monkeypatch.setattr(sys, "stderr", None)
    read, write = os.pipe()
    saved = os.dup(2)
    try:
        os.dup2(write, 2)
        print_message("to fd 2")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write)
    assert os.read(read, 100) == b"to fd 2\n"
    os.close(read)


# ----- runtime minor: epoch-end flushes are coalesced -----------------------------------------------

EPOCHS = '''\
import sys
import time

import runtime.recorder
from runtime.manual import epoch

runtime.recorder.EPOCH_FLUSH_SPACING_S = float(sys.argv[1])
for e in epoch(range(int(sys.argv[2]))):
    pass
if len(sys.argv) > 3:
    print("ready", flush=True)
    time.sleep(600)
'''


def test_many_tiny_epochs_are_not_one_flush_each(tmp_path):
    (tmp_path / "epochs.py").write_text(EPOCHS)
    # A spacing longer than the run: every epoch end only asks, and all asks wait for one write.
    done = _python(["epochs.py", "3600", "3000"], tmp_path, {"SCALEPROBE_FLUSH_INTERVAL": "3600"})
    assert done.returncode == 0, done.stderr
    (path,) = find_run_files(tmp_path / "runs")
    run = read_run(path)
    assert len(run.epochs) == 3000 and run.problems == []
    # the old runtime woke the flush thread at every epoch end: hundreds of flushes here
    assert run.end["flushes"] == 1


def test_a_finished_epoch_reaches_the_file_without_exit_and_survives_a_kill(tmp_path):
    (tmp_path / "epochs.py").write_text(EPOCHS)
    env = _env({"SCALEPROBE_OUT": str(tmp_path / "runs"), "SCALEPROBE_FLUSH_INTERVAL": "3600"})
    proc = subprocess.Popen([sys.executable, "epochs.py", "0.05", "3", "wait"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 60  # a bound on waiting, not a claim about speed
        while True:
            files = find_run_files(tmp_path / "runs") if (tmp_path / "runs").is_dir() else []
            if files and len(read_run(files[0]).epochs) == 3:
                break
            assert time.monotonic() < deadline, "the epochs never reached the file"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    run = read_run(files[0])
    assert len(run.epochs) == 3 and run.end is None
    assert [p for p in run.problems if "no end record" not in p] == []


# ----- async for / async with: the probes' wrappers stay out of an uncaught traceback ------------------

ASYNC = '''\
import asyncio
import sys


class Source:
    def __aiter__(self):
        return self

    async def __anext__(self):
        raise OSError("disk gone")


class BadAiter:
    def __aiter__(self):
        raise KeyError("no iterator")


class Lock:
    async def __aenter__(self):
        raise ValueError("no lock")

    async def __aexit__(self, *exc):
        return False


async def run(case):
    if case == "for":
        async for x in Source():
            print(x)
    elif case == "not-iterable":
        async for x in 5:
            print(x)
    elif case == "aiter-raises":
        async for x in BadAiter():
            print(x)
    elif case == "not-a-manager":
        async with 5:
            pass
    else:
        async with Lock():
            pass


asyncio.run(run(sys.argv[1]))
'''


@pytest.mark.parametrize("case", ["for", "not-iterable", "aiter-raises", "not-a-manager", "with"])
def test_async_for_and_with_errors_keep_the_original_traceback(tmp_path, case):
    src, out = _build(tmp_path, ASYNC)
    text = (out / "main.py").read_text()
    assert "__sp_aiter__" in text and "__sp_actx__" in text
    original = _python([str(src / "main.py"), case], tmp_path)
    assert original.returncode == 1 and "Error" in original.stderr
    _same(original, _launch(["--instrument", "--cache-dir", str(tmp_path / "cache"), str(src / "main.py"), case],
                            tmp_path))
    _same(original, _python([str(out / "main.py"), case], tmp_path))
