"""Review 107 (the standard library's tests run built against the original):

MED-1: `async for` over a step of `__anext__` whose `__await__` raises (anything: a ZeroDivisionError,
a KeyboardInterrupt, a StopAsyncIteration) raises CPython's `TypeError("'async for' received an
invalid object from __anext__: NAME")`, the failure its __cause__ and __context__; the built program
let the failure through (a StopAsyncIteration ended the loop quietly). NAME is the type's tp_name, as
CPython prints it (`collections.deque` for a C type).
LOW-4: `SCALEPROBE_QUIET=1` leaves the "scaleprobe: throttled ..." line out of the program's stderr.
LOW-3 (b): after `linecache.clearcache()`, tracebacks of a built tree's modules (and
`linecache.getline`, `inspect.getsource`) show SRC's text again, not OUT's text at SRC's numbers.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import probe
from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env
from tests.instrumentor.instr_helpers import load_both, strict_replay

REPO = Path(__file__).resolve().parents[2]

try:
    importlib.import_module("runtime._asyncwrap")
    HAVE_C = True
except ImportError:
    HAVE_C = False


def _build(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text)
    done = subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path,
                          env=clean_env(PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return src, out


def _run(where: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    e = clean_env(**{"PYTHONPATH": str(REPO), "SCALEPROBE_OUT": str(tmp_path / "runs"), "SCALEPROBE_QUIET": "1", **env})
    done = subprocess.run([sys.executable, "main.py", *args], cwd=where, env=e, capture_output=True, text=True,
                          timeout=120)
    out = tmp_path / "out"
    if where == out:  # the built tree's paths read as the source's
        done.stdout, done.stderr = (t.replace(str(out), str(tmp_path / "src")) for t in (done.stdout, done.stderr))
    return done


# ----- MED-1: `async for`, a step whose `__await__` raises -------------------------------------------------

STEPS = '''
import collections


class Bad:
    def __init__(self, how):
        self.how = how

    def __await__(self):
        if self.how == "zero":
            1 / 0
        if self.how == "interrupt":
            raise KeyboardInterrupt
        if self.how == "stop":
            raise StopAsyncIteration("from __await__")
        if self.how == "exit":
            raise SystemExit(3)
        if self.how == "int":
            return 42
        return iter(())


class Steps:
    def __init__(self, step):
        self.step = step

    def __aiter__(self):
        return self

    def __anext__(self):
        return self.step


async def loop(step):
    async for _ in Steps(step):
        return "item"
    return "ended"


async def in_handler(step):
    try:
        raise KeyError("handled")
    except KeyError:
        async for _ in Steps(step):
            return "item"
'''

CASES = [("loop", "zero"), ("loop", "interrupt"), ("loop", "stop"), ("loop", "exit"), ("loop", "int"),
         ("loop", "ok"), ("loop", 7), ("loop", "deque"), ("in_handler", "zero")]


def _frames(tb, fallback: bool) -> list[str]:
    names = []
    while tb is not None:
        code = tb.tb_frame.f_code
        # the pure fallback's __anext__ is a coroutine of ours, one frame more (docs/instrument.md, Known limits)
        if not (fallback and code.co_name == "__anext__" and code.co_filename == probe.__file__):
            names.append(code.co_name)
        tb = tb.tb_next
    return names


def _outcome(space: dict, func: str, how, fallback: bool = False) -> tuple:
    step = space["collections"].deque() if how == "deque" else space["Bad"](how) if isinstance(how, str) else how
    coro = space[func](step)
    try:
        coro.send(None)
    except StopIteration as stop:
        return ("returned", stop.value)
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt and SystemExit are cases
        cause = exc.__cause__
        return (type(exc), str(exc), type(cause), str(cause), exc.__context__ is cause, exc.__suppress_context__,
                type(cause.__context__) if cause is not None else None, _frames(exc.__traceback__, fallback),
                _frames(cause.__traceback__, fallback) if cause is not None else None)
    raise AssertionError("suspended")


@pytest.fixture(params=["frameless", "fallback"])
def wrapper(request, monkeypatch):
    """`async for`'s wrapper: with runtime._asyncwrap (C) and the pure fallback (its coroutine)."""
    if request.param == "frameless" and not HAVE_C:
        pytest.skip("runtime._asyncwrap is not built")
    if request.param == "fallback":  # as where the extension is not built: its type names too
        monkeypatch.setattr(probe, "_AsyncIter", probe._AsyncIterCoro)
        monkeypatch.setattr(probe, "_c_tp_name", None, raising=False)
    return request.param


@pytest.mark.parametrize("func,how", CASES)
def test_a_step_that_fails_to_give_its_iterator_is_the_statement_s_typeerror(wrapper, func, how):
    backend = importlib.import_module("runtime._backend").impl
    plain, probed, log = load_both(STEPS, backend.left, backend.back)
    expected = _outcome(plain, func, how)
    if how != "ok":
        assert expected[0] is TypeError and "'async for' received an invalid object from __anext__" in expected[1]
    assert _outcome(probed, func, how, fallback=wrapper == "fallback") == expected
    assert strict_replay(log) == [] and log  # the regions left for the step are entered again


REVIEWED = '''\
import traceback


class F:
    def __aiter__(self):
        return self

    def __anext__(self):
        return self

    def __await__(self):
        1 / 0


async def main():
    async for _ in F():
        pass


def run():
    try:
        main().send(None)
    except BaseException as e:
        print(type(e).__name__, e, "| cause:", type(e.__cause__).__name__)
        traceback.print_exc()
    main().send(None)


run()
'''


def test_the_reviewed_program_prints_and_ends_as_the_original(tmp_path):
    """The reviewer's reproduction, caught (its traceback printed) and uncaught, in every way it runs."""
    src, out = _build(tmp_path, {"main.py": REVIEWED})
    plain = _run(src, tmp_path)
    assert plain.returncode == 1
    assert plain.stdout == ("TypeError 'async for' received an invalid object from __anext__: F"
                            " | cause: ZeroDivisionError\n")
    assert plain.stderr.count("The above exception was the direct cause of the following exception") == 2
    ways = [{}, {"SCALEPROBE_PURE": "1"}, {"SCALEPROBE_DISABLE": "1"}]
    for env in ways:
        done = _run(out, tmp_path, **env)
        if HAVE_C:  # the printed traceback has no frame of ours either
            assert (done.returncode, done.stdout, done.stderr) == (plain.returncode, plain.stdout, plain.stderr), env
        else:
            assert (done.returncode, done.stdout) == (plain.returncode, plain.stdout), env


# ----- LOW-4: SCALEPROBE_QUIET leaves the throttling line out ------------------------------------------------

THROTTLE = """\
from runtime import probe
from runtime.manual import region

for _ in range(3000):
    with region("tiny"):
        pass
probe.flush()  # throttled here, while the program runs
"""


@pytest.mark.parametrize("quiet", ["1", "0"])
def test_quiet_leaves_the_throttled_line_out_and_keeps_the_record(tmp_path, quiet):
    (tmp_path / "main.py").write_text(THROTTLE)
    done = _run(tmp_path, tmp_path, SCALEPROBE_QUIET=quiet, SCALEPROBE_THROTTLE_CALLS="1000",
                SCALEPROBE_THROTTLE_NS="1000000000")
    assert done.returncode == 0, done.stderr
    [f] = find_run_files(tmp_path / "runs")
    run = read_run(f)
    assert len(run.throttled) == 1 and run.end["throttled"] == 1  # recorded either way
    said = done.stderr.count("scaleprobe: throttled tiny: 3000 visits")
    assert said == (0 if quiet == "1" else 1), done.stderr
    if quiet == "1":
        assert done.stderr == ""


# ----- LOW-3 (b): linecache.clearcache() and a built tree's modules -----------------------------------------

MOD = '''\
def work(n):
    total = 0
    for i in range(n):
        total += i
    raise ValueError(total)
'''

CLEARED = '''\
import inspect
import linecache
import os
import sys
import traceback

import mod


def shown(label):
    try:
        mod.work(3)
    except ValueError:
        text = traceback.format_exc()
    print(label, [line.strip() for line in text.splitlines() if line.startswith("    ")])
    print(label, repr(linecache.getline(mod.__file__, 5)), repr(linecache.getline(__file__, 11)))


def plain_file():
    """A file that is no module of the build: read as linecache reads it, edited or not."""
    with open("plain.txt", "w") as handle:
        handle.write("one\\ntwo\\n")
    first = linecache.getline(os.path.abspath("plain.txt"), 2)
    with open("plain.txt", "w") as handle:
        handle.write("one\\nthree, longer\\n")
    linecache.checkcache()
    second = linecache.getline(os.path.abspath("plain.txt"), 2)
    linecache.clearcache()
    return [first, second, linecache.getline(os.path.abspath("plain.txt"), 2)]


def run():
    shown("before")
    linecache.clearcache()
    shown("cleared")
    linecache.checkcache()
    shown("checked")
    linecache.clearcache()
    linecache.checkcache()
    shown("cleared, checked")
    linecache.clearcache()
    print("source", inspect.getsource(mod.work).splitlines()[-1].strip())
    linecache.clearcache()
    print("module", inspect.getsource(mod).splitlines()[-1].strip())
    print("plain", plain_file())
    if sys.argv[1:2] == ["gone"]:
        os.remove(sys.argv[2] if len(sys.argv) > 2 else mod.__file__)
        linecache.clearcache()
        print("gone", repr(linecache.getline(mod.__file__, 5)))


run()
'''


def test_tracebacks_after_clearcache_show_the_original_text(tmp_path):
    src, out = _build(tmp_path, {"main.py": CLEARED, "mod.py": MOD})
    plain = _run(src, tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert "cleared ['mod.work(3)', 'raise ValueError(total)']" in plain.stdout
    assert "source raise ValueError(total)" in plain.stdout
    assert "plain ['two\\n', 'three, longer\\n', 'three, longer\\n']" in plain.stdout
    for env in ({}, {"SCALEPROBE_DISABLE": "1"}):
        built = _run(out, tmp_path, **env)
        assert (built.returncode, built.stdout, built.stderr) == (plain.returncode, plain.stdout, plain.stderr), env


def test_a_source_deleted_before_clearcache_shows_no_text_not_the_copy_s(tmp_path):
    src, out = _build(tmp_path, {"main.py": CLEARED, "mod.py": MOD})
    built = _run(out, tmp_path, "gone", str(src / "mod.py"))
    assert built.returncode == 0, built.stderr
    assert "cleared ['mod.work(3)', 'raise ValueError(total)']" in built.stdout
    assert "gone ''" in built.stdout  # as Python shows a file that is gone: OUT's line 5 is a probe's
    assert (out / "mod.py").read_text().splitlines()[4].strip() != ""


def test_the_copy_s_lines_are_kept_with_out_lines(tmp_path):
    """SCALEPROBE_OUT_LINES=1: the modules run at OUT's lines, so linecache reads OUT's file, before
    and after clearcache (nothing of ours in between)."""
    src, out = _build(tmp_path, {"main.py": CLEARED, "mod.py": MOD})
    built = _run(out, tmp_path, SCALEPROBE_OUT_LINES="1")
    assert built.returncode == 0, built.stderr
    before, cleared = (line for line in built.stdout.splitlines() if line.startswith(("before [", "cleared [")))
    assert before.split(" ", 1)[1] == cleared.split(" ", 1)[1]
    assert "raise ValueError(total)" in cleared
