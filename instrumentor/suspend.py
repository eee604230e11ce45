"""Generators and coroutines: each yield/await, and the hidden awaits of `async for`/`async with`,
leave the regions open around them and re-enter them after, so suspended time is not counted.

The operand is evaluated first, inside the regions (`yield transform(x)` is the generator's own
work), then the regions are left and the runtime told so: `yield (v, <exits, __sp_left__()>)[0]`,
`await (f(x), <exits ...>)[0]`. After the suspension `__sp_back__()` says whether this frame left
them (and forgets it), and they are re-entered only then: in place inside an expression, or by the
statement's `finally:` for a statement that is one suspension. Every statement that suspends is
guarded (emit.guarded), so an exception raised at the suspension (`gen.throw()`, `close()`, a
failed await, a cancelled task) runs the code that handles it inside the regions, and the
function's own `finally` exits close this activation's visits, never another one's. One that the
operand raised finds nothing noted and the regions still open. No local is added to the function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


def _pick(elements: Sequence[cst.BaseExpression], index: int) -> cst.Subscript:
    tup = cst.Tuple([cst.Element(e) for e in elements])
    return cst.Subscript(tup, [cst.SubscriptElement(cst.Index(cst.Integer(str(index))))])


def _element(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` as it can stand in a tuple display (`yield a, b` has an unparenthesized tuple)."""
    if isinstance(expr, cst.Tuple) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


def leave_after_operand(node: cst.Yield | cst.Await, leave: cst.BaseExpression) -> cst.BaseExpression:
    """The suspension with the regions left after its operand: `yield (v, leave)[0]`,
    `yield from (it, leave)[0]`, `await (aw, leave)[0]`; a bare `yield` is `(leave, (yield))[1]`."""
    if isinstance(node, cst.Await):
        return node.with_changes(expression=_pick([_element(node.expression), leave], 0))
    value = node.value
    if value is None:
        inner = node if node.lpar else node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return _pick([leave, inner], 1)
    if isinstance(value, cst.From):
        return node.with_changes(value=value.with_changes(item=_pick([_element(value.item), leave], 0)))
    return node.with_changes(value=_pick([_element(value), leave], 0))


def _self_documenting(original: Sequence[cst.BaseFormattedStringContent],
                      updated: Sequence[cst.BaseFormattedStringContent], start: str) -> list[cst.BaseFormattedStringContent]:
    """f-string parts where each `{expr=}` whose expression was rewritten is the text Python would
    show before the value (`expr=`, the user's own whitespace kept) and `{new!r}`: the rewritten
    code must not be shown. `!r` is what `=` implies when there is neither a conversion nor a format
    spec (with a spec and no conversion Python applies format(), so none is added). Text that a
    literal part cannot hold as it is (a backslash or the string's quote: possible since 3.12), and
    text over several lines (whose indentation libcst prints relative to the block) keep the
    original expression, not bracketed."""
    quote = start.lstrip("rRfFbBuU")[0]
    parts: list[cst.BaseFormattedStringContent] = []
    for old, new in zip(original, updated):
        if not isinstance(new, cst.FormattedStringExpression):
            parts.append(new)
            continue
        assert isinstance(old, cst.FormattedStringExpression)
        if new.format_spec:
            new = new.with_changes(format_spec=_self_documenting(old.format_spec or (), new.format_spec, start))
        if old.equal is None or new.expression.deep_equals(old.expression):
            parts.append(new)
            continue
        code = cst.Module([]).code_for_node
        text = (code(old.whitespace_before_expression) + code(old.expression) + code(old.whitespace_after_expression)
                + code(old.equal.whitespace_before) + "=" + code(old.equal.whitespace_after))
        if "\\" in text or quote in text or "\n" in text or "\r" in text:
            parts.append(old)
            continue
        conversion = new.conversion
        if conversion is None and new.format_spec is None:
            conversion = "r"
        parts.append(cst.FormattedStringText(text.replace("{", "{{").replace("}", "}}")))
        parts.append(new.with_changes(
            conversion=conversion, equal=None,
            whitespace_before_expression=cst.SimpleWhitespace(""), whitespace_after_expression=cst.SimpleWhitespace(""),
        ))
    return parts


def with_defaults(params: cst.Parameters, visitor: cst.CSTTransformer) -> cst.Parameters:
    """`params` with their default values visited (a nested def's or a lambda's: they are evaluated
    where the definition runs)."""
    def one(param: cst.Param) -> cst.Param:
        return param if param.default is None else param.with_changes(default=param.default.visit(visitor))

    return params.with_changes(params=[one(p) for p in params.params], kwonly_params=[one(p) for p in params.kwonly_params],
                               posonly_params=[one(p) for p in params.posonly_params])


class SuspendRewriter(cst.CSTTransformer):
    """Brackets each yield/await inside an expression: the regions are left after its operand and
    re-entered in place after it (see the module docstring). `noted(rids)` is told of every one, so
    that the statement gets its guard."""

    def __init__(self, backend: emit.Backend, rids: Sequence[int], func: Func, used: set[str],
                 noted: Callable[[Sequence[int]], None]) -> None:
        super().__init__()
        self.backend = backend
        self.rids = rids
        self.func = func
        self.used = used
        self.noted = noted
        # list/set/dict comprehensions being visited, and how many of them run the code visited
        # now in a frame of their own (all but the outermost iterable of each, before Python 3.12)
        self.outermost: list[cst.CompFor] = []
        self.inside = 0

    def _bracket(self, node: cst.Yield | cst.Await) -> cst.BaseExpression:
        self.func.suspends += 1
        self.noted(self.rids)
        self.used.update((emit.LEFT, emit.BACK))
        nested = self.inside > 0
        left = leave_after_operand(node, emit.leave_expr(self.backend, self.rids, nested))
        if isinstance(left, cst.Yield) and not left.lpar:  # a tuple element needs them
            left = left.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        again = emit.reenter_expr(self.backend, self.rids, nested)
        if isinstance(left, cst.Subscript):  # a bare yield: (leave, (yield))[1] -> (leave, (yield), again)[1]
            elements = [e.value for e in left.value.elements]
            return _pick([*elements, again], 1)
        return _pick([left, again], 0)

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString) -> cst.FormattedString:
        return updated.with_changes(parts=_self_documenting(original.parts, updated.parts, original.start))

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False  # its body runs when it is called; but see leave_Lambda

    def leave_Lambda(self, original: cst.Lambda, updated: cst.Lambda) -> cst.Lambda:
        # its default values are evaluated at once, in this frame
        return updated.with_changes(params=with_defaults(updated.params, self))

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return False  # runs lazily in its consumer, not in this frame; but see leave_GeneratorExp

    def leave_GeneratorExp(self, original: cst.GeneratorExp, updated: cst.GeneratorExp) -> cst.GeneratorExp:
        # its outermost iterable is evaluated at once, in this frame
        for_in = updated.for_in
        return updated.with_changes(for_in=for_in.with_changes(iter=for_in.iter.visit(self)))

    def leave_Yield(self, original: cst.Yield, updated: cst.Yield) -> cst.BaseExpression:
        self.func.has_yield = True
        return self._bracket(updated)

    def leave_Await(self, original: cst.Await, updated: cst.Await) -> cst.BaseExpression:
        # its own parentheses stay: they may hold line breaks (`(\n await x\n)[1]`), and lines must not merge
        return self._bracket(updated)

    def _enter_comprehension(self, node: cst.ListComp | cst.SetComp | cst.DictComp) -> bool:
        self.outermost.append(node.for_in)
        self.inside += 1
        return True

    def _leave_comprehension(self, original: cst.CSTNode, updated: cst.BaseExpression) -> cst.BaseExpression:
        self.outermost.pop()
        self.inside -= 1
        return updated

    visit_ListComp = visit_SetComp = visit_DictComp = _enter_comprehension
    leave_ListComp = leave_SetComp = leave_DictComp = _leave_comprehension

    def visit_CompFor_iter(self, node: cst.CompFor) -> None:
        if self.outermost and node is self.outermost[-1]:
            self.inside -= 1  # evaluated at once, in the enclosing frame

    def leave_CompFor_iter(self, node: cst.CompFor) -> None:
        if self.outermost and node is self.outermost[-1]:
            self.inside += 1

    def leave_CompFor(self, original: cst.CompFor, updated: cst.CompFor) -> cst.CompFor:
        # `[x async for x in it]` awaits `__anext__` in the function's task (generator expressions
        # are never entered, see visit_GeneratorExp)
        if updated.asynchronous is None or not self.func.is_async:
            return updated
        self.func.suspends += 1
        return updated.with_changes(iter=wrap_async(self.backend, "aiter", self.rids, updated.iter, self.used))
