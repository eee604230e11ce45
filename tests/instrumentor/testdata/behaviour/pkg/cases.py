#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""Constructs that instrumentation must not change (each was seen breaking in a real tool)."""
from __future__ import annotations

import asyncio
import enum
import functools
import inspect
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    def only_for_typing(x: int) -> int:
        return x

COUNTER = 0


def plain(a, b=2, *args, c, d=4, **kw):
    """Plain docstring."""
    return a + b + c + d + len(args) + len(kw)


def uses_locals(x):
    y = x * 2
    return sorted(locals())


def uses_global():
    global COUNTER
    COUNTER += 1
    return COUNTER


def closure():
    n = 0

    def bump():
        nonlocal n
        n += 1
        return n

    bump()
    return bump()


def recursive_depth(n):
    if n == 0:
        return len(inspect.stack(0))
    return recursive_depth(n - 1)


def raises(kind):
    if kind == "value":
        raise ValueError("bad value")
    try:
        return 1 / 0
    finally:
        pass


def loops(n):
    total = 0
    for i in range(n):
        if i == 3:
            continue
        if i == 7:
            break
        total += i
    else:
        total = -1
    while total > 10:
        total -= 3
    else:
        total += 100
    for j in range(2): total += j
    return total


def loop_else_no_break():
    out = []
    for i in range(3):
        out.append(i)
    else:
        out.append("else")
    return out


def gen(n):
    """Generator docstring."""
    for i in range(n):
        got = yield i
        if got is not None:
            yield ("got", got)
    return "done"


def gen_expr_yield():
    values = []
    values.append((yield 1))
    values.append((yield 2) or "none")
    return values


def delegating():
    result = yield from gen(2)
    yield result


async def coro(x):
    await asyncio.sleep(0)
    y = await asyncio.sleep(0, result=x)
    return [await asyncio.sleep(0, result=i) for i in range(y)]


async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


class Base:
    def who(self):
        return "base"


class Child(Base):
    """Child docstring."""

    attr = 5

    def who(self):
        return "child+" + super().who()

    @staticmethod
    def static(x):
        return x + 1

    @classmethod
    def klass(cls):
        return cls.__name__

    @property
    def prop(self):
        return self.attr * 2

    def __private(self):
        return "mangled"

    def call_private(self):
        return self.__private()


class Color(enum.Enum):
    RED = 1
    GREEN = 2

    def describe(self):
        return self.name.lower()


@overload
def over(x: int) -> int: ...
@overload
def over(x: str) -> str: ...
def over(x):
    return x


def decorated_wrapper(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper


@decorated_wrapper
def wrapped(a, b):
    """Wrapped docstring."""
    return a - b


def stub():
    ...


def picklable_target(x):
    return x * 3


class Holder:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Holder) and other.v == self.v


def lambda_and_comprehension():
    f = lambda v: v + 1
    return [f(i) for i in range(3)], {i: i * i for i in range(3)}


def train_like(loader, epochs):
    class Opt:
        def step(self):
            pass

    opt = Opt()
    seen = []
    for epoch in range(epochs):
        for batch in loader:
            seen.append((epoch, batch))
            opt.step()
    return seen


import contextlib  # noqa: E402 - down here so that the line numbers above stay as the tests expect


class Countdown:
    """A hand-written async iterator (what `async for` awaits: `__anext__`)."""

    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at

    def __aiter__(self):
        return self

    async def __anext__(self):
        await asyncio.sleep(0)
        if self.n == self.fail_at:
            raise ValueError(f"countdown failed at {self.n}")
        if self.n == 0:
            raise StopAsyncIteration
        self.n -= 1
        return self.n


class Verdict:
    def __init__(self, verdict):
        self.verdict = verdict

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        return self.verdict


@contextlib.asynccontextmanager
async def tagged(tag):
    await asyncio.sleep(0)
    yield f"<{tag}>"


async def async_for_and_with():
    """Hidden awaits: results, else, break, exceptions from iterator/body, __aexit__ suppression."""
    out = {}
    seen = []
    async for x in Countdown(3):
        seen.append(x)
    else:
        seen.append("else")
    out["countdown"] = seen
    async for x in agen(5):
        if x == 2:
            break
    out["break_at"] = x
    try:
        out["comprehension"] = [x async for x in Countdown(4, fail_at=2)]
    except ValueError as exc:
        out["iterator_error"] = str(exc)
    try:
        async for x in Countdown(2):
            raise KeyError(x)
    except KeyError as exc:
        out["body_error"] = repr(exc)
    for verdict in (True, 0, None, "yes"):
        try:
            async with Verdict(verdict):
                raise RuntimeError("inside")
            out[f"verdict {verdict!r}"] = "suppressed"
        except RuntimeError:
            out[f"verdict {verdict!r}"] = "raised"
    lock = asyncio.Lock()
    async with lock, tagged("t") as tag:
        out["locked"] = [lock.locked(), tag]
    out["unlocked"] = lock.locked()
    try:
        async with Countdown(1):
            pass
    except (TypeError, AttributeError) as exc:  # AttributeError: __aenter__ before Python 3.11
        out["not_a_manager"] = f"{type(exc).__name__}: {exc}"
    return out
