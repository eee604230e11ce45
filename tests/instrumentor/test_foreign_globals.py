"""Code of an instrumented module run with globals that lack its probes (review 41 F1): a function
rebuilt with `types.FunctionType(f.__code__, other_globals)` or code run by `exec(code, {})`
raised `NameError: __sp_on__`, even with probes off. It now runs with probes off
(`runtime.probe.OFF_PROBES`), as the original does."""

import importlib.util

import pytest

from instr_helpers import assert_same, three_ways

MAIN = '''\
import asyncio
import types

def f(x):
    total = 0
    for i in range(x):
        total += i
    return total + 1

def gen(n):
    for i in range(n):
        got = yield i
        if got:
            print("got", got)

async def co(n):
    await asyncio.sleep(0)
    return n * 2

async def agen():
    yield 1

async def loops():
    async for v in agen():
        print("async for", v)

fresh = {"__builtins__": __builtins__, "asyncio": asyncio, "agen": agen}
print(types.FunctionType(f.__code__, fresh, "g")(4))
h = types.FunctionType(gen.__code__, fresh, "h")(3)
print(next(h), h.send("x"), list(h))
print(asyncio.run(types.FunctionType(co.__code__, fresh, "c")(5)))
asyncio.run(types.FunctionType(loops.__code__, fresh, "l")())
ns = {}
exec(compile("def k():\\n    return [j for j in range(3)]\\n", "<k>", "exec"), ns)
print(ns["k"]())
'''


@pytest.mark.parametrize("backend", ["runtime", "nvtx"])
def test_a_function_rebuilt_with_other_globals_runs_as_in_the_original(tmp_path, backend):
    if backend == "nvtx" and importlib.util.find_spec("nvtx") is None:
        pytest.skip("the nvtx package is not installed")
    plain, built, hooked = three_ways(tmp_path, {"main.py": MAIN}, "--backend", backend)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines()[:5] == ["7", "got x", "0 1 [2]", "10", "async for 1"]
    assert_same(plain, built, hooked)
