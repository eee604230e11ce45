"""Generators and coroutines get no local of ours: whether a suspension left the regions is kept by
the runtime per suspending frame (`left()` / `back()`), so `locals()`, `co_varnames` and `f_locals`
are the original's. And what that state still promises: every exit closes this activation's
innermost visit whatever happens at a suspension (throw, close, dropped, a failed await in a
comprehension or an `except` type), no entry is left behind, a generator may be resumed on another
thread, the flag may flip while suspended. Both probe backends; the NVTX backend's own pair."""

import asyncio
import gc
import importlib
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import traceback

import pytest

from instr_helpers import body_after_header, code_of, load_both, project_tree, rewrite, run, run_env, strict_replay
from instrumentor.cli import main as cli_main
from instrumentor.linemap import inserted_lines, split_lines
from runtime.runfile import find_run_files, read_run


def _backends() -> list[str]:
    try:
        importlib.import_module("runtime._cprobe")
    except ImportError:
        return ["runtime._pyprobe"]
    return ["runtime._cprobe", "runtime._pyprobe"]


BACKENDS = _backends()


def _load(source: str, module: str, on: bool = True):
    mod = importlib.import_module(module)
    plain, probed, log = load_both(source, mod.left, mod.back, on)
    return plain, probed, log, mod


def _last_probe(log: list):
    return [e for e in log if isinstance(e, tuple)][-1]


# -- no local of ours -------------------------------------------------------------------------------

LOCALS = '''
import asyncio, sys

class Row:
    def __init__(self, **fields):
        self.fields = fields

def rows(n):
    total = 0
    for i in range(n):
        total += i
        yield Row(**locals()).fields
        got = yield sorted(locals())
        print(got, (yield sys._getframe().f_code.co_varnames))

async def coro(n):
    seen = []
    for i in range(n):
        await asyncio.sleep(0)
        seen.append(sorted(locals()))
        seen.append([v for v in sorted(sys._getframe().f_locals) if v != "seen"])
    return seen, sys._getframe().f_code.co_varnames

async def agen(n):
    for i in range(n):
        x = await asyncio.sleep(0, i)
        yield sorted(locals()), sys._getframe().f_code.co_varnames

async def collect():
    return [v async for v in agen(2)]
'''


@pytest.mark.parametrize("module", BACKENDS)
def test_locals_and_varnames_of_generators_and_coroutines_are_the_originals(module):
    plain, probed, log, _ = _load(LOCALS, module)
    for name in ("rows", "coro", "agen", "collect"):
        assert probed[name].__code__.co_varnames == plain[name].__code__.co_varnames, name
        assert "__sp_" not in " ".join(probed[name].__code__.co_varnames)

    def drive(ns):
        g = ns["rows"](2)
        out = [next(g)]
        suspended = [sorted(g.gi_frame.f_locals)]
        try:
            while True:
                out.append(g.send("sent"))
                suspended.append(sorted(g.gi_frame.f_locals))
        except StopIteration:
            pass
        return out, suspended, asyncio.run(ns["coro"](2)), asyncio.run(ns["collect"]())

    assert drive(probed) == drive(plain)
    assert drive(probed)[0][0] == {"n": 2, "total": 0, "i": 0}  # `yield Row(**locals())`
    assert strict_replay(log) == []


# -- the state: what it promises --------------------------------------------------------------------

CASES = '''
import asyncio

def looped(n):
    for i in range(n):
        yield i

def forever(box):
    while True:
        yield box

def handled():
    while True:
        try:
            yield
        except ValueError:
            log.append(["in", [e for e in log if isinstance(e, tuple)][-1]])

def bad(x):
    raise KeyError(x)

def operand_raises():
    for i in range(2):
        try:
            yield bad(i)
        except KeyError:
            log.append("operand raised")

async def failing(i):
    await asyncio.sleep(0)
    raise ConnectionError(i)

async def waits():
    await asyncio.sleep(10)

async def ticks(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i

async def comprehension_iterable():
    try:
        return [y for y in await failing(1)]
    except ConnectionError:
        log.append(["in", [e for e in log if isinstance(e, tuple)][-1]])

async def comprehension_element():
    try:
        return [await failing(x) for x in range(2)]
    except ConnectionError:
        log.append(["in", [e for e in log if isinstance(e, tuple)][-1]])
'''

NESTED = '''
async def nested_comprehension():
    try:
        return [[await failing(y) for y in range(2)] for x in await asyncio.sleep(0, range(2))]
    except ConnectionError:
        log.append(["in", [e for e in log if isinstance(e, tuple)][-1]])

async def comprehension_ok():  # (Python 3.10 refuses an async comprehension inside a comprehension)
    return [[await asyncio.sleep(0, x * y) for y in range(2)] for x in await asyncio.sleep(0, range(3))]

'''
# Python 3.11+ compiles NESTED (an async comprehension inside a comprehension); 3.10 runs the rest
ASYNC_NESTED = sys.version_info >= (3, 11)

CASES += '''
async def except_type_with_finally():
    try:
        try:
            raise KeyError(1)
        except (await failing(2)):
            pass
        finally:
            log.append(["fin", [e for e in log if isinstance(e, tuple)][-1]])
    except ConnectionError:
        log.append(["in", [e for e in log if isinstance(e, tuple)][-1]])
    try:
        try:
            raise KeyError(1)
        except (await failing(3)):
            pass
        finally: log.append(["fin", [e for e in log if isinstance(e, tuple)][-1]])
    except ConnectionError:
        pass
    try:
        raise KeyError(4)
    except (await asyncio.sleep(0, KeyError)):
        pass
    finally:
        log.append(["fin", [e for e in log if isinstance(e, tuple)][-1]])
    return "done"
'''
CASES_HERE = CASES + NESTED if ASYNC_NESTED else CASES  # what the running Python compiles


def _inside(log: list) -> list:
    """The last probe call before each `["in"/"fin", ...]` note: all must be enters."""
    return [e[1][0] for e in log if isinstance(e, list)]  # (the last is bad()'s exit after "operand raised")


@pytest.mark.parametrize("module", BACKENDS)
def test_no_entry_is_left_behind_however_a_suspension_ends(module):
    _, ns, log, mod = _load(CASES_HERE, module)
    start = mod._left_count()
    g = ns["looped"](5)
    next(g)
    assert mod._left_count() == start + 1  # suspended with its regions left
    del g  # dropped while suspended: closed, the guard forgets it
    assert mod._left_count() == start
    box: list = []
    cyclic = ns["forever"](box)
    box.append(cyclic)
    next(cyclic)
    del cyclic, box
    gc.collect()  # a suspended generator in a reference cycle, collected
    assert mod._left_count() == start
    h = ns["handled"]()
    next(h)
    h.throw(ValueError)
    h.close()
    assert list(ns["operand_raises"]()) == []
    assert mod._left_count() == start

    async def tasks():
        task = asyncio.ensure_future(ns["waits"]())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):  # cancelled while suspended in its sleep
            await task
        with pytest.raises(asyncio.TimeoutError):  # the same, by wait_for
            await asyncio.wait_for(ns["waits"](), 0.01)
        it = ns["ticks"](5)
        await it.__anext__()
        await it.aclose()
        it = ns["ticks"](5)
        await it.__anext__()
        with pytest.raises(ValueError):  # thrown in at the suspension, not handled there
            await it.athrow(ValueError)
        c = ns["waits"]()
        c.send(None)
        c.close()
        return [await ns[name]() for name in ("comprehension_iterable", "comprehension_element",
                                              "nested_comprehension", "comprehension_ok", "except_type_with_finally")
                if name in ns]

    results = asyncio.run(tasks())
    if ASYNC_NESTED:
        assert results == [None, None, None, [[0, 0], [0, 1], [0, 2]], "done"]
    else:
        assert results == [None, None, "done"]
    assert mod._left_count() == start
    assert strict_replay(log) == []
    # every handler of an exception raised at a suspension ran inside the regions, and so did the
    # `finally:` after a failed await in an `except` type
    assert _inside(log) == ["enter"] * (8 if ASYNC_NESTED else 7)
    assert log.count("operand raised") == 2


@pytest.mark.parametrize("module", BACKENDS)
def test_a_generator_resumed_on_another_thread_re_enters_there(module):
    _, ns, log, mod = _load(CASES_HERE, module)
    start = mod._left_count()
    g = ns["looped"](3)
    assert next(g) == 0
    got: list = []
    worker = threading.Thread(target=lambda: got.extend(g))
    worker.start()
    worker.join()
    assert got == [1, 2] and mod._left_count() == start
    # on the worker: the loop and the generator were re-entered (outermost first) before anything else
    first_left = log.index(("exit", 0))
    assert log[first_left + 1 : first_left + 3] == [("enter", 0), ("enter", 1)]
    assert strict_replay(log) == []


@pytest.mark.parametrize("module", BACKENDS)
def test_the_flag_may_flip_while_suspended(module):
    _, ns, log, mod = _load(CASES_HERE, module)
    start = mod._left_count()
    g = ns["looped"](4)
    next(g)  # left with probes on
    ns["__sp_on__"] = False
    del log[:]
    next(g)  # resumed with probes off: forgotten, nothing entered; left again with nothing noted
    assert log == [] and mod._left_count() == start
    ns["__sp_on__"] = True
    next(g)  # resumed with probes on: its exits had not run, so nothing is entered
    assert log[:2] == [("exit", 1), ("exit", 0)] and mod._left_count() == start + 1
    g.close()
    assert mod._left_count() == start


# -- tracebacks: the guard's `except BaseException: ...; raise` adds nothing -----------------------------

def test_the_guard_keeps_the_traceback_and_the_exception_chain():
    source = textwrap.dedent('''
        def gen():
            try:
                print((yield 1))
            except KeyError as e:
                raise ValueError("again") from e

        def stops():
            x = yield next(iter(()))
    ''')
    _, probed, _, _ = _load(source, BACKENDS[0])
    g = probed["gen"]()
    next(g)
    with pytest.raises(ValueError) as info:
        g.throw(KeyError("k"))
    frames = traceback.extract_tb(info.value.__cause__.__traceback__)
    lines = body_after_header(code_of(source)).splitlines()
    assert [f.name for f in frames] == ["gen"] and "print(((yield" in lines[frames[0].lineno - 1]  # one entry, at the yield
    assert isinstance(info.value.__context__, KeyError) and info.value.__cause__ is info.value.__context__
    with pytest.raises(RuntimeError) as stop:  # PEP 479
        next(probed["stops"]())
    assert type(stop.value.__cause__) is StopIteration
    assert [f.name for f in traceback.extract_tb(stop.value.__cause__.__traceback__)] == ["stops"]


PROGRAM = '''\
import asyncio, sys, traceback

def show(exc):
    chain, e = [], exc
    while e is not None:
        chain.append((type(e).__name__, str(e), [(f.name, f.lineno, f.line) for f in traceback.extract_tb(e.__traceback__)]))
        e = e.__cause__ or e.__context__
    print(chain)

def consumer():
    total = 0
    while True:
        try:
            total += (yield total) or 0
        except ValueError as e:
            raise KeyError("from consumer") from e
        except GeneratorExit:
            print("closing", sorted(locals()))
            raise

def stopper():
    x = yield next(iter(()))

async def fail(i):
    await asyncio.sleep(0)
    raise ConnectionError(i)

async def group():
    try:
        await asyncio.gather(fail(1), return_exceptions=False)
    except* ConnectionError as eg:
        print("group", [str(e) for e in eg.exceptions])
    try:
        await asyncio.wait_for(asyncio.sleep(1), 0.01)
    except TimeoutError as e:  # (an `async with`'s wrapper would show a frame of ours here)
        show(e)
    async with asyncio.TaskGroup() as tg:
        tg.create_task(fail(7))

c = consumer()
next(c)
c.send(3)
try:
    c.throw(ValueError("thrown"))
except KeyError as e:
    show(e)
c = consumer()
next(c)
c.close()
try:
    c = consumer()
    next(c)
    c.throw(KeyboardInterrupt)
except KeyboardInterrupt as e:
    show(e)
try:
    next(stopper())
except RuntimeError as e:
    show(e)
print(stopper.__code__.co_varnames, consumer.__code__.co_varnames, group.__code__.co_varnames)
asyncio.run(group())
'''


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info < (3, 11), reason="except* and TaskGroup are 3.11+")
@pytest.mark.parametrize("pure", ["0", "1"])
def test_tracebacks_and_outputs_are_the_originals(tmp_path, pure):
    src, out = project_tree(tmp_path, {"main.py": PROGRAM}), tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q"]) == 0
    env = {**run_env(tmp_path), "SCALEPROBE_PURE": pure}
    plain = run([sys.executable, "main.py"], cwd=src, env=env)
    hooked = run([sys.executable, "-m", "runtime.launch", "--out", str(tmp_path / "runs"), "--instrument", "main.py"],
                 cwd=src, env=env)
    built = run([sys.executable, "main.py"], cwd=out, env=env)
    assert "ExceptionGroup" in plain.stderr and "closing" in plain.stdout and plain.returncode == 1
    # the hook compiles with the original lines: everything is the same, tracebacks printed by the program too
    assert (hooked.returncode, hooked.stdout, hooked.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    # the built tree maps the uncaught traceback; what the program printed has the tree's line numbers
    assert (built.returncode, built.stderr.replace(str(out), str(src))) == (plain.returncode, plain.stderr)
    assert len(built.stdout.splitlines()) == len(plain.stdout.splitlines())


# -- line maps of the new shapes --------------------------------------------------------------------

def test_guards_and_re_entries_are_recognised_as_inserted_lines():
    source = textwrap.dedent('''\
        async def c(q):
            x = await q.get()
            print(await q.get(), x)
            try:
                y = 1
            except (await q.errors()):
                pass
            finally:
                z = 2
            try:
                y = 1
            except (await q.errors()):
                pass
            finally: z = 3
            return [w for w in await q.all()]
        ''')
    result = rewrite(source)
    out = split_lines(result.code)
    flags = inserted_lines(out)
    # the fast path: as many lines not ours as original lines, each mapped to its own
    assert len(out) - sum(flags) == len(split_lines(source))
    original = split_lines(source)
    for text, flag, line in zip(out, flags, result.linemap):
        if not flag and "__sp_" not in text:
            assert text.strip() == original[line - 1].strip()
    users = [i for i, text in enumerate(out) if text.strip() == "finally:" and not flags[i]]
    assert len(users) == 1 and result.linemap[users[0]] == 8 and out[users[0] + 1].strip().startswith("__sp_back__()")
    assert result.linemap[out.index("            finally: __sp_back__() and __sp_on__ and __sp_enter__(0); z = 3")] == 14


# -- the NVTX backend: its own pair, no runtime package --------------------------------------------------

NVTX_PROGRAM = '''\
import asyncio, sys

def rows(n):
    for i in range(n):
        try:
            got = yield sorted(locals())
        except ValueError:
            print("handled", sorted(locals()))

async def fail(i):
    await asyncio.sleep(0)
    raise ConnectionError(i)

async def main():
    try:
        return [await fail(x) for x in range(2)]
    except ConnectionError as e:
        return ["failed", str(e), main.__code__.co_varnames]

g = rows(3)
print(next(g), g.throw(ValueError), rows.__code__.co_varnames)
g.close()
print(asyncio.run(main()))
'''


@pytest.mark.slow
def test_nvtx_backend_notes_suspensions_without_the_runtime_package(tmp_path):
    pytest.importorskip("nvtx")
    src, out = project_tree(tmp_path, {"main.py": NVTX_PROGRAM}), tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q", "--backend", "nvtx"]) == 0
    code = (out / "main.py").read_text()
    assert "__sp_left__ = lambda" in code and "__sp_out__" not in code
    # scaleprobe's `runtime` cannot be imported (the venv may have it installed)
    blocked = [sys.executable, "-c", "import sys, runpy; sys.modules['runtime'] = None; runpy.run_path('main.py', run_name='__main__')"]
    env = {"PYTHONPATH": ""}
    plain = run(blocked, cwd=src, env=env)
    built = run(blocked, cwd=out, env=env)
    assert plain.returncode == 0, plain.stderr
    assert (built.returncode, built.stdout, built.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    # the module's own set is empty again
    probe = NVTX_PROGRAM + "print(len(__sp_held__))\n"
    (src / "main.py").write_text(probe)
    assert cli_main([str(src), "-o", str(out), "-q", "--backend", "nvtx"]) == 0
    again = run(blocked, cwd=out, env=env)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "0", again.stderr
    if sys.version_info >= (3, 11):
        # a note holds its frame: a stale one (a generator that ignores GeneratorExit) is never
        # taken by a later frame at its address (review 11, F3)
        src2, out2 = tmp_path / "stale", tmp_path / "stale_out"
        src2.mkdir()
        (src2 / "main.py").write_text(STALE.replace("from runtime import _backend\n", "").replace(
            "_backend.impl._left_count()", "len(__sp_held__)"))
        assert cli_main([str(src2), "-o", str(out2), "-q", "--backend", "nvtx"]) == 0
        stale = run(blocked, cwd=out2, env=env)
        assert stale.returncode == 0 and stale.stdout.split() == ["stale", "1", "stale", "1"], stale.stderr


# -- other Python versions: the built tree with the pure-Python backend ---------------------------------

def _runs(python: str | None) -> bool:
    try:
        return python is not None and subprocess.run([python, "-c", ""], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _python(version: str) -> str | None:
    """An interpreter of `version` that runs: on the path, or one pyenv installed (its shims need a
    version selected)."""
    import glob

    found = [shutil.which(f"python{version}"),
             *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))]
    return next((p for p in found if _runs(p)), None)


OTHER_PYTHONS = {v: p for v in ("3.10", "3.12", "3.13") if (p := _python(v))}


@pytest.mark.slow
@pytest.mark.skipif(not OTHER_PYTHONS, reason="no other Python version installed")
def test_other_python_versions_run_the_built_tree_as_the_original(tmp_path):
    src, out = project_tree(tmp_path, {"main.py": NVTX_PROGRAM}), tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q"]) == 0
    for version, python in OTHER_PYTHONS.items():
        env = {**run_env(tmp_path / version), "SCALEPROBE_PURE": "1"}
        plain = run([python, "main.py"], cwd=src, env=env)
        built = run([python, "main.py"], cwd=out, env=env)
        assert plain.returncode == 0, (version, plain.stderr)
        assert (built.returncode, built.stdout, built.stderr) == (plain.returncode, plain.stdout, plain.stderr), version


STACK_DRIVER = '''
import asyncio, gc, sys
from runtime import _pyprobe as mod

log = []
ns = {"__name__": "case", "log": log, "__sp_on__": True,
      "__sp_enter__": lambda rid: log.append(("enter", rid)), "__sp_exit__": lambda rid: log.append(("exit", rid)),
      "__sp_mark__": lambda rid: None, "__sp_left__": mod.left, "__sp_back__": mod.back}
exec(compile(open(sys.argv[1]).read(), "case.py", "exec"), ns)
g = ns["looped"](5); next(g); del g
box = []; cyclic = ns["forever"](box); box.append(cyclic); next(cyclic); del cyclic, box; gc.collect()
h = ns["handled"](); next(h); h.throw(ValueError); h.close()
list(ns["operand_raises"]())

async def run():
    names = ["comprehension_iterable", "comprehension_element", "nested_comprehension", "comprehension_ok",
             "except_type_with_finally"]
    return [await ns[name]() for name in names if name in ns]

print(asyncio.run(run()), mod._left_count())
stack = []
for entry in log:
    if isinstance(entry, tuple) and entry[0] == "enter":
        stack.append(entry[1])
    elif isinstance(entry, tuple):
        assert stack and stack[-1] == entry[1], (entry, stack)
        stack.pop()
print(stack, [e[1][0] for e in log if isinstance(e, list)])
'''


@pytest.mark.slow
@pytest.mark.skipif(not OTHER_PYTHONS, reason="no other Python version installed")
def test_other_python_versions_keep_the_region_stack(tmp_path):
    # comprehensions run in frames of their own before 3.12 (inlined since): their suspensions are
    # keyed by the function's frame either way
    # (the instrumentor compiles what it wrote: NESTED only where the running Python can)
    (tmp_path / "case.py").write_text(body_after_header(code_of(CASES_HERE)))
    (tmp_path / "case310.py").write_text(body_after_header(code_of(CASES)))
    (tmp_path / "driver.py").write_text(STACK_DRIVER)
    for version, python in OTHER_PYTHONS.items():
        nested = ASYNC_NESTED and version != "3.10"
        done = run([python, "driver.py", "case.py" if nested else "case310.py"], cwd=tmp_path)
        assert done.returncode == 0, (version, done.stderr)
        if not nested:
            assert done.stdout == "[None, None, 'done'] 0\n[] " + repr(["enter"] * 7) + "\n", version
        else:
            assert done.stdout == "[None, None, None, [[0, 0], [0, 1], [0, 2]], 'done'] 0\n[] " + repr(["enter"] * 8) + "\n", version


def _depths_at(log: list, note: str) -> list[int]:
    """How many regions were open at each `note` in the log."""
    depth, out = 0, []
    for e in log:
        if isinstance(e, tuple):
            depth += 1 if e[0] == "enter" else -1
        elif e == note:
            out.append(depth)
    return out


SWALLOWED = '''
import contextlib

def work():
    log.append("work")

async def fetch(i):
    if i % 2:
        raise KeyError(i)
    return i

async def one_line_try():
    got = 0
    for i in range(4):
        try: got += await fetch(i)
        except KeyError: pass
        work()
    return got

def one_line_with():
    with contextlib.suppress(ValueError): x = yield 1
    work()
'''


@pytest.mark.parametrize("module", BACKENDS)
def test_a_one_line_try_or_with_that_swallows_what_its_suspension_raised_re_enters(module):
    # review 10, F1: the guard of a one-line `try:`/`with` suite ran only when the exception left the
    # statement; swallowed there, the rest of the function ran outside its regions, and the frame's
    # note stayed behind
    _, ns, log, mod = _load(SWALLOWED, module)
    start = mod._left_count()
    assert asyncio.run(ns["one_line_try"]()) == 2
    g = ns["one_line_with"]()
    next(g)
    with pytest.raises(StopIteration):
        g.throw(ValueError)
    assert mod._left_count() == start
    assert strict_replay(log) == []
    # every work() ran inside its function's regions (and the loop's): work, loop, function; work, generator
    assert _depths_at(log, "work") == [3, 3, 3, 3, 2]


STALE = '''
import sys
sys.unraisablehook = lambda u: None  # "generator ignored GeneratorExit"
from runtime import _backend

def stubborn():
    while True:
        try:
            yield 1
        except GeneratorExit:
            pass

def victim(n):
    try:
        yield 1 // n          # the operand raises: nothing was left
    except ZeroDivisionError:
        pass
    yield 2

g = stubborn(); next(g); del g
print("stale", _backend.impl._left_count())
for i in range(2000):
    v = victim(0); next(v); del v
print("stale", _backend.impl._left_count())
'''


@pytest.mark.skipif(sys.version_info < (3, 11), reason="on 3.10 a note keeps the frame's address only (docs/instrument.md)")
@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_stale_note_is_never_taken_by_a_later_frame(tmp_path, pure):
    # review 10, F2: a generator that ignores GeneratorExit is freed with its note set; the next frame
    # at its address took the note for its own, entered `victim` a second time, and every later
    # visit was folded into that open one as recursive, with 0 s
    src, out = project_tree(tmp_path, {"main.py": STALE}), tmp_path / "out"
    cli_main([str(src), "-o", str(out), "-q"])
    proc = run([sys.executable, "main.py"], cwd=out, env={**run_env(tmp_path), "SCALEPROBE_PURE": pure})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["stale", "1", "stale", "1"]  # the note stays; no frame takes it
    (path,) = find_run_files(tmp_path / "runs")
    recorded = read_run(path)
    (st,) = [st for p, st in recorded.profile.items() if recorded.callpath_name(p).endswith("victim")]
    assert (st.visits, st.recursive) == (4000, 0) and st.incl_ns > 0
    assert recorded.end["dropped"] == 0


@pytest.mark.parametrize("module", BACKENDS)
def test_a_return_in_finally_that_swallows_an_except_type_await_re_enters(module):
    # a `return` in the user's `finally:` ends the exception that the awaited `except` type raised
    source = '''
async def boom():
    raise KeyError("x")

async def swallowed():
    try:
        raise ValueError
    except (await boom()):
        pass
    finally:
        return "swallowed"

async def one_line_handler():
    for i in range(2):
        try:
            raise ValueError
        except ValueError: await boom()
        finally:
            continue
    return "handled"
'''
    _, ns, log, mod = _load(source, module)
    start = mod._left_count()
    assert asyncio.run(ns["swallowed"]()) == "swallowed"
    assert asyncio.run(ns["one_line_handler"]()) == "handled"
    assert mod._left_count() == start
    assert strict_replay(log) == []


HANDLED_INSIDE = '''
import asyncio

def work():
    log.append("work")

class Quiet:
    async def __aenter__(self):
        return self
    async def __aexit__(self, *exc):
        return False

async def boom():
    raise KeyError("x")

async def one_line_async_with():
    try:
        async with Quiet(): await boom()
    except KeyError:
        pass
    work()

def handler_suspends():
    try: x = yield 1
    except KeyError: y = yield 2
    work()
    yield 3
'''


def test_an_async_with_body_that_raised_at_a_suspension_is_re_entered_once():
    # review 11, F1: the wrapper's __aexit__ exited regions the body's suspension had left, entered
    # them again, and the statement's guard entered them a second time: one entry never closed.
    # (The wrapper asks the backend in use, so the notes must be that backend's.)
    from runtime import _backend

    _, ns, log, mod = _load(HANDLED_INSIDE, _backend.impl.__name__)
    start = mod._left_count()
    asyncio.run(ns["one_line_async_with"]())
    assert mod._left_count() == start
    assert strict_replay(log) == []
    assert _depths_at(log, "work") == [2]  # work, and the coroutine's region


@pytest.mark.parametrize("module", BACKENDS)
def test_a_handler_of_a_one_line_try_re_enters_before_it_suspends(module):
    # review 11, F2: the handler ran before the guard re-entered; its own yield exited closed regions
    _, ns, log, mod = _load(HANDLED_INSIDE, module)
    start = mod._left_count()
    g = ns["handler_suspends"]()
    assert next(g) == 1
    assert g.throw(KeyError) == 2
    assert next(g) == 3
    g.close()
    assert mod._left_count() == start
    assert strict_replay(log) == []
    assert _depths_at(log, "work") == [2]
