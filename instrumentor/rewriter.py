"""Rewrite one module's statements: every function, method and loop becomes a region bracketed by probes.

The walk visits statements only (a transformer that visits every expression node halves libcst's
speed); expressions are visited only inside generators and coroutines, to bracket `yield`/`await`.
Line numbers, loop kinds and marker comments come from `facts.py`, matched in the same pre-order.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import libcst as cst

from . import emit
from .errors import InstrumentError
from .facts import Fact, ModuleFacts
from .linemap import split_lines
from .regions import IdAllocator, Region
from .results import Skip
from .scopes import Func, Scope
from .suspend import SuspendRewriter, leave_after_operand, with_defaults, wrap_async
from .syntax import dotted, identifier, is_docstring, is_trivial, is_type_checking, split_docstring, suite_statements

_OVERLOAD = {"overload", "typing.overload", "typing_extensions.overload"}
_TORCHSCRIPT = {
    "torch.jit.script", "jit.script", "script",
    "torch.jit.script_method", "jit.script_method", "script_method",
    "torch.jit.interface", "jit.interface", "interface",
}
# Compilers that take a function's source or bytecode (Triton and cupyx kernels, numba) reject the
# probes' try/finally and calls; under a tracing JIT (jax) the probes would run once, while tracing
_JIT = {
    "triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics", "heuristics",
    "numba.jit", "numba.njit", "njit", "numba.cuda.jit", "cuda.jit", "numba.vectorize", "numba.guvectorize",
    "guvectorize", "numba.cfunc", "cfunc", "numba.stencil", "numba.generated_jit", "generated_jit",
    "jax.jit", "jax.pmap", "cupy.fuse", "cupyx.jit.rawkernel", "jit.rawkernel", "rawkernel",
}
# numba's compiling decorators, as `numba.<name>`: also skipped under the names the module imports
# them by (`from numba import vectorize as vec`, `import numba as nb`, `from numba import *`),
# which `_JIT`'s spellings miss (review 82 F3: `from numba import vectorize` then `@vectorize`)
_NUMBA = {"jit", "njit", "cuda.jit", "vectorize", "guvectorize", "cfunc", "stencil", "generated_jit"}
# numba's class compiler: every method is compiled in nopython mode, where probes fail (review 84 L2)
_JIT_CLASS = {"numba.experimental.jitclass", "experimental.jitclass", "numba.jitclass", "jitclass"}
_NUMBA_CLASS = {"experimental.jitclass", "jitclass"}


def numba_names(tree: ast.Module) -> dict[str, str]:
    """The names the module binds to numba or to something in it (anywhere in the module, as the
    graph reads imports): local name -> dotted name (`nb` -> `numba`, `vec` -> `numba.vectorize`)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and (alias.name == "numba" or alias.name.startswith("numba.")):
                    found[alias.asname] = alias.name  # `import numba.cuda` binds `numba`: spelled out already
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module is not None \
                and (node.module == "numba" or node.module.startswith("numba.")):
            for alias in node.names:
                if alias.name == "*":  # numba's `__all__` holds its decorators
                    found.update({n: f"{node.module}.{n}" for n in _NUMBA if "." not in n and n not in found})
                else:
                    found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


class _Suspends(cst.CSTVisitor):
    """Finds a yield/await (one of a lambda's body too: the in-place bracketing that it selects is
    right for any statement)."""

    found = False

    def visit_Yield(self, node: cst.Yield) -> bool:
        self.found = True
        return False

    def visit_Await(self, node: cst.Await) -> bool:
        self.found = True
        return False


def _targets_suspend(small: cst.BaseSmallStatement) -> bool:
    """Whether an assignment's targets hold a yield/await (`b[(yield)] = yield v`, evaluated after
    the value; `b[(yield)] += yield v`, before it): such a statement is not re-entered by its guard
    alone, every suspension of it is bracketed in place (review 64, F5)."""
    if isinstance(small, cst.Assign):
        targets = [t.target for t in small.targets]
    elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
        targets = [small.target]  # (a local variable's annotation is not evaluated)
    else:
        return False
    seen = _Suspends()
    for target in targets:
        if not isinstance(target, cst.Name):
            target.visit(seen)
    return seen.found


class Rewriter:
    """One module's walk; it collects the regions, the skipped definitions and the probe names used."""

    def __init__(self, source: str, relpath: str, facts: ModuleFacts, ids: IdAllocator, backend: emit.Backend,
                 numba: dict[str, str] | None = None) -> None:
        self.lines = split_lines(source)  # as ast counts lines: not at form feeds
        self.numba = numba or {}  # `numba_names`
        self.any_yield = "yield" in source
        self.relpath = relpath
        self.facts = facts.facts
        self.index = 0
        self.ids = ids
        self.backend = backend
        self.regions: list[Region] = []
        self.skipped: list[Skip] = []
        self.skipped_spans: list[tuple[int, int]] = []  # (first, last line) of each subtree left out whole
        self.keys: Counter[str] = Counter()
        self.loop_ordinals: Counter[str] = Counter()
        self.used: set[str] = set()  # optional probe names the module's code calls
        self.splits: Counter[int] = Counter()  # original line -> lines it gained (see linemap.compute_linemap)
        # the regions left by the suspensions of the statement being rewritten (its headers and
        # one-line bodies, not its nested blocks): the statement gets a guard that re-enters them
        self.suspended: Sequence[int] | None = None
        # whether one of them is the statement itself (`x = yield v`), re-entered by the guard alone
        self.whole = False

    # -- facts, names, ids ---------------------------------------------------------------------

    def take_fact(self, node: cst.CSTNode, types: tuple[type, ...]) -> Fact:
        if self.index >= len(self.facts):
            raise InstrumentError(f"internal: {self.relpath}: libcst and ast walks disagree (ran out of facts)")
        fact = self.facts[self.index]
        name = getattr(getattr(node, "name", None), "value", None)
        if name is not None:
            name = identifier(name)
        if not isinstance(fact.node, types) or (name is not None and getattr(fact.node, "name", None) != name):
            raise InstrumentError(f"internal: {self.relpath}:{fact.line}: libcst and ast walks disagree")
        self.index += 1
        return fact

    def numba_decorator(self, name: str, which: frozenset[str] | set[str] = _NUMBA) -> bool:
        """Whether the dotted name `name`, read through the module's imports of numba, is one of
        numba's compiling decorators (`_NUMBA`; `_NUMBA_CLASS` for a class's)."""
        head, dot, rest = name.partition(".")
        full = self.numba.get(head)
        if full is None:
            return False
        full += dot + rest
        return full.startswith("numba.") and full[len("numba."):] in which

    def skip_subtree(self, fact: Fact, name: str, reason: str) -> None:
        self.index += fact.size
        self.skipped.append(Skip(name, fact.line, reason))
        self.skipped_spans.append((fact.line, getattr(fact.node, "end_lineno", None) or fact.line))

    def unique_key(self, base: str) -> str:
        self.keys[base] += 1
        count = self.keys[base]
        return base if count == 1 else f"{base}#{count}"

    def text_of(self, fact: Fact) -> str:
        return "\n".join(self.lines[fact.line - 1 : fact.node.end_lineno])

    def note_split(self, stmt: ast.stmt) -> None:
        """`stmt` now starts a line of its own: a line more for its original line, unless nothing
        but blanks stood before it there (`def f(): \\` continued on the next line)."""
        if 1 <= stmt.lineno <= len(self.lines) and self.lines[stmt.lineno - 1].encode("utf-8")[: stmt.col_offset].strip():
            self.splits[stmt.lineno] += 1

    # -- statements ----------------------------------------------------------------------------

    def block(self, stmts: Sequence[cst.BaseStatement], scope: Scope) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for stmt in stmts:
            new = self.statement(stmt, scope)
            if isinstance(new, list):
                out.extend(new)
            else:
                out.append(new)
        return out

    def suite(self, suite: cst.BaseSuite, scope: Scope) -> cst.BaseSuite:
        if isinstance(suite, cst.IndentedBlock):
            return suite.with_changes(body=self.block(suite.body, scope))
        if scope.func is not None and scope.func.scan:
            rewriter = self.suspender(scope)
            return suite.with_changes(body=[small.visit(rewriter) for small in suite.body])
        return suite

    def suspender(self, scope: Scope) -> SuspendRewriter:
        assert scope.func is not None
        return SuspendRewriter(self.backend, self.rids(scope), scope.func, self.used, self.note_suspension)

    @staticmethod
    def rids(scope: Scope) -> tuple[int, ...]:
        """The regions open in `scope`, innermost first."""
        assert scope.func is not None
        return (*reversed(scope.loops), scope.func.rid)

    def note_suspension(self, rids: Sequence[int]) -> None:
        self.suspended = rids

    def guard(self, stmt: cst.BaseStatement) -> cst.BaseStatement:
        """`stmt` in the re-entering `try` when it suspends (emit.guarded)."""
        rids, self.suspended = self.suspended, None
        whole, self.whole = self.whole, False
        return stmt if rids is None else emit.guarded(self.backend, rids, stmt, inline=not whole)

    def header_expr(self, expr: cst.CSTNode, scope: Scope) -> cst.CSTNode:
        if scope.func is not None and scope.func.scan:
            return expr.visit(self.suspender(scope))
        return expr

    def definition_header(self, node: cst.FunctionDef | cst.ClassDef, scope: Scope) -> dict:
        """Changes to a nested def's decorators and default values, or a class's decorators, bases and
        keywords: they run in the enclosing generator or coroutine, and `statement` guards the
        definition when they suspend. (Annotations are left alone: under `from __future__ import
        annotations` their text is what they evaluate to.)"""
        if scope.func is None or not scope.func.scan:
            return {}
        changes: dict = {"decorators": [d.with_changes(decorator=self.header_expr(d.decorator, scope)) for d in node.decorators]}
        if isinstance(node, cst.FunctionDef):
            changes["params"] = with_defaults(node.params, self.suspender(scope))
        else:
            changes["bases"] = [self.header_expr(a, scope) for a in node.bases]
            changes["keywords"] = [self.header_expr(a, scope) for a in node.keywords]
        return changes

    def async_operand(self, expr: cst.BaseExpression, scope: Scope, probe: str) -> cst.BaseExpression:
        """The iterable of `async for` / manager of `async with`, wrapped so its hidden awaits leave the regions."""
        func = scope.func
        if func is None or not func.is_async:
            return expr
        func.suspends += 1
        return wrap_async(self.backend, probe, (*reversed(scope.loops), func.rid), expr, self.used)

    def statement(self, stmt: cst.BaseStatement, scope: Scope) -> cst.BaseStatement | list[cst.BaseStatement]:
        outer = self.suspended, self.whole
        self.suspended, self.whole = None, False
        try:
            new = self.rewrite_statement(stmt, scope)
            # loops guard their statement inside their own region's `try` (see loop)
            return self.guard(new) if isinstance(new, cst.BaseStatement) else new
        finally:
            self.suspended, self.whole = outer

    def rewrite_statement(self, stmt: cst.BaseStatement, scope: Scope) -> cst.BaseStatement | list[cst.BaseStatement]:
        if isinstance(stmt, cst.SimpleStatementLine):
            return self.simple_line(stmt, scope)
        if isinstance(stmt, cst.FunctionDef):
            return self.function(stmt, scope)
        if isinstance(stmt, cst.ClassDef):
            return self.klass(stmt, scope)
        if isinstance(stmt, (cst.For, cst.While)):
            return self.loop(stmt, scope)
        if isinstance(stmt, cst.If):
            return self.if_(stmt, scope)
        if isinstance(stmt, cst.With):
            # the `as` target is assigned in this frame too, after `__enter__`: `as b[(yield)]`
            items = [
                item.with_changes(
                    item=self.header_expr(item.item, scope),
                    asname=item.asname and item.asname.with_changes(name=self.header_expr(item.asname.name, scope)),
                )
                for item in stmt.items
            ]
            if stmt.asynchronous is not None:
                items = [item.with_changes(item=self.async_operand(item.item, scope, "actx")) for item in items]
            return stmt.with_changes(items=items, body=self.suite(stmt.body, scope))
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            # in source order, as facts.py walks them: try body, handlers, else, finally
            body = self.suite(stmt.body, scope)
            body_left = self.suspended  # a one-line body that suspends
            # An await/yield in an `except` type is bracketed in place; when it raises, the guard
            # around the whole statement re-enters the regions. A `finally:` clause runs before
            # that guard: it re-enters them first itself (a line more; see emit.guarded). So do the
            # handlers of a one-line body that suspends: what they catch may come from there.
            handlers = [
                h.with_changes(type=h.type and self.header_expr(h.type, scope), body=self.suite(h.body, scope))
                for h in stmt.handlers
            ]
            if body_left is not None:
                handlers = [h.with_changes(body=emit.reenter_first(self.backend, body_left, h.body)) for h in handlers]
            orelse = stmt.orelse and stmt.orelse.with_changes(body=self.suite(stmt.orelse.body, scope))
            left = self.suspended
            final = stmt.finalbody and stmt.finalbody.with_changes(body=self.suite(stmt.finalbody.body, scope))
            if final is not None and left is not None:
                final = final.with_changes(body=emit.reenter_first(self.backend, left, final.body))
            return stmt.with_changes(body=body, handlers=handlers, orelse=orelse, finalbody=final)
        if isinstance(stmt, cst.Match):
            cases = [
                c.with_changes(body=self.suite(c.body, scope), guard=c.guard and self.header_expr(c.guard, scope))
                for c in stmt.cases
            ]
            return stmt.with_changes(subject=self.header_expr(stmt.subject, scope), cases=cases)
        return stmt

    def if_(self, stmt: cst.If, scope: Scope) -> cst.If:
        if is_type_checking(stmt.test):
            fact = self.take_fact(stmt, (ast.If,))
            self.skip_subtree(fact, "if TYPE_CHECKING", "TYPE_CHECKING block")
            body = stmt.body
        else:
            body = self.suite(stmt.body, scope)
        orelse = stmt.orelse
        if isinstance(orelse, cst.If):
            orelse = self.if_(orelse, scope)
        elif isinstance(orelse, cst.Else):
            orelse = orelse.with_changes(body=self.suite(orelse.body, scope))
        return stmt.with_changes(test=self.header_expr(stmt.test, scope), body=body, orelse=orelse)

    def simple_line(self, line: cst.SimpleStatementLine, scope: Scope) -> cst.SimpleStatementLine:
        """A line of a generator or coroutine with its suspensions bracketed; `statement` guards it.
        A statement that is one yield/await (`x = yield v`, `await f(x)`, `return await g()`) is
        re-entered by the guard's `finally` alone."""
        func = scope.func
        if func is None or not func.scan:
            return line
        if len(line.body) == 1:
            small = line.body[0]
            value = getattr(small, "value", None)
            if isinstance(small, (cst.Expr, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return)) and isinstance(
                value, (cst.Yield, cst.Await)
            ) and not _targets_suspend(small):
                if isinstance(value, cst.Yield):
                    func.has_yield = True
                    operand = value.value
                    if isinstance(operand, cst.From):
                        value = value.with_changes(value=operand.with_changes(item=operand.item.visit(self.suspender(scope))))
                    elif operand is not None:
                        value = value.with_changes(value=operand.visit(self.suspender(scope)))
                else:
                    value = value.with_changes(expression=value.expression.visit(self.suspender(scope)))
                func.suspends += 1
                rids = self.rids(scope)
                self.note_suspension(rids)
                self.whole = True
                self.used.update((emit.LEFT, emit.BACK))
                value = leave_after_operand(value, emit.leave_expr(self.backend, rids))
                return line.with_changes(body=[small.with_changes(value=value)])
        return line.visit(self.suspender(scope))

    def function(self, node: cst.FunctionDef, scope: Scope) -> cst.FunctionDef:
        fact = self.take_fact(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        qualname = scope.prefix + identifier(node.name.value)
        reason = None
        for dec in node.decorators:
            name = dotted(dec.decorator)
            if name in ("functools.partial", "partial") and isinstance(dec.decorator, cst.Call) and dec.decorator.args:
                name = dotted(dec.decorator.args[0].value)  # partial(jax.jit, ...)
            if name in _OVERLOAD:
                reason = "overload stub"
            elif name in _TORCHSCRIPT:
                reason = f"TorchScript (@{name})"
            elif (name in _JIT or self.numba_decorator(name)) and reason is None:
                reason = f"JIT-compiled (@{name})"
        if fact.marker == "off":
            self.skip_subtree(fact, qualname, "# scaleprobe: off")
            return node
        node = node.with_changes(**self.definition_header(node, scope))
        stmts = suite_statements(node.body)
        split = split_docstring(stmts[0]) if stmts else None
        if split is not None:
            stmts[:1] = split
        docstring = stmts[:1] if stmts and is_docstring(stmts[0]) else []
        rest = stmts[len(docstring):]
        if reason is None and all(is_trivial(s) for s in rest):
            reason = "empty body"
        if reason is not None:
            self.skip_subtree(fact, qualname, reason)
            return node
        if not isinstance(node.body, cst.IndentedBlock):  # `def f(): a; b`: each statement gets a line
            for stmt in fact.node.body:
                self.note_split(stmt)
        elif split is not None:
            self.note_split(fact.node.body[1])
        key = self.unique_key(qualname)
        rid = self.ids.take(key)
        is_async = node.asynchronous is not None
        scan = is_async or (self.any_yield and "yield" in self.text_of(fact))
        func = Func(rid, scan, is_async)
        position = len(self.regions)
        inner = Scope(prefix=qualname + ".<locals>.", owner=qualname, func=func)
        body = self.block(rest, inner)
        if is_async:
            kind = "async_generator" if func.has_yield else "coroutine"
        elif func.has_yield:
            kind = "generator"
        else:
            kind = "method" if scope.in_class else "function"
        self.regions.insert(position, Region(rid, kind, qualname, self.relpath, fact.line, key))
        wrapped = [
            *docstring,
            emit.prologue(self.backend, rid),
            cst.Try(body=cst.IndentedBlock(body), finalbody=emit.epilogue(self.backend, rid)),
        ]
        if isinstance(node.body, cst.IndentedBlock):
            new_body = node.body.with_changes(body=wrapped)
        else:
            new_body = cst.IndentedBlock(body=wrapped, header=node.body.trailing_whitespace)
        return node.with_changes(body=new_body)

    def klass(self, node: cst.ClassDef, scope: Scope) -> cst.ClassDef:
        fact = self.take_fact(node, (ast.ClassDef,))
        qualname = scope.prefix + identifier(node.name.value)
        names = [dotted(d.decorator) for d in node.decorators]
        if fact.marker == "off" or any(n in _TORCHSCRIPT for n in names):
            self.skip_subtree(fact, qualname, "# scaleprobe: off" if fact.marker == "off" else "TorchScript class")
            return node
        jit = next((n for n in names if n in _JIT_CLASS or self.numba_decorator(n, _NUMBA_CLASS)), None)
        if jit is not None:
            self.skip_subtree(fact, qualname, f"JIT-compiled class (@{jit})")
            return node
        inner = Scope(prefix=qualname + ".", owner=qualname, in_class=True)
        return node.with_changes(body=self.suite(node.body, inner), **self.definition_header(node, scope))

    def loop(self, node: cst.For | cst.While, scope: Scope) -> cst.BaseStatement | list[cst.BaseStatement]:
        fact = self.take_fact(node, (ast.For, ast.AsyncFor) if isinstance(node, cst.For) else (ast.While,))
        word = "for" if isinstance(node, cst.For) else "while"
        if fact.marker == "off":
            self.skip_subtree(fact, f"{scope.owner}:{word}@{fact.line}", "# scaleprobe: off")
            return node
        if scope.in_class:
            # A class body is not a region, and a loop there would run while the class is built.
            self.skipped.append(Skip(f"{scope.owner}:{word}@{fact.line}", fact.line, "loop in a class body"))
            return node.with_changes(body=self.suite(node.body, scope), orelse=node.orelse and node.orelse.with_changes(body=self.suite(node.orelse.body, scope)))
        self.loop_ordinals[scope.owner] += 1
        key = self.unique_key(f"{scope.owner}:{word}#{self.loop_ordinals[scope.owner]}")
        rid = self.ids.take(key)
        kind = fact.loop_kind
        self.regions.append(Region(rid, kind, f"{scope.owner}:{word}@{fact.line}", self.relpath, fact.line, key))
        inner = replace(scope, loops=(*scope.loops, rid)) if scope.func is not None else scope
        changes: dict = {}
        iterated = False
        if isinstance(node, cst.For):
            iterable = self.header_expr(node.iter, inner)
            if node.asynchronous is not None:
                iterable = self.async_operand(iterable, inner, "aiter")
        else:
            suspends = scope.func.suspends if scope.func is not None else 0  # (a test that suspends, too)
            changes["test"] = self.header_expr(node.test, inner)
        if isinstance(node, cst.For):
            suspends = scope.func.suspends if scope.func is not None else 0
            # assigned at every iteration, in the loop (`for b[(yield)] in it:`): a suspension there
            # is one of the body's
            changes["target"] = self.header_expr(node.target, inner)
        body = self.suite(node.body, inner)
        if isinstance(node, cst.For):
            # Each step/epoch record runs from one `next()` to the next: in a body that suspends,
            # that would take in the time the generator or coroutine spends suspended.
            body_suspends = scope.func is not None and scope.func.suspends != suspends
            if kind in ("epoch", "step") and node.asynchronous is None and not body_suspends:
                wrapped = self.backend.iterate(rid, iterable)
                if wrapped is not None:
                    iterable, iterated = wrapped, True
            changes["iter"] = iterable
        untick = None
        if isinstance(node, cst.While) and kind in ("epoch", "step"):
            # a `while` epoch or step loop: each iteration's record from one tick at the top of its
            # body to the next (runtime/series.py), closed in the epilogue; not in a test or body
            # that suspends, for the same reason as a `for` loop's
            loop_suspends = scope.func is not None and scope.func.suspends != suspends
            untick = None if loop_suspends else self.backend.tick(rid, True)
        if untick is not None:
            block = isinstance(body, cst.IndentedBlock)
            tick = emit.tick_statement(self.backend, rid) if block else emit.inline_tick(self.backend, rid)
            body = body.with_changes(body=[tick, *body.body])
            self.used.update(("__sp_tick__", "__sp_untick__"))
        elif not iterated:
            if isinstance(body, cst.IndentedBlock):
                mark = emit.mark_statement(self.backend, rid)
                if mark is not None:
                    body = body.with_changes(body=[mark, *body.body])
            else:
                mark = emit.inline_mark(self.backend, rid)
                if mark is not None:
                    body = body.with_changes(body=[mark, *body.body])
        changes["body"] = body
        if node.orelse is not None:
            changes["orelse"] = node.orelse.with_changes(body=self.suite(node.orelse.body, inner))
        changes["leading_lines"] = ()
        new = self.guard(node.with_changes(**changes))  # re-entered inside the loop's own region
        return [
            emit.prologue(self.backend, rid).with_changes(leading_lines=node.leading_lines),
            cst.Try(body=cst.IndentedBlock(new if isinstance(new, list) else [new]),
                    finalbody=emit.epilogue(self.backend, rid, untick)),
        ]
