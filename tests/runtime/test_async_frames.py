"""Review 55 F2: the wrappers of `async for` / `async with` (`__sp_aiter__`, `__sp_actx__`) were Python
coroutines, so code in the awaited `__anext__` / `__aenter__` / `__aexit__` or in an async generator
consumed by `async for` had runtime/probe.py's frame as its caller: `warnings.warn(stacklevel=2)` named
runtime/probe.py, the default action's once-per-location registry merged every `async for` into
one, `sys._getframe(1)` was `__anext__`, and a traceback the program printed showed our frame. With
runtime._asyncwrap (C) the wrappers return a frameless awaitable: the user's coroutine is the caller
again. What must not change with it: the regions' time while suspended in the statement is excluded,
close() / throw() / garbage collection of a coroutine suspended inside leave the regions balanced and
the run file consistent. Without the extension (the pure fallback) the wrappers are coroutines as
before: the frame assertions skip there, the others run."""

from __future__ import annotations

import asyncio
import gc
import importlib
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from runtime import probe
from runtime.runfile import read_run
from tests.envclean import clean_env
from tests.instrumentor.instr_helpers import load_both, strict_replay

REPO = Path(__file__).resolve().parents[2]

try:
    importlib.import_module("runtime._asyncwrap")
    HAVE_C = True
except ImportError:
    HAVE_C = False

needs_c = pytest.mark.skipif(
    not HAVE_C, reason="runtime._asyncwrap is not built (pure fallback): the wrappers are coroutines, whose frame "
                       "callers see (docs/instrument.md, Known limits)")

MAIN = """\
import t


def run():  # (a function: the entry script's probes give t.py its own line numbers)
    t.main()


run()
"""

WARNS = '''\
import asyncio
import sys
import warnings


class Stream:
    def __init__(self, n=1):
        self.n = n

    def __aiter__(self):
        return self

    async def __anext__(self):
        warnings.warn("iterating a Stream is deprecated", stacklevel=2)
        if self.n <= 0:
            raise StopAsyncIteration
        self.n -= 1
        return self.n


class Lock:
    async def __aenter__(self):
        warnings.warn("Lock is deprecated", stacklevel=2)
        return self

    async def __aexit__(self, *exc):
        warnings.warn("Lock exit is deprecated", stacklevel=2)
        return False


async def ticks():
    print("caller of ticks:", sys._getframe(1).f_code.co_name)
    f = sys._getframe(1)
    print("its line:", f.f_lineno, f.f_code.co_filename.endswith("t.py"))
    yield 1
    print("caller of ticks again:", sys._getframe(1).f_code.co_name)
    yield 2


async def consume():
    async for x in Stream():
        pass
    async for y in Stream():
        pass
    async with Lock():
        pass


async def consume2():
    got = []
    async for x in ticks():
        got.append(x)
    print([v async for v in ticks()], got)


def main():
    asyncio.run(consume())
    asyncio.run(consume2())
'''

TRACEBACKS = '''\
import asyncio
import traceback


class Broken:
    def __aiter__(self):
        return self

    async def __anext__(self):
        raise ValueError("broken stream")


class BadLock:
    async def __aenter__(self):
        raise KeyError("no entry")

    async def __aexit__(self, *exc):
        return False


async def consume():
    try:
        async for x in Broken():
            pass
    except ValueError:
        traceback.print_exc()
    try:
        async with BadLock():
            pass
    except KeyError:
        traceback.print_exc()
    async for x in Broken():
        pass


def main():
    asyncio.run(consume())
'''

TIMED = '''\
import asyncio


class Slow:
    async def __aenter__(self):
        await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc):
        await asyncio.sleep(0.05)
        return False


async def slow(n):
    for i in range(n):
        await asyncio.sleep(0.05)
        yield i


async def consume():
    total = 0
    async for x in slow(3):
        total += x
    async with Slow():
        total += 1
    return total


def main():
    print(asyncio.run(consume()))
'''

SUSPENDED = '''\
import asyncio
import gc
import types


@types.coroutine
def pause():
    yield  # (a bare yield: asyncio takes it as sleep(0))


async def agen():
    await pause()
    yield 1


class Held:
    async def __aenter__(self):
        await pause()
        return self

    async def __aexit__(self, *exc):
        await pause()
        return False


async def loop():
    async for x in agen():
        pass


async def held():
    async with Held():
        pass


async def body_raises():
    async with Held():
        raise KeyError("body")


def drive():
    for make in (loop, held):
        c = make()
        assert c.send(None) is None
        c.close()  # closed while suspended inside the statement
        c = make()
        c.send(None)
        try:
            c.throw(ValueError("thrown"))
        except ValueError:
            pass
        c = make()
        c.send(None)
        del c  # freed while suspended
        gc.collect()
    c = body_raises()
    c.send(None)
    try:
        c.send(None)  # the body raises; __aexit__ pauses
    except StopIteration:
        raise AssertionError("did not pause in __aexit__")
    c.close()  # closed while suspended in __aexit__


def main():
    drive()
    asyncio.run(loop())
    asyncio.run(held())
    print("ok")
'''


def _build(tmp_path: Path, module: str) -> tuple[Path, Path]:
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "main.py").write_text(MAIN)
    (src / "t.py").write_text(module)
    e = clean_env(PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-m", "instrumentor.cli", "src", "-o", "out", "-q"], cwd=tmp_path, env=e,
                   check=True, timeout=120)
    return src, out


def _run(where: Path, tmp_path: Path, out: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    e = clean_env(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"), SCALEPROBE_QUIET="1", **env)
    done = subprocess.run([sys.executable, "main.py"], cwd=where, env=e, capture_output=True, text=True, timeout=120)
    if out is not None:  # the built tree's paths read as the source's
        src = str(tmp_path / "src")
        done.stdout, done.stderr = (t.replace(str(out), src) for t in (done.stdout, done.stderr))
    return done


WAYS = [{}, {"SCALEPROBE_DISABLE": "1"}, {"SCALEPROBE_PURE": "1"}]


def _outputs(tmp_path: Path, module: str) -> tuple[subprocess.CompletedProcess, list[subprocess.CompletedProcess]]:
    src, out = _build(tmp_path, module)
    return _run(src, tmp_path), [_run(out, tmp_path, out, **env) for env in WAYS]


@needs_c
def test_warnings_and_callers_name_the_user_s_statement(tmp_path):
    plain, built = _outputs(tmp_path, WARNS)
    assert plain.returncode == 0, plain.stderr
    # the original's: each `async for` is its own location (two warnings), `async with` names its line
    assert plain.stderr.count("iterating a Stream is deprecated") == 2
    assert "probe.py" not in plain.stderr and "caller of ticks: consume2" in plain.stdout
    for way, done in zip(WAYS, built):
        assert (done.returncode, done.stdout, done.stderr) == (plain.returncode, plain.stdout, plain.stderr), way


@needs_c
def test_a_caught_traceback_has_no_frame_of_ours(tmp_path):
    plain, built = _outputs(tmp_path, TRACEBACKS)
    assert plain.returncode == 1 and plain.stderr.count("Traceback") == 3
    for way, done in zip(WAYS, built):
        assert (done.returncode, done.stdout, done.stderr) == (plain.returncode, plain.stdout, plain.stderr), way


def test_an_uncaught_traceback_is_the_original_s(tmp_path):
    """Also with the pure fallback: its extra frame is left out of a traceback shown at exit."""
    plain, built = _outputs(tmp_path, TRACEBACKS.replace("traceback.print_exc()", "pass"))
    assert plain.returncode == 1 and plain.stderr.count("Traceback") == 1
    for way, done in zip(WAYS, built):
        assert (done.returncode, done.stderr) == (plain.returncode, plain.stderr), way


def _named(run) -> dict[tuple[str, ...], object]:
    names = {rid: reg.name for rid, reg in run.regions.items()}
    return {tuple(names[i] for i in p): st for p, st in run.profile.items()}


def _assert_exact(run) -> None:
    """Every path's parent is in the profile and its inclusive time is its exclusive time plus its
    children's (docs/format.md)."""
    prof = run.profile
    for path, st in prof.items():
        assert len(path) == 1 or path[:-1] in prof, f"orphan {path}"
        kids = [k for k in prof if len(k) == len(path) + 1 and k[:-1] == path]
        assert abs(st.incl_ns - st.excl_ns - sum(prof[k].incl_ns for k in kids)) <= len(kids) + 1, path


def _one_run(tmp_path: Path, out: Path, **env: str):
    for f in (tmp_path / "runs").glob("*.jsonl") if (tmp_path / "runs").exists() else ():
        f.unlink()
    done = _run(out, tmp_path, **env)
    assert done.returncode == 0, done.stderr
    [f] = (tmp_path / "runs").glob("*.jsonl")
    return done, read_run(f)


@pytest.mark.parametrize("pure", ["0", "1"])
def test_time_suspended_in_the_statement_is_not_the_region_s(tmp_path, pure):
    _, out = _build(tmp_path, TIMED)
    done, run = _one_run(tmp_path, out, SCALEPROBE_PURE=pure)
    assert done.stdout == "4\n"
    p = _named(run)
    # (a coroutine's visit is counted per stretch it runs between suspensions)
    consume = [st for k, st in p.items() if k[-1] == "consume"]
    loop = [st for k, st in p.items() if k[-1].startswith("consume:for@")]
    agen = [st for k, st in p.items() if k[-1] == "slow"]
    assert len(consume) == len(loop) == len(agen) == 1 and consume[0].visits >= 2 and agen[0].visits >= 3, p
    # 5 sleeps of 50 ms in `async for` and `async with`: none of it is consume's or its loop's
    assert consume[0].incl_ns < 40_000_000 and loop[0].incl_ns < 40_000_000, (consume, loop)
    assert p[("run", "main")].excl_ns > 200_000_000  # (asyncio.run's: the event loop waits there)
    assert run.end["closed_at_end"] == 0 and run.end["dropped"] == 0
    _assert_exact(run)


@pytest.mark.parametrize("pure", ["0", "1"])
def test_closed_thrown_or_freed_inside_the_statement_keeps_the_run_file_exact(tmp_path, pure):
    _, out = _build(tmp_path, SUSPENDED)
    done, run = _one_run(tmp_path, out, SCALEPROBE_PURE=pure)
    assert done.stdout == "ok\n" and done.stderr == ""
    p = _named(run)
    assert {k[-1] for k in p} >= {"drive", "loop", "loop:for@27", "held", "body_raises", "agen", "Held.__aexit__"}
    assert run.end["closed_at_end"] == 0 and run.end["dropped"] == 0
    _assert_exact(run)


def _probed(source: str):
    backend = importlib.import_module("runtime._backend").impl
    return load_both(source, backend.left, backend.back)


def test_close_throw_and_gc_inside_the_statement_keep_the_regions_balanced():
    _, ns, log = _probed(SUSPENDED.replace("def main():", "def unused():"))
    ns["drive"]()
    asyncio.run(ns["loop"]())
    asyncio.run(ns["held"]())
    assert strict_replay(log) == []
    enters = [e for e in log if isinstance(e, tuple) and e[0] == "enter"]
    assert enters and len(enters) == len([e for e in log if isinstance(e, tuple) and e[0] == "exit"])


STEPS = '''
import types

@types.coroutine
def pause(v):
    got = yield v
    return got

class Manual:
    def __aiter__(self):
        return self

    async def __anext__(self):
        got = await pause("first")
        if got == "stop":
            raise StopAsyncIteration
        return (got, await pause("second"))

async def consume():
    out = []
    async for item in Manual():
        out.append(item)
    return out

class Cm:
    async def __aenter__(self):
        return await pause("enter")

    async def __aexit__(self, *exc):
        return await pause("exit")

async def suppressed():
    async with Cm() as v:
        raise KeyError(v)
    return "after"
'''


def _drive(coro, values):
    seen = []
    try:
        seen.append(coro.send(None))
        for v in values:
            seen.append(coro.send(v))
    except StopIteration as stop:
        return seen, stop.value
    raise AssertionError(f"not done: {seen}")


def test_send_values_and_results_pass_through_as_in_the_original():
    plain, ns, log = _probed(STEPS)
    for space in (plain, ns):
        assert _drive(space["consume"](), ["a", "b", "c", "d", "stop"]) == (
            ["first", "second", "first", "second", "first"], [("a", "b"), ("c", "d")])
        # __aexit__'s value (truthy: the KeyError suppressed) passes through
        assert _drive(space["suppressed"](), ["v", 1]) == (["enter", "exit"], "after")
    assert strict_replay(log) == []


@needs_c
def test_the_awaited_coroutine_s_caller_is_the_user_s():
    source = '''
import sys

class It:
    def __aiter__(self):
        return self

    async def __anext__(self):
        raise StopAsyncIteration

class Cm:
    async def __aenter__(self):
        return sys._getframe(1).f_code.co_name

    async def __aexit__(self, *exc):
        self.caller = sys._getframe(1).f_code.co_name
        return False

async def user():
    async for x in It():
        pass
    cm = Cm()
    async with cm as caller:
        pass
    return caller, cm.caller

async def asyncgen():
    yield sys._getframe(1).f_code.co_name

async def consumer():
    return [x async for x in asyncgen()] + [x async for x in asyncgen()]
'''
    plain, ns, log = _probed(source)
    for space in (plain, ns):
        assert asyncio.run(space["user"]()) == ("user", "user")
    # the comprehension's own frame (3.12+ inlines it: then the coroutine's), as in the original
    assert asyncio.run(ns["consumer"]()) == asyncio.run(plain["consumer"]()) != ["__anext__"] * 2
    assert strict_replay(log) == []


@needs_c
def test_the_awaitable_delegates_as_await_does():
    """runtime._asyncwrap.around() on its own: send/throw/close reach the awaited object, the
    regions are re-entered once whichever way it ends."""
    from runtime._asyncwrap import around

    entered: list = []
    g = {"__sp_on__": True, "__sp_enter__": entered.append}

    @types.coroutine
    def inner():
        try:
            got = yield "a"
        except KeyError as e:
            got = ("caught", e.args[0])
        got2 = yield got
        return (got, got2)

    w = around(inner(), g, (1, 2))
    assert w.__await__() is w
    assert w.send(None) == "a" and entered == []
    assert w.throw(KeyError("k")) == ("caught", "k")
    with pytest.raises(StopIteration) as stop:
        w.send("z")
    assert stop.value.value == (("caught", "k"), "z") and entered == [2, 1]
    with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
        w.send(None)
    w.close()  # a finished one closes silently
    assert entered == [2, 1]

    entered.clear()
    w = around(inner(), g, (3,))
    next(w)
    w.close()
    assert entered == [3]
    w = around(inner(), g, (4,))
    next(w)
    with pytest.raises(ValueError, match="x"):
        w.throw(ValueError("x"))
    assert entered == [3, 4]
    w = around(inner(), g, (5,))
    next(w)
    with pytest.raises(GeneratorExit):
        w.throw(GeneratorExit)
    assert entered == [3, 4, 5]
    w = around(inner(), g, (6,))
    next(w)
    del w
    gc.collect()
    assert entered == [3, 4, 5, 6]
    g["__sp_on__"] = False  # read when the step is done
    w = around(inner(), g, (7,))
    next(w)
    w.close()
    assert entered == [3, 4, 5, 6]

    class NoThrow:  # an iterator of __await__ without throw(): raised at the await
        def __await__(self):
            return iter([1, 2])

    g["__sp_on__"] = True
    w = around(NoThrow(), g, (8,))
    assert next(w) == 1
    with pytest.raises(IndexError):
        w.throw(IndexError)
    assert entered[-1] == 8

    def failing(rid):
        raise OSError("enter failed")

    w = around(inner(), {"__sp_on__": True, "__sp_enter__": failing}, (9,))
    next(w)
    with pytest.raises(OSError) as err:
        w.throw(ValueError("inner"))
    assert isinstance(err.value.__context__, ValueError)  # as a `finally:` that raises


BAD_AWAIT = '''\
import asyncio


class BadAwait:
    def __await__(self):
        return 42  # not an iterator


class NoAwait:
    pass


class It:
    def __init__(self, step):
        self.step = step

    def __aiter__(self):
        return self

    def __anext__(self):
        return self.step()


async def use(step):
    try:
        async for v in It(step):
            pass
    except TypeError as e:
        print(type(e).__name__, e, "| cause:", repr(e.__cause__))


def main():
    asyncio.run(use(BadAwait))
    asyncio.run(use(NoAwait))
'''


@needs_c
def test_an_invalid_awaitable_from_anext_is_the_statement_s_error(tmp_path):
    """Review 56 F9: `async for` wraps what `await` says of the step in its own TypeError (message
    and __cause__); the built program raised `await`'s alone."""
    plain, built = _outputs(tmp_path, BAD_AWAIT)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.count("'async for' received an invalid object from __anext__") == 2
    assert "cause: TypeError(\"__await__() returned non-iterator of type 'int'\")" in plain.stdout
    for way, done in zip(WAYS, built):
        assert (done.returncode, done.stdout) == (plain.returncode, plain.stdout), way
