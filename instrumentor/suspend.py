"""Generators and coroutines: each yield/await, and the hidden awaits of `async for`/`async with`,
leave the regions open around them and re-enter them after, so suspended time is not counted."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from . import emit
from .scopes import Func


def wrap_async(backend: emit.Backend, probe: str, rids: Sequence[int], expr: cst.BaseExpression, used: set[str]) -> cst.BaseExpression:
    """`expr` wrapped by probe `aiter` or `actx` of the backend (noting the name in `used`), or as is."""
    make = backend.async_iter if probe == "aiter" else backend.async_ctx
    wrapped = make(rids, expr)
    if wrapped is None:
        return expr
    used.add(f"__sp_{probe}__")
    return wrapped


class SuspendRewriter(cst.CSTTransformer):
    """Brackets each yield/await inside an expression with exits before and re-entries after."""

    def __init__(self, backend: emit.Backend, rids: Sequence[int], func: Func, used: set[str]) -> None:
        super().__init__()
        self.backend = backend
        self.rids = rids
        self.func = func
        self.used = used

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return False  # runs lazily in its consumer, not in this frame

    def leave_Yield(self, original: cst.Yield, updated: cst.Yield) -> cst.BaseExpression:
        self.func.has_yield = True
        # a tuple element needs them; its own may hold line breaks, which must stay
        inner = updated if updated.lpar else updated.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return emit.bracket_expression(self.backend, self.rids, inner)

    def leave_Await(self, original: cst.Await, updated: cst.Await) -> cst.BaseExpression:
        # its own parentheses stay: they may hold line breaks (`(\n await x\n)[1]`), and lines must not merge
        return emit.bracket_expression(self.backend, self.rids, updated)

    def leave_CompFor(self, original: cst.CompFor, updated: cst.CompFor) -> cst.CompFor:
        # `[x async for x in it]` awaits `__anext__` in the function's task (generator expressions
        # are never entered, see visit_GeneratorExp)
        if updated.asynchronous is None or not self.func.is_async:
            return updated
        return updated.with_changes(iter=wrap_async(self.backend, "aiter", self.rids, updated.iter, self.used))
