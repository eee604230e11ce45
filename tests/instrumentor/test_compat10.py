"""Compatibility round 10: what the interpreter reports about the user's statements (warnings that
name a line) is the same instrumented as uninstrumented, on every supported Python version."""

import os
import sys

import pytest

from instr_helpers import REPO, assert_same, run, three_ways

# Python 3.13: a functools.partial found as __aiter__/__anext__/__aenter__/__aexit__ is used as it
# is, after a FutureWarning that names the statement; the probes' async wrappers looked it up in
# their own frame (runtime/probe.py named, once for all loops with the default filter)
PARTIAL_SPECIAL_METHODS = '''\
import asyncio, functools, warnings

async def _next(items):
    if not items:
        raise StopAsyncIteration
    return items.pop()

class Partial:                      # __anext__ looked up (and the partial warned) at every step
    def __init__(self): type(self).__anext__ = functools.partial(_next, [1, 2])
    def __aiter__(self): return self

class PartialAiter:                 # __aiter__ looked up once, by the statement
    __aiter__ = functools.partial(Partial)

class Ctx:                          # __aenter__ and __aexit__ both looked up by the statement
    __aenter__ = functools.partial(asyncio.sleep, 0, "entered")
    __aexit__ = functools.partial(lambda *exc: asyncio.sleep(0, False))

async def loops():
    async for x in Partial():
        print("first", x)
    async for x in (
            Partial()):
        print("second", x)
    async for x in PartialAiter():
        print("aiter", x)
    async with Ctx() as v:
        print("with", v)

async def errors():
    for make in (Partial, PartialAiter):
        try:
            async for x in make():
                print("not reached", x)
        except Exception as e:      # the slot's own error replaces the one of the lookup
            print(make.__name__, type(e).__name__, e, repr(e.__context__))
    try:
        async with Ctx():
            print("not reached")
    except Exception as e:
        print("Ctx", type(e).__name__, repr(e.__context__))

async def main():
    for _ in range(2):              # the default filter: once per location, each location once
        await loops()
    print(sorted(k[2] for k in globals().get("__warningregistry__", ()) if k != "version"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        await loops()
    print([(w.category.__name__, w.lineno) for w in seen])
    warnings.simplefilter("error")
    await errors()

def run():
    asyncio.run(main())
'''

MAIN = '''\
import lib

def go():
    lib.run()

go()
'''


def test_async_statements_warn_about_a_partial_as_python_does(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": MAIN, "lib.py": PARTIAL_SPECIAL_METHODS})
    assert plain.returncode == 0, plain.stderr
    if sys.version_info[:2] == (3, 13):
        assert [line.split(": ")[0] for line in plain.stderr.splitlines() if "FutureWarning" in line] == [
            f"{tmp_path / 'src' / 'lib.py'}:{n}" for n in (20, 22, 25, 27)], plain.stderr
        assert "[20, 22, 25, 27]" in plain.stdout
        assert "Partial AttributeError object Partial does not have __anext__ method None" in plain.stdout
    else:  # no warning before 3.13 (3.14: a partial is a method descriptor); the same output still
        assert "FutureWarning" not in plain.stderr + plain.stdout
    assert_same(plain, built, hooked)


# Python 3.10+: when binding __aiter__ raises (its __get__), `async for` raises the slot's
# AttributeError, not that error (the probes raised the __get__'s error)
AITER_GET_RAISES = '''\
import asyncio

class Boom:
    def __get__(self, obj, kind):
        raise LookupError("get")

class AiterBoom:
    __aiter__ = Boom()

class AnextBoom:
    __anext__ = Boom()
    def __aiter__(self): return self

class CutInTheMiddleOfATwoByteCharacterAtByteFifty_____\u00e9\u00e9:
    __aiter__ = Boom()

async def main():
    for make in (AiterBoom, AnextBoom, CutInTheMiddleOfATwoByteCharacterAtByteFifty_____\u00e9\u00e9):
        try:
            async for _ in make():
                pass
        except Exception as e:
            print(make.__name__, type(e).__name__, e, repr(e.__context__))
    try:
        raise KeyError("handled")
    except KeyError:
        try:
            async for _ in AiterBoom():
                pass
        except Exception as e:
            print("in a handler", type(e).__name__, e, repr(e.__context__))

asyncio.run(main())
'''


def test_an_aiter_whose_binding_raises_is_the_slots_attribute_error(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": AITER_GET_RAISES})
    assert plain.returncode == 0, plain.stderr
    assert "AiterBoom AttributeError object AiterBoom does not have __aiter__ method None" in plain.stdout
    assert "in a handler AttributeError object AiterBoom does not have __aiter__ method KeyError('handled')" in plain.stdout
    assert_same(plain, built, hooked)


# the same for the iterable of an epoch or step loop (`for batch in __sp_iterate__(rid, loader):`,
# whose iter() ran in runtime/series.py)
PARTIAL_ITER = '''\
import functools, warnings

class Opt:
    def step(self): pass

class Loader:
    __iter__ = functools.partial(iter, [1, 2])

class Seq(Loader):                  # an error filter: the slot falls back to __getitem__
    def __getitem__(self, i):
        if i > 1: raise IndexError
        return i * 10

class NotIterator:
    __iter__ = functools.partial(list, [1])

def train(opt, make):
    for epoch in range(2):
        for batch in make():
            opt.step()
            print(epoch, batch)

def run():
    for make in (Loader, Loader, Seq, NotIterator):
        try:
            train(Opt(), make)
        except Exception as e:
            print(make.__name__, type(e).__name__, e)
    warnings.simplefilter("error")
    for make in (Loader, Seq, NotIterator):
        try:
            train(Opt(), make)
        except Exception as e:
            print(make.__name__, type(e).__name__, e)
'''


def test_an_epoch_loop_warns_about_a_partial_iter_as_python_does(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": MAIN,
                                                 "lib.py": PARTIAL_ITER})
    assert plain.returncode == 0, plain.stderr
    assert "__sp_iterate__(" in (tmp_path / "out" / "lib.py").read_text()  # an epoch/step loop
    if sys.version_info[:2] == (3, 13):
        assert plain.stderr.count("FutureWarning") == 1 and "lib.py:19: FutureWarning" in plain.stderr
        assert "Loader TypeError 'Loader' object is not iterable" in plain.stdout
    assert "NotIterator TypeError iter() returned non-iterator of type 'list'" in plain.stdout
    assert_same(plain, built, hooked)


# What compiling a module warns about (the parser: invalid escape sequences, a DeprecationWarning
# before 3.12; the compiler: `"is" with a literal`) names the user's file, line and text: a built
# tree's modules showed OUT's line for the parser's (and the same warning again, named
# "<unknown>"), the compiler's with OUT's file and text; under --instrument the parser's came
# three times (one at the instrumented text's line, one named by the relative path)
COMPILE_WARNINGS = '''\
import re


def helper(x):
    return x * 2


def run():
    pattern = re.compile("\\d+")
    for i in range(2):
        if i is 1:
            print("one", pattern.match("12").group())
    print(helper(3))
'''

WARNING_MAIN = '''\
import warnings
warnings.simplefilter("default")    # the parser's DeprecationWarning (3.10, 3.11) is shown too


def go():
    import lib
    lib.run()

go()
'''


def test_compile_time_warnings_name_the_users_lines(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": WARNING_MAIN, "lib.py": COMPILE_WARNINGS})
    assert plain.returncode == 0, plain.stderr
    lib = tmp_path / "src" / "lib.py"
    assert f"{lib}:9: " in plain.stderr and "invalid escape sequence" in plain.stderr
    assert f"{lib}:11: SyntaxWarning: \"is\" with " in plain.stderr and "  if i is 1:\n" in plain.stderr
    assert plain.stderr.count("Warning: ") == 2
    assert_same(plain, built, hooked)


def test_a_warning_shown_once_at_a_line_is_not_shown_again_after_an_import_under_the_hook(tmp_path):
    # rewriting a module in the program's process entered warnings.catch_warnings, which empties
    # every module's __warningregistry__: the default filter showed the warning again
    files = {"main.py": "import warnings\n\ndef f():\n    warnings.warn('once per location')\n\n"
                        "f()\nimport lib\nf()\nprint(lib.g())\n",
             "lib.py": "def g():\n    return 1\n"}
    plain, built, hooked = three_ways(tmp_path, files)
    assert plain.returncode == 0 and plain.stderr.count("once per location") == 2, plain.stderr  # message and line
    assert_same(plain, built, hooked)


def test_instrument_does_not_show_the_programs_compile_time_warnings(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("import lib\n\ndef go():\n    lib.run()\n\ngo()\n")
    (src / "lib.py").write_text(COMPILE_WARNINGS)
    done = run([sys.executable, "-W", "default", "-m", "instrumentor.cli", str(src), "-o", str(tmp_path / "out"), "-q"])
    assert (done.returncode, done.stderr) == (0, "")


POOL_SCRIPT = """\
import os, sys, threading, warnings
warnings.simplefilter("error", DeprecationWarning)  # 3.12+: fork with threads warns
sys.path.insert(0, sys.argv[1])
from instrumentor.project import run_jobs
from instrumentor.results import FileResult

def _os_threads():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))

at_fork = []
os.register_at_fork(before=lambda: at_fork.append((_os_threads(), threading.active_count())))

def work(job):
    if job[0] == "crash.py":
        os._exit(1)  # kills its worker: the other files are then run one pool each
    return FileResult(job[0], "unchanged")

jobs = [(name, "", (0, 1), {}, "runtime", 0) for name in ("a.py", "crash.py", "b.py", "c.py")]
results = run_jobs(jobs, 2, work=work)
print(sorted((k, r.status) for k, r in results.items()))
print("STRAY", [os_n for os_n, py_n in at_fork if os_n is not None and os_n > py_n])
"""

# a script that calls instrumentor.cli.main at its top level, as a user's build script may
UNGUARDED = """\
import sys

import pytest
sys.path.insert(0, sys.argv[1])
from instrumentor.cli import main
sys.exit(main([sys.argv[2], "-o", sys.argv[3], "-q", "--jobs", "2"]))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="counts the OS threads in /proc (Linux)")
def test_the_worker_pools_are_not_forked_while_an_earlier_pools_threads_linger(tmp_path):
    """Python 3.12 warned "This process is multi-threaded, use of fork() may lead to deadlocks" when
    run_jobs isolated a crashing file: the previous pool's threads were joined but not yet gone."""
    (tmp_path / "pool.py").write_text(POOL_SCRIPT)
    done = run([sys.executable, str(tmp_path / "pool.py"), str(REPO)])
    assert done.returncode == 0, done.stderr
    assert "('crash.py', 'failed')" in done.stdout and "('c.py', 'unchanged')" in done.stdout, done.stdout
    assert "STRAY []" in done.stdout, done.stdout


def test_a_script_calling_the_cli_at_its_top_level_builds(tmp_path):
    """With a fork server (or spawn) each worker re-imported the calling script, which ran the build
    again: every file came back "failed" (review 17). And the calling program's fork server is its own."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "main.py").write_text("import lib\n\ndef go():\n    lib.run()\n")
    (src / "lib.py").write_text("def run():\n    return 1\n")
    (tmp_path / "build.py").write_text(UNGUARDED)
    done = run([sys.executable, str(tmp_path / "build.py"), str(REPO), str(src), str(tmp_path / "out")])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "probe" in (tmp_path / "out" / "lib.py").read_text()


def test_a_new_pool_waits_for_the_threads_of_the_last_to_be_gone(monkeypatch):
    """The OS still listed the previous pool's joined threads for a moment after run_jobs retried
    a crashing file alone; forking then (Python 3.12+) warned of a multi-threaded fork."""
    import threading

    from instrumentor import project

    counts = iter([threading.active_count() + 1] * 3 + [threading.active_count()] * 10)
    seen = []

    def os_threads():
        seen.append(next(counts))
        return seen[-1]

    monkeypatch.setattr(project, "START_METHOD", "fork")
    monkeypatch.setattr(project, "_os_threads", os_threads)
    project._wait_for_stray_threads()
    assert len(seen) == 4 and seen[-1] == threading.active_count()
    # the calling program's own threads are not waited for past the bound
    monkeypatch.setattr(project, "_os_threads", lambda: threading.active_count() + 5)
    monkeypatch.setattr(project, "_STRAY_THREADS_WAIT_S", 0.05)
    project._wait_for_stray_threads()  # returns
