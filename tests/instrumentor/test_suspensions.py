"""yield and await: every resumption is a visit; suspended time is outside the region."""
import asyncio
import sys
import textwrap

import pytest

from instr_helpers import body_after_header, code_of, load_both, rewrite


def test_statement_level_yield_exits_loop_and_function_after_its_operand_and_reenters_in_finally():
    code = code_of('''
        def g(n):
            for i in range(n):
                x = yield f(i)
    ''')
    assert body_after_header(code) == textwrap.dedent('''
        def g(n):
            if __sp_on__: __sp_enter__(0)
            try:
                if __sp_on__: __sp_enter__(1)
                try:
                    for i in range(n):
                        if __sp_on__: __sp_mark__(1)
                        try:
                            x = yield (f(i), __sp_on__ and (__sp_exit__(1), __sp_exit__(0), __sp_left__()))[0]
                        finally: __sp_back__() and __sp_on__ and (__sp_enter__(0), __sp_enter__(1))
                finally:
                    if __sp_on__: __sp_exit__(1)
            finally:
                if __sp_on__: __sp_exit__(0)
    ''')


def test_yield_inside_an_expression_is_bracketed_in_place():
    code = code_of("def g():\n    print((yield 1), 2)\n")
    assert ("print(((yield (1, __sp_on__ and (__sp_exit__(0), __sp_left__()))[0]), "
            "__sp_back__() and __sp_on__ and __sp_enter__(0))[0], 2)") in code
    # re-entered in place: the guard runs only when the statement raised
    assert ("        try:\n            print(((yield (1, __sp_on__ and (__sp_exit__(0), __sp_left__()))[0]), "
            "__sp_back__() and __sp_on__ and __sp_enter__(0))[0], 2)\n"
            "        except BaseException: __sp_back__() and __sp_on__ and __sp_enter__(0); raise\n") in code


def test_return_await_reenters_before_the_function_exits():
    code = code_of("async def f(x):\n    return await x\n")
    assert ("        try:\n            return await (x, __sp_on__ and (__sp_exit__(0), __sp_left__()))[0]\n"
            "        finally: __sp_back__() and __sp_on__ and __sp_enter__(0)\n") in code
    assert "left as __sp_left__, back as __sp_back__, define as __sp_define__" in code


def test_awaits_in_headers_and_comprehensions_are_bracketed():
    code = code_of('''
        async def f(q, xs):
            if await q.ready():
                return [await q.get(x) for x in xs]
            while await q.more():
                pass
    ''')
    assert ("if (await (q.ready(), __sp_on__ and (__sp_exit__(0), __sp_left__()))[0], "
            "__sp_back__() and __sp_on__ and __sp_enter__(0))[0]:") in code
    # a comprehension's element: its own frame before Python 3.12, the runtime looks for the function's
    assert ("[(await (q.get(x), __sp_on__ and (__sp_exit__(0), __sp_left__(1)))[0], "
            "__sp_back__(1) and __sp_on__ and __sp_enter__(0))[0] for x in xs]") in code
    # the while test runs inside the loop region: both are left and re-entered
    assert ("while (await (q.more(), __sp_on__ and (__sp_exit__(1), __sp_exit__(0), __sp_left__()))[0], "
            "__sp_back__() and __sp_on__ and (__sp_enter__(0), __sp_enter__(1)))[0]:") in code


def test_generator_expressions_and_lambdas_are_not_entered():
    code = code_of("async def f(xs):\n    g = (await x for x in xs)\n    return g\n")
    assert "(await x for x in xs)" in code


def test_nested_function_yield_does_not_make_the_outer_a_generator():
    result = rewrite("def outer():\n    def inner():\n        yield 1\n    return inner\n")
    assert [(r.name, r.kind) for r in result.regions] == [("outer", "function"), ("outer.<locals>.inner", "generator")]


def test_word_yield_in_a_name_is_not_a_generator():
    result = rewrite("def f(yield_value):\n    return yield_value\n")
    assert result.regions[0].kind == "function"


# -- the hidden awaits of `async for` / `async with` -------------------------------------------

def test_async_for_and_with_wrap_their_operand_with_the_open_regions_innermost_first():
    code = code_of('''
        async def f(it, lock):
            async with lock as held, other():
                async for x in it:
                    for y in x:
                        async for z in y:
                            pass
    ''')
    assert "async with __sp_actx__((0,), lock) as held, __sp_actx__((0,), other()):" in code
    assert "async for x in __sp_aiter__((1, 0), it):" in code
    assert "async for z in __sp_aiter__((3, 2, 1, 0), y):" in code
    assert "async_iter as __sp_aiter__, async_ctx as __sp_actx__, define as __sp_define__" in code


def test_async_comprehensions_are_wrapped_but_async_generator_expressions_are_not():
    code = code_of("async def f(it):\n    a = [x async for x in it]\n    return (x async for x in a)\n")
    assert "a = [x async for x in __sp_aiter__((0,), it)]" in code
    assert "return (x async for x in a)" in code


def test_awaits_in_the_operand_are_bracketed_inside_the_wrapper():
    code = code_of("async def f(q):\n    async for x in await q.stream():\n        pass\n")
    assert "__sp_aiter__((1, 0), (await (q.stream(), __sp_on__ and (__sp_exit__(1), __sp_exit__(0), __sp_left__()))[0]," in code


def test_nvtx_backend_leaves_async_for_and_with_alone():
    code = code_of("async def f(it, lock):\n    async with lock:\n        async for x in it:\n            pass\n", backend="nvtx")
    assert "async with lock:" in code and "async for x in it:" in code
    assert "__sp_aiter__" not in code and "__sp_actx__" not in code


def test_modules_without_async_for_or_with_do_not_import_the_wrappers():
    code = code_of("async def f(x):\n    return await x\n")
    assert "__sp_aiter__" not in code and "__sp_actx__" not in code


def test_instrumenting_twice_changes_nothing():
    once = code_of("async def f(it, lock):\n    async with lock:\n        async for x in it:\n            pass\n")
    assert rewrite(once).status == "already"


# Rewritten code run in-process against probes that log, next to the original code.

def _load(source: str, on: bool = True) -> tuple[dict, dict, list]:
    from runtime import probe

    return load_both(source, probe.left, probe.back, on)


def _outcome(coro_fn, *args):
    try:
        return ("ok", asyncio.run(coro_fn(*args)))
    except BaseException as exc:  # noqa: BLE001 - any exception is an outcome to compare
        return ("raised", type(exc).__name__, str(exc))


CASES = '''
import asyncio, contextlib

class Items:  # a hand-written async iterator that logs when its __anext__ runs
    def __init__(self, n, fail_at=None):
        self.i, self.n, self.fail_at = 0, n, fail_at
    def __aiter__(self):
        return self
    async def __anext__(self):
        log.append("anext")
        await asyncio.sleep(0)
        if self.i == self.fail_at:
            raise ValueError(f"iterator failed at {self.i}")
        if self.i >= self.n:
            raise StopAsyncIteration
        self.i += 1
        return self.i

async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i * 10

class Suppress:
    def __init__(self, verdict):
        self.verdict = verdict
    async def __aenter__(self):
        log.append("aenter")
        return "entered"
    async def __aexit__(self, et, ev, tb):
        log.append("aexit")
        return self.verdict

@contextlib.asynccontextmanager
async def managed(tag):
    await asyncio.sleep(0)
    yield f"<{tag}>"
    await asyncio.sleep(0)

async def total(n):
    out = []
    async for x in Items(n):
        out.append(x)
    else:
        out.append("else")
    return out

async def early(n):
    async for x in agen(n):
        if x >= 20:
            break
    return x

async def failing_iterator():
    return [x async for x in Items(5, fail_at=2)]

async def failing_body():
    async for x in Items(3):
        raise KeyError(x)

async def with_verdict(verdict):
    async with Suppress(verdict) as v:
        raise RuntimeError(v)
    return "suppressed"

async def locked():
    lock = asyncio.Lock()
    async with lock, managed("a") as a, managed("b") as b:
        held = lock.locked()
    return a, b, held, lock.locked()

async def bad_iterable():
    async for x in 3:
        pass

async def bad_manager():
    async with Items(1):
        pass

async def empty():
    async for x in Items(0):
        return "never"
    return "done"
'''


@pytest.mark.parametrize("call", [
    ("total", 3), ("early", 5), ("failing_iterator",), ("failing_body",), ("with_verdict", True),
    ("with_verdict", 1), ("with_verdict", 0), ("with_verdict", None), ("locked",), ("bad_iterable",),
    ("bad_manager",), ("empty",),
])
def test_async_for_and_with_behave_as_before(call):
    plain, probed, log = _load(CASES)
    name, *args = call
    assert _outcome(probed[name], *args) == _outcome(plain[name], *args)
    assert plain["log"] == [entry for entry in log if isinstance(entry, str)]
    assert _replay(log) == []


def _replay(log: list) -> list[int]:
    """The runtime's region stack after the logged probe calls; an exit must close the innermost
    visit (or one already closed: a generator closed at its `yield` skips the re-entry)."""
    stack: list[int] = []
    for entry in log:
        if isinstance(entry, tuple) and entry[0] == "enter":
            stack.append(entry[1])
        elif isinstance(entry, tuple) and entry[1] in stack:
            assert stack[-1] == entry[1], (entry, stack)
            stack.pop()
    return stack


def test_each_anext_runs_outside_the_loop_and_function_regions():
    _, probed, log = _load(CASES)
    asyncio.run(probed["total"](1))
    anexts = [i for i, e in enumerate(log) if e == "anext"]
    assert len(anexts) == 2  # one item, then StopAsyncIteration
    for i in anexts:
        # Items.__anext__ is itself a region, entered right before "anext": before that, the
        # loop's and then total's region were left
        assert log[i - 3 : i - 1] == [("exit", log[i - 3][1]), ("exit", log[i - 2][1])]
        loop_rid, func_rid = log[i - 3][1], log[i - 2][1]
        assert loop_rid != func_rid
        after = log[i + 1 :]
        resumed = after.index(("enter", func_rid))
        assert after[resumed + 1] == ("enter", loop_rid)


def test_async_with_leaves_the_function_region_around_aenter_and_aexit():
    _, probed, log = _load(CASES)
    asyncio.run(probed["with_verdict"](True))
    for word in ("aenter", "aexit"):
        i = log.index(word)
        # Suppress.__aenter__/__aexit__ are method regions entered just before the word
        assert log[i - 2][0] == "exit" and log[i - 1][0] == "enter"
        func_rid = log[i - 2][1]
        assert ("enter", func_rid) in log[i + 1 :]


def test_probes_off_means_no_probe_calls():
    _, probed, log = _load(CASES, on=False)
    assert asyncio.run(probed["total"](2)) == [1, 2, "else"]
    assert log == ["anext"] * 3


def test_the_wrapper_keeps_no_reference_to_the_last_item():
    source = '''
        import weakref

        class Box:
            pass

        async def boxes():
            for _ in range(2):
                yield Box()

        async def check():
            refs = []
            async for box in boxes():
                refs.append(weakref.ref(box))
                del box
                alive = refs[-1]() is not None
                log.append(alive)
            return refs
    '''
    plain, probed, log = _load(source)
    asyncio.run(probed["check"]())
    assert [e for e in log if isinstance(e, bool)] == [False, False]


# consume() is suspended in slow_items' asyncio.sleep for this long per item (3 items) while ticker() runs.
ITEM_SLEEP_S = 0.1

CONCURRENT = '''
import asyncio, json, sys

async def slow_items(n):
    for i in range(n):
        await asyncio.sleep(ITEM_SLEEP_S)
        yield i

async def consume():
    total = 0
    async for x in slow_items(3):
        total += x
    return total

async def ticker():
    ticks = 0
    for _ in range(40):
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks

async def main():
    return await asyncio.gather(consume(), ticker())

print(json.dumps(asyncio.run(main())))
'''.replace("ITEM_SLEEP_S", repr(ITEM_SLEEP_S))


@pytest.mark.slow
def test_time_suspended_in_async_for_is_not_compute_with_concurrent_tasks(tmp_path):
    from instr_helpers import instrument_cli, run
    from runtime.runfile import find_run_files, read_run

    src, out, runs = tmp_path / "src", tmp_path / "out", tmp_path / "runs"
    src.mkdir()
    (src / "main.py").write_text(textwrap.dedent(CONCURRENT))
    built = instrument_cli(str(src), "-o", str(out))
    assert built.returncode == 0, built.stdout + built.stderr
    assert "async for x in __sp_aiter__(" in (out / "main.py").read_text()
    result = run([sys.executable, "main.py"], cwd=out, env={"SCALEPROBE_OUT": str(runs)}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[3, 40]"
    recorded = read_run(find_run_files(runs)[0])
    assert not recorded.problems
    rid = {r.name: r.id for r in recorded.regions.values()}

    def stats(name):
        paths = [s for path, s in recorded.profile.items() if path[-1] == rid[name]]
        return sum(s.visits for s in paths), sum(s.excl_ns for s in paths) / 1e9

    visits, compute = stats("consume")
    # 3 * ITEM_SLEEP_S asleep in __anext__ while ticker() ran: none of it is consume's or its loop's compute
    # (their own work is a few µs; counted, the suspension alone would be twice the bound)
    asleep = 3 * ITEM_SLEEP_S
    assert visits >= 4 and compute < 0.5 * asleep
    assert stats("consume:for@11")[1] < 0.5 * asleep
    # ticker's regions never nested under consume's: each task's visits are its own
    assert all(rid["consume"] not in path[:-1] for path in recorded.profile if path[-1] == rid["ticker"])


def test_import_hook_shifts_the_region_ids_given_to_the_wrappers():
    import ast

    from instrumentor.importhook import shift_ids

    tree = ast.parse(code_of("async def f(it, lock):\n    async with lock:\n        async for x in it:\n            pass\n"))
    shift_ids(tree, 100)
    wrapped = {
        node.func.id: ast.literal_eval(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("__sp_aiter__", "__sp_actx__")
    }
    assert wrapped == {"__sp_actx__": (100,), "__sp_aiter__": (101, 100)}


def test_wrapped_lines_map_back_to_their_original_lines():
    source = "async def f(it, lock):\n    async with lock:\n        async for x in it:\n            print(x)\n"
    result = rewrite(source)
    out = result.code.splitlines()
    assert result.linemap[out.index("        async with __sp_actx__((0,), lock):")] == 2
    assert result.linemap[out.index("                async for x in __sp_aiter__((1, 0), it):")] == 3
    assert result.linemap[out.index("                    print(x)")] == 4
