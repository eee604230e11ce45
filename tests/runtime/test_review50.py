"""Review 50 (Python 3.10, 3.12, 3.13): the runtime's start, its sys.monitoring tool id, and the
tracebacks it shows.

The findings are about other Pythons than the one CI runs (3.11): their version-dependent code is
tested here by setting the module flags it reads (`linemap._BACKPORT`, `linemap._COLORS`) or by
giving it a stand-in `sys.monitoring`; what only the real interpreter can show is tested where it
runs (skipped elsewhere).
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import traceback
import types
from pathlib import Path

import pytest

from instrumentor.cli import main as instrument
from runtime import linemap, recorder
from tests.envclean import clean_env
from test_syntax_error_tabs import interpreter_display

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, *paths: Path, **extra: str) -> dict[str, str]:
    return clean_env(PYTHONPATH=":".join([*map(str, paths), str(REPO)]), SCALEPROBE_OUT=str(tmp_path / "runs"),
                     SCALEPROBE_QUIET="1", **extra)


def _py(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


# -- F2: start() entered again while it runs: an error naming the module, not a deadlock ------------------


def test_start_entered_again_by_a_module_it_imports_exits_2_naming_the_module(tmp_path):
    """F2: the recorder, starting, imported a module of the program (on 3.10 orjson's `uuid` ->
    `platform` -> `subprocess` -> the project's `select.py`) whose header starts the recorder again:
    `_start_lock` is a plain Lock, held by that same thread, and the program hung for ever."""
    (tmp_path / "shadow_mod.py").write_text("from runtime import recorder\n\nrecorder.start()\n")
    script = textwrap.dedent("""\
        import sys
        from runtime import recorder

        def open_(self):
            import shadow_mod  # what the runtime imports while it opens its run file

        recorder.Recorder.open = open_
        print("starting", flush=True)
        recorder.start()
        print("started")
    """)
    try:
        done = _py(["-c", script], tmp_path, _env(tmp_path, tmp_path), timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("start() entered again from inside itself deadlocked")
    assert done.returncode == 2, done.stderr
    assert done.stdout == "starting\n"
    assert done.stderr.startswith("scaleprobe: error: the program's module 'shadow_mod' (")
    assert str(tmp_path / "shadow_mod.py") in done.stderr
    assert "rename the program's module" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("orjson") is None or not sys.platform.startswith("linux"),
                    reason="needs orjson, whose `uuid` imports `platform` (Linux)")
def test_a_built_program_whose_platform_py_the_runtime_imports_stops_with_an_error(tmp_path, capsys):
    """The same end to end: `uuid` (imported by orjson when the runtime writes its run file's
    header) imports `platform`, the project's, instrumented (on 3.10 `select.py` is reached so)."""
    probe = _py(["-c", "import sys, orjson; print('platform' in sys.modules)"], tmp_path, _env(tmp_path))
    if probe.stdout != "True\n":
        pytest.skip("orjson does not import `platform` on this Python (3.13's `uuid` does not)")
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text('import platform as myp\n\n\ndef work(n):\n    for i in range(n):\n        pass\n'
                                 '    return myp.system("mine")\n\n\nprint(work(3))\n')
    (src / "platform.py").write_text("def system(x):\n    for i in range(2):\n        pass\n    return x\n")
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    assert "platform.py: named like the standard-library module 'platform'" in capsys.readouterr().err
    try:
        done = _py(["main.py"], out, _env(tmp_path), timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the built program hung at start")
    assert done.returncode == 2, done.stderr
    assert "scaleprobe: error: the program's module 'platform'" in done.stderr
    assert str(out / "platform.py") in done.stderr


def test_start_in_another_thread_while_one_starts_still_waits_for_it(monkeypatch):
    """Only the starting thread's own call is refused: another thread waits and gets its recorder."""
    import threading

    assert getattr(recorder, "_starting", None) is None
    got = []
    monkeypatch.setattr(recorder, "_rec", None)
    sentinel = object()
    with recorder._start_lock:
        monkeypatch.setattr(recorder, "_starting", -1, raising=False)  # some other thread's ident

        def other():
            got.append(recorder.start())

        worker = threading.Thread(target=other)
        worker.start()
        worker.join(0.2)
        assert worker.is_alive()  # waits on the lock, as before
        recorder._rec = sentinel
    worker.join(10)
    assert got == [sentinel]


# -- F4: the sys.monitoring tool id (3.12+) ------------------------------------------------------------


class _Monitoring:
    """A stand-in for `sys.monitoring`: which ids are taken, what was asked."""

    class events:
        PY_UNWIND = 1 << 5

    def __init__(self, taken=()):
        self.tools = {tid: "theirs" for tid in taken}
        self.asked: list[int] = []
        self.callbacks: dict[tuple[int, int], object] = {}
        self.set: dict[int, int] = {}

    def use_tool_id(self, tid, name):
        self.asked.append(tid)
        if tid in self.tools:
            raise ValueError(f"tool {tid} is already in use")
        self.tools[tid] = name

    def get_tool(self, tid):
        return self.tools.get(tid)

    def register_callback(self, tid, event, func):
        self.callbacks[(tid, event)] = func

    def get_events(self, tid):
        return self.set.get(tid, 0)

    def set_events(self, tid, events):
        self.set[tid] = events


@pytest.mark.parametrize("taken, expected", [((), 5), ((5,), 4), ((5, 4), 3), ((4,), 5), ((3, 4), 5)])
def test_watch_main_takes_the_optimizer_id_first(monkeypatch, taken, expected):
    """F4: it took 4 (or 3), the ids PEP 669 leaves to tools, which a program's own tool then could
    not have (`ValueError: tool 4 is already in use`)."""
    mon = _Monitoring(taken)
    monkeypatch.setattr(sys, "monitoring", mon, raising=False)
    monkeypatch.setattr(recorder, "impl", types.SimpleNamespace())  # the pure callback
    rec = types.SimpleNamespace(main_code=None, enabled=True, main_exit=None)
    code = compile("pass", "<main>", "exec")
    recorder.Recorder.watch_main(rec, code)
    assert mon.tools[expected] == "scaleprobe"
    assert [tid for tid, name in mon.tools.items() if name == "scaleprobe"] == [expected]
    assert mon.set[expected] == mon.events.PY_UNWIND
    assert (expected, mon.events.PY_UNWIND) in mon.callbacks
    assert rec.main_code is code


def test_watch_main_without_a_free_id_watches_nothing(monkeypatch):
    mon = _Monitoring((3, 4, 5))
    monkeypatch.setattr(sys, "monitoring", mon, raising=False)
    rec = types.SimpleNamespace(main_code=None, enabled=True, main_exit=None)
    recorder.Recorder.watch_main(rec, compile("pass", "<main>", "exec"))
    assert rec.main_code is None and not mon.callbacks
    assert sorted(mon.asked) == [3, 4, 5]


MONTOOL = '''\
import sys


def work():
    for i in range(3):
        pass
    return i


mon = sys.monitoring
print(mon.get_tool(3), mon.get_tool(4))
mon.use_tool_id(4, "mytool")
seen = []
mon.register_callback(4, mon.events.PY_START, lambda code, off: seen.append(code.co_name))
mon.set_events(4, mon.events.PY_START)
work()
mon.set_events(4, 0)
mon.free_tool_id(4)
print(seen)
raise SystemExit(3)
'''


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring is Python 3.12+")
def test_a_program_s_own_tool_id_4_is_free_in_a_built_tree(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(MONTOOL)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    original = _py(["main.py"], src, _env(tmp_path))
    built = _py(["main.py"], out, _env(tmp_path))
    assert original.stdout == "None None\n['work']\n"
    assert (built.returncode, built.stdout, built.stderr) == (original.returncode, original.stdout, original.stderr)
    end = json.loads((next((tmp_path / "runs").glob("*.jsonl"))).read_text().splitlines()[-1])
    assert (end["status"], end["exit_code"]) == ("exit", 3)  # the module-level SystemExit was seen


# -- F5: colours of an uncaught traceback (3.13+) --------------------------------------------------------


@pytest.fixture
def format_kwargs(monkeypatch):
    """What TracebackException.format is called with (a colorize it takes on 3.13+ only)."""
    seen: list[dict] = []
    original = traceback.TracebackException.format

    def format(self, **kwargs):
        seen.append(dict(kwargs))
        if "colorize" in kwargs and sys.version_info < (3, 13):
            del kwargs["colorize"]
        return original(self, **kwargs)

    monkeypatch.setattr(traceback.TracebackException, "format", format)
    return seen


@pytest.mark.parametrize("can", [True, False])
def test_an_uncaught_traceback_is_coloured_as_the_interpreter_would(monkeypatch, format_kwargs, can):
    """F5: on 3.13 `show` wrote `te.format()` with no colours, where the interpreter colours an
    uncaught exception's traceback (a terminal, PYTHON_COLORS=1, FORCE_COLOR)."""
    monkeypatch.setattr(linemap, "_COLORS", True, raising=False)
    monkeypatch.setitem(sys.modules, "_colorize", types.SimpleNamespace(can_colorize=lambda: can))
    exc = ValueError("x")
    linemap.format_exception(exc, None, _uncaught=True)
    assert format_kwargs[0].get("colorize", "none") is can
    format_kwargs.clear()
    linemap.format_exception(exc, None)  # the function the program calls: traceback's text, plain
    assert "colorize" not in format_kwargs[0]


def test_no_colorize_where_the_python_has_none(monkeypatch, format_kwargs):
    monkeypatch.setattr(linemap, "_COLORS", False, raising=False)
    linemap.format_exception(ValueError("x"), None, _uncaught=True)
    assert "colorize" not in format_kwargs[0]


@pytest.mark.skipif(sys.version_info < (3, 13), reason="colours of tracebacks are Python 3.13+")
@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
def test_a_built_tree_s_traceback_has_the_colours_of_the_original(tmp_path, thread):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text("import threading\nimport prog\n\nif __name__ == '__main__':\n"
                                 + ("    t = threading.Thread(target=prog.run, name='w')\n    t.start()\n    t.join()\n"
                                    if thread else "    prog.run()\n"))
    (src / "prog.py").write_text('def run():\n    for i in range(2):\n        pass\n    x = {"a": 1}\n'
                                 '    return f"{x["missing"]}"\n')
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    env = _env(tmp_path, PYTHON_COLORS="1")
    original = _py(["main.py"], src, env)
    built = _py(["main.py"], out, env)
    assert "\x1b[" in original.stderr
    assert built.stderr.replace(str(out), str(src)) == original.stderr


# -- F1: the exceptiongroup backport (3.10) ---------------------------------------------------------------

# What the backport does when it is imported (exceptiongroup/_formatting.py): patch the traceback
# module and put in its own sys.excepthook, only if sys.excepthook is still Python's own.
FAKE_FORMATTING = '''\
import sys
import traceback

PATCHED = False
traceback_exception_original_format = traceback.TracebackException.format
traceback_exception_original_format_exception_only = traceback.TracebackException.format_exception_only


def _format(self, **kwargs):
    yield "[patched]\\n"
    yield from traceback_exception_original_format(self, **kwargs)


def exceptiongroup_excepthook(etype, value, tb):
    sys.stderr.write("".join(traceback.format_exception(etype, value, tb)))


if sys.excepthook is sys.__excepthook__:
    PATCHED = True
    traceback.TracebackException.format = _format
    sys.excepthook = exceptiongroup_excepthook
'''

BACKPORT_MAIN = '''\
import traceback


def work(n):
    for i in range(n):
        pass
    return n


work(2)
import exceptiongroup

print("patched:", exceptiongroup._formatting.PATCHED)
try:
    raise ValueError("caught")
except ValueError:
    print("format_exc:", traceback.format_exc().startswith("[patched]"))
raise KeyError(work(3))
'''

# 3.10's code path on this Python: linemap._BACKPORT set before anything is instrumented
AS_310 = "import os, runpy; from runtime import linemap; linemap._BACKPORT = True; " \
         "runpy.run_path(os.path.abspath('main.py'), run_name='__main__')"


@pytest.fixture
def backport(tmp_path) -> Path:
    site = tmp_path / "site"
    (site / "exceptiongroup").mkdir(parents=True)
    (site / "exceptiongroup" / "__init__.py").write_text("from . import _formatting\n")
    (site / "exceptiongroup" / "_formatting.py").write_text(FAKE_FORMATTING)
    return site


@pytest.mark.parametrize("mode", ["built", "launch"])
def test_the_backport_imported_by_a_built_program_patches_traceback_as_in_the_original(tmp_path, backport, mode):
    """F1: the first instrumented module's header put the runtime's sys.excepthook in, so the
    backport, imported later by the program, patched nothing: `traceback.format_exc()` and the
    uncaught traceback of a group showed none of its exceptions."""
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(BACKPORT_MAIN)
    assert instrument([str(src), "-o", str(out), "-q"]) == 0
    env = _env(tmp_path, backport)
    original = _py(["-c", AS_310], src, env)
    built = _py(["-c", AS_310] if mode == "built" else
                ["-c", AS_310.replace("runpy.run_path(os.path.abspath('main.py'), run_name='__main__')",
                                      "import sys; sys.argv = ['x', 'main.py']; runpy.run_module('runtime.launch', "
                                      "run_name='__main__')")], out, env)
    assert original.stdout == "patched: True\nformat_exc: True\n"
    assert original.stderr.startswith("[patched]\nTraceback (most recent call last):\n"), original.stderr
    assert built.stdout == original.stdout
    assert built.returncode == original.returncode == 1
    if mode == "built":
        assert built.stderr == original.stderr  # mapped: SRC's file and lines, the backport's text
    else:
        assert built.stderr.startswith("[patched]\n"), built.stderr
        assert f'File "{src / "main.py"}", line 18, in <module>' in built.stderr
        assert built.stderr.endswith("KeyError: 3\n")


def test_the_backport_imported_after_a_manual_start_patches_traceback(tmp_path, backport):
    """The recorder started first (manual regions), with no instrumented module: its hook too."""
    script = ("from runtime import linemap, recorder; linemap._BACKPORT = True; recorder.start(); "
              "import exceptiongroup; print(exceptiongroup._formatting.PATCHED); raise KeyError(1)")
    done = _py(["-c", script], tmp_path, _env(tmp_path, backport))
    assert done.stdout == "True\n"
    assert done.stderr.startswith("[patched]\nTraceback (most recent call last):\n"), done.stderr
    assert done.stderr.endswith("KeyError: 1\n")
    end = json.loads((next((tmp_path / "runs").glob("*.jsonl"))).read_text().splitlines()[-1])
    assert end["status"] == "exception"  # the recorder's hook ran, in front of the backport's


def test_a_program_hook_in_front_keeps_the_backport_from_patching_as_in_the_original(tmp_path, backport):
    """The backport patches only where the program left Python's own hook: not behind the
    program's own hook, instrumented or not."""
    script = ("import sys; from runtime import linemap, recorder; linemap._BACKPORT = True; recorder.start(); "
              "sys.excepthook = lambda *a: print('mine', file=sys.stderr); "
              "import exceptiongroup; print(exceptiongroup._formatting.PATCHED); raise KeyError(1)")
    done = _py(["-c", script], tmp_path, _env(tmp_path, backport))
    assert (done.stdout, done.stderr) == ("False\n", "mine\n")


def test_without_the_backport_the_finder_lets_the_import_fail_as_before(tmp_path):
    script = ("from runtime import linemap, recorder; linemap._BACKPORT = True; recorder.start()\n"
              "try:\n    import exceptiongroup\nexcept ImportError as exc:\n    print(type(exc).__name__)\n"
              "import json; print(json.dumps(1))")
    env = _env(tmp_path)
    env["PYTHONNOUSERSITE"] = "1"
    done = _py(["-S", "-c", script], tmp_path, env)  # no site-packages: no backport
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ModuleNotFoundError\n1\n"


# -- F6: with the backport's traceback patch, an uncaught SyntaxError is shown as Python shows it --------


@pytest.mark.skipif(not linemap._C_DISPLAY, reason="Python 3.13+ shows uncaught exceptions with the traceback module")
def test_the_c_display_of_a_syntax_error_holds_under_the_backport_s_patch(monkeypatch):
    """F6 (3.10, tests/runtime/test_syntax_error_tabs.py under pytest, which imports the backport):
    the backport's format_exception_only calls the class's `_format_syntax_error`, past the one
    linemap puts on the instance, so the tab the interpreter strips was shown."""
    # the traceback module's own (on 3.10 under pytest the real backport has patched it already)
    original = getattr(sys.modules.get("exceptiongroup._formatting"),
                       "traceback_exception_original_format_exception_only", None) \
        or traceback.TracebackException.format_exception_only
    class_syntax_error = traceback.TracebackException._format_syntax_error

    def patched(self, **kwargs):  # as exceptiongroup/_formatting.py's PatchedTracebackException
        if issubclass(self.exc_type, SyntaxError):
            yield from class_syntax_error(self, self.exc_type.__qualname__)
        else:
            yield from original(self)

    formatting = types.ModuleType("exceptiongroup._formatting")
    formatting.traceback_exception_original_format_exception_only = original
    monkeypatch.setitem(sys.modules, "exceptiongroup._formatting", formatting)
    monkeypatch.setattr(traceback.TracebackException, "format_exception_only", patched)
    monkeypatch.setattr(linemap, "_BACKPORT", True, raising=False)
    exc = SyntaxError("m", ("f.py", 2, 3, "\t\tab cd\n", 2, 5))
    expected = interpreter_display(exc)
    assert "\t" not in expected
    assert linemap.format_exception(exc, None, _uncaught=True) == expected
    assert linemap.format_exception(exc, None) == "".join(traceback.format_exception(exc))  # the patched text
