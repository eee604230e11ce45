"""`async for` / `async with` over objects whose protocol methods return something that cannot be
awaited: the instrumented program says what the interpreter says (review 44: the wrappers in
runtime/probe.py awaited it themselves, which said "object int can't be used in 'await'
expression")."""

from instr_helpers import assert_same, three_ways

MAIN = '''\
import asyncio
import types


class SyncEnter:
    def __aenter__(self):  # `async` forgotten
        return self

    async def __aexit__(self, *exc):
        return False


class SyncExit:
    async def __aenter__(self):
        return self

    def __aexit__(self, *exc):
        return 0


class IntStep:
    def __aiter__(self):
        return self

    def __anext__(self):
        return 1


class GenStep:
    def __init__(self):
        self.n = 0

    def __aiter__(self):
        return self

    def __anext__(self):
        self.n += 1
        if self.n > 2:
            raise StopAsyncIteration
        return self.coro()

    @types.coroutine
    def coro(self):  # a generator marked as a coroutine: awaitable
        yield
        return self.n


class Waits:
    def __await__(self):
        return iter(())


class AwaitableExit:
    async def __aenter__(self):
        return "entered"

    def __aexit__(self, *exc):
        return Waits()


async def case(name, body):
    try:
        print(name, await body())
    except TypeError as exc:
        print(name, type(exc).__name__, exc)


async def enter():
    async with SyncEnter():
        return "body"


async def leave():
    async with SyncExit():
        return "body"


async def steps():
    async for x in IntStep():
        return x


async def gen_steps():
    return [x async for x in GenStep()]


async def awaitable_exit():
    async with AwaitableExit() as got:
        return got


async def main():
    for name, body in [("enter", enter), ("leave", leave), ("steps", steps), ("gen_steps", gen_steps),
                       ("awaitable_exit", awaitable_exit)]:
        await case(name, body)


asyncio.run(main())
'''


def test_async_protocol_methods_returning_non_awaitables_fail_as_in_the_original(tmp_path):
    plain, built, hooked = three_ways(tmp_path, {"main.py": MAIN})
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines() == [
        "enter TypeError 'async with' received an object from __aenter__ that does not implement __await__: SyncEnter",
        "leave TypeError 'async with' received an object from __aexit__ that does not implement __await__: int",
        "steps TypeError 'async for' received an invalid object from __anext__: int",
        "gen_steps [1, 2]",
        "awaitable_exit entered",
    ]
    assert_same(plain, built, hooked)
