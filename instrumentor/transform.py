"""Rewrite one module: every function, method and loop becomes a region bracketed by probes.

The walk visits statements only (a transformer that visits every expression node halves libcst's
speed); expressions are visited only inside generators and coroutines, to bracket `yield`/`await`.
Line numbers, loop kinds and marker comments come from `facts.py`, matched in the same pre-order.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import libcst as cst

from . import emit
from .errors import InstrumentError
from .facts import Fact, ModuleFacts, collect
from .linemap import changed_lines, compute_linemap, split_lines
from .positions import column_points
from .regions import IdAllocator, Region

_RESERVED = re.compile(r"^__sp_\w*__$")
_OVERLOAD = {"overload", "typing.overload", "typing_extensions.overload"}
_TORCHSCRIPT = {
    "torch.jit.script", "jit.script", "script",
    "torch.jit.script_method", "jit.script_method", "script_method",
    "torch.jit.interface", "jit.interface", "interface",
}


@dataclass
class Skip:
    name: str
    line: int
    reason: str


@dataclass
class FileResult:
    """What became of one file. status: instrumented | unchanged | already | failed."""

    relpath: str
    status: str
    code: str | None = None
    regions: list[Region] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    linemap: list[int] | None = None
    error: str | None = None
    columns: dict[str, list[list[int]]] | None = None  # see positions.column_points


@dataclass
class _Func:
    rid: int
    scan: bool  # visit expressions: the body may contain yield/await
    is_async: bool
    has_yield: bool = False


@dataclass(frozen=True)
class _Scope:
    prefix: str  # qualname prefix for definitions inside
    owner: str  # qualname used to name loops
    in_class: bool = False
    func: _Func | None = None
    loops: tuple[int, ...] = ()  # loop regions open inside `func`, outermost first


def dotted(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Call):
        expr = expr.func
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        left = dotted(expr.value)
        return f"{left}.{expr.attr.value}" if left else ""
    return ""


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _split_docstring(stmt: cst.BaseStatement) -> list[cst.SimpleStatementLine] | None:
    """`"doc"; x = 1` as two lines, so that the probes can go between them (the docstring must stay
    the first statement for `__doc__`); None when `stmt` is not a docstring followed by `;`."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) < 2:
        return None
    first = stmt.body[0]
    if not (isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))):
        return None
    doc = cst.SimpleStatementLine([first.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)], leading_lines=stmt.leading_lines)
    return [doc, stmt.with_changes(body=stmt.body[1:], leading_lines=())]


def _is_trivial(stmt: cst.BaseStatement) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, cst.Pass):
            continue
        if isinstance(small, cst.Expr) and isinstance(small.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString)):
            continue
        return False
    return True


def _is_type_checking(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.Name):
        return test.value == "TYPE_CHECKING"
    return isinstance(test, cst.Attribute) and test.attr.value == "TYPE_CHECKING"


def _suite_statements(suite: cst.BaseSuite) -> list[cst.BaseStatement]:
    if isinstance(suite, cst.IndentedBlock):
        return list(suite.body)
    return [cst.SimpleStatementLine([small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]) for small in suite.body]


def wrap_async(backend: emit.Backend, probe: str, rids: Sequence[int], expr: cst.BaseExpression, used: set[str]) -> cst.BaseExpression:
    """`expr` wrapped by probe `aiter` or `actx` of the backend (noting the name in `used`), or as is."""
    make = backend.async_iter if probe == "aiter" else backend.async_ctx
    wrapped = make(rids, expr)
    if wrapped is None:
        return expr
    used.add(f"__sp_{probe}__")
    return wrapped


class _SuspendRewriter(cst.CSTTransformer):
    """Brackets each yield/await inside an expression with exits before and re-entries after."""

    def __init__(self, backend: emit.Backend, rids: Sequence[int], func: _Func, used: set[str]) -> None:
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


class _Rewriter:
    def __init__(self, source: str, relpath: str, facts: ModuleFacts, ids: IdAllocator, backend: emit.Backend) -> None:
        self.lines = split_lines(source)  # as ast counts lines: not at form feeds
        self.any_yield = "yield" in source
        self.relpath = relpath
        self.facts = facts.facts
        self.index = 0
        self.ids = ids
        self.backend = backend
        self.regions: list[Region] = []
        self.skipped: list[Skip] = []
        self.keys: Counter[str] = Counter()
        self.loop_ordinals: Counter[str] = Counter()
        self.used: set[str] = set()  # optional probe names the module's code calls
        self.splits: Counter[int] = Counter()  # original line -> lines it gained (see linemap.compute_linemap)

    # -- facts, names, ids ---------------------------------------------------------------------

    def take_fact(self, node: cst.CSTNode, types: tuple[type, ...]) -> Fact:
        if self.index >= len(self.facts):
            raise InstrumentError(f"internal: {self.relpath}: libcst and ast walks disagree (ran out of facts)")
        fact = self.facts[self.index]
        name = getattr(getattr(node, "name", None), "value", None)
        if not isinstance(fact.node, types) or (name is not None and getattr(fact.node, "name", None) != name):
            raise InstrumentError(f"internal: {self.relpath}:{fact.line}: libcst and ast walks disagree")
        self.index += 1
        return fact

    def skip_subtree(self, fact: Fact, name: str, reason: str) -> None:
        self.index += fact.size
        self.skipped.append(Skip(name, fact.line, reason))

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

    def block(self, stmts: Sequence[cst.BaseStatement], scope: _Scope) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for stmt in stmts:
            new = self.statement(stmt, scope)
            if isinstance(new, list):
                out.extend(new)
            else:
                out.append(new)
        return out

    def suite(self, suite: cst.BaseSuite, scope: _Scope) -> cst.BaseSuite:
        if isinstance(suite, cst.IndentedBlock):
            return suite.with_changes(body=self.block(suite.body, scope))
        if scope.func is not None and scope.func.scan:
            rewriter = self.suspender(scope)
            return suite.with_changes(body=[small.visit(rewriter) for small in suite.body])
        return suite

    def suspender(self, scope: _Scope) -> _SuspendRewriter:
        assert scope.func is not None
        return _SuspendRewriter(self.backend, (*reversed(scope.loops), scope.func.rid), scope.func, self.used)

    def header_expr(self, expr: cst.CSTNode, scope: _Scope) -> cst.CSTNode:
        if scope.func is not None and scope.func.scan:
            return expr.visit(self.suspender(scope))
        return expr

    def async_operand(self, expr: cst.BaseExpression, scope: _Scope, probe: str) -> cst.BaseExpression:
        """The iterable of `async for` / manager of `async with`, wrapped so its hidden awaits leave the regions."""
        func = scope.func
        if func is None or not func.is_async:
            return expr
        return wrap_async(self.backend, probe, (*reversed(scope.loops), func.rid), expr, self.used)

    def statement(self, stmt: cst.BaseStatement, scope: _Scope) -> cst.BaseStatement | list[cst.BaseStatement]:
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
            items = [item.with_changes(item=self.header_expr(item.item, scope)) for item in stmt.items]
            if stmt.asynchronous is not None:
                items = [item.with_changes(item=self.async_operand(item.item, scope, "actx")) for item in items]
            return stmt.with_changes(items=items, body=self.suite(stmt.body, scope))
        if isinstance(stmt, (cst.Try, cst.TryStar)):
            handlers = [h.with_changes(body=self.suite(h.body, scope)) for h in stmt.handlers]
            orelse = stmt.orelse and stmt.orelse.with_changes(body=self.suite(stmt.orelse.body, scope))
            final = stmt.finalbody and stmt.finalbody.with_changes(body=self.suite(stmt.finalbody.body, scope))
            return stmt.with_changes(body=self.suite(stmt.body, scope), handlers=handlers, orelse=orelse, finalbody=final)
        if isinstance(stmt, cst.Match):
            cases = [
                c.with_changes(body=self.suite(c.body, scope), guard=c.guard and self.header_expr(c.guard, scope))
                for c in stmt.cases
            ]
            return stmt.with_changes(subject=self.header_expr(stmt.subject, scope), cases=cases)
        return stmt

    def if_(self, stmt: cst.If, scope: _Scope) -> cst.If:
        if _is_type_checking(stmt.test):
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

    def simple_line(self, line: cst.SimpleStatementLine, scope: _Scope) -> cst.BaseStatement | list[cst.BaseStatement]:
        func = scope.func
        if func is None or not func.scan:
            return line
        rids = (*reversed(scope.loops), func.rid)
        if len(line.body) == 1:
            small = line.body[0]
            value = getattr(small, "value", None)
            if isinstance(small, (cst.Expr, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return)) and isinstance(
                value, (cst.Yield, cst.Await)
            ):
                if isinstance(value, cst.Yield):
                    func.has_yield = True
                    operand = value.value
                    if operand is not None:
                        value = value.with_changes(value=operand.visit(self.suspender(scope)))
                else:
                    value = value.with_changes(expression=value.expression.visit(self.suspender(scope)))
                small = small.with_changes(value=value)
                before = emit.suspend_line(self.backend, rids).with_changes(leading_lines=line.leading_lines)
                middle = line.with_changes(leading_lines=(), body=[small])
                if isinstance(small, cst.Return):
                    return [before, middle]
                return [before, middle, emit.resume_line(self.backend, rids)]
        return line.visit(self.suspender(scope))

    def function(self, node: cst.FunctionDef, scope: _Scope) -> cst.FunctionDef:
        fact = self.take_fact(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        qualname = scope.prefix + node.name.value
        reason = None
        for dec in node.decorators:
            name = dotted(dec.decorator)
            if name in _OVERLOAD:
                reason = "overload stub"
            elif name in _TORCHSCRIPT:
                reason = f"TorchScript (@{name})"
        if fact.marker == "off":
            reason = "# scaleprobe: off"
        stmts = _suite_statements(node.body)
        split = _split_docstring(stmts[0]) if stmts else None
        if split is not None:
            stmts[:1] = split
        docstring = stmts[:1] if stmts and _is_docstring(stmts[0]) else []
        rest = stmts[len(docstring):]
        if reason is None and all(_is_trivial(s) for s in rest):
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
        func = _Func(rid, scan, is_async)
        position = len(self.regions)
        inner = _Scope(prefix=qualname + ".<locals>.", owner=qualname, func=func)
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

    def klass(self, node: cst.ClassDef, scope: _Scope) -> cst.ClassDef:
        fact = self.take_fact(node, (ast.ClassDef,))
        qualname = scope.prefix + node.name.value
        names = [dotted(d.decorator) for d in node.decorators]
        if fact.marker == "off" or any(n in _TORCHSCRIPT for n in names):
            self.skip_subtree(fact, qualname, "# scaleprobe: off" if fact.marker == "off" else "TorchScript class")
            return node
        inner = _Scope(prefix=qualname + ".", owner=qualname, in_class=True)
        return node.with_changes(body=self.suite(node.body, inner))

    def loop(self, node: cst.For | cst.While, scope: _Scope) -> cst.BaseStatement | list[cst.BaseStatement]:
        fact = self.take_fact(node, (ast.For, ast.AsyncFor) if isinstance(node, cst.For) else (ast.While,))
        word = "for" if isinstance(node, cst.For) else "while"
        if fact.marker == "off":
            self.skip_subtree(fact, f"{scope.owner}:{word}@{fact.line}", "# scaleprobe: off")
            return node
        if scope.in_class:
            # A class body is not a region, and a loop there would run while the class is built.
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
            if kind in ("epoch", "step") and node.asynchronous is None:
                wrapped = self.backend.iterate(rid, iterable)
                if wrapped is not None:
                    iterable, iterated = wrapped, True
            if node.asynchronous is not None:
                iterable = self.async_operand(iterable, inner, "aiter")
            changes["iter"] = iterable
        else:
            changes["test"] = self.header_expr(node.test, inner)
        body = self.suite(node.body, inner)
        if not iterated:
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
        new = node.with_changes(**changes)
        return [
            emit.prologue(self.backend, rid).with_changes(leading_lines=node.leading_lines),
            cst.Try(body=cst.IndentedBlock([new]), finalbody=emit.epilogue(self.backend, rid)),
        ]


def _header_index(body: Sequence[cst.BaseStatement]) -> int:
    """Probes go after the module docstring and the `from __future__` imports."""
    index = 0
    if body and _is_docstring(body[0]):
        index = 1
    while index < len(body):
        stmt = body[index]
        if (
            isinstance(stmt, cst.SimpleStatementLine)
            and isinstance(stmt.body[0], cst.ImportFrom)
            and isinstance(stmt.body[0].module, cst.Name)
            and stmt.body[0].module.value == "__future__"
        ):
            index += 1
        else:
            break
    return index


# libcst's native parser grows faster than quadratically with nesting: 1000 levels ~1.5 s, 4000 ~60 s.
MAX_DEPTH = 1000


def _max_depth(tree: ast.AST) -> tuple[int, int]:
    """Deepest expression nesting and its line; iterative, as the point is trees too deep to recurse."""
    best, best_line = 0, 0
    stack = [(tree, 0, 0)]
    while stack:
        node, depth, line = stack.pop()
        line = getattr(node, "lineno", line)
        if depth > best:
            best, best_line = depth, line
        step = 1 if isinstance(node, ast.expr) else 0
        stack.extend((child, depth + step, line) for child in ast.iter_child_nodes(node))
    return best, best_line


def check_reserved(tree: ast.Module, relpath: str) -> bool:
    """True when the module was already instrumented; InstrumentError when it binds our names itself."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__sp_on__" for t in stmt.targets):
            return True
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            name = node.id
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.alias):
            name = node.asname or node.name
        elif isinstance(node, ast.arg):
            name = node.arg
        if name and _RESERVED.match(name):
            line = getattr(node, "lineno", 0)
            raise InstrumentError(f"{relpath}:{line}: defines {name!r}; names __sp_*__ are reserved for scaleprobe's probes")
    return False


def _backend_of(tree: ast.Module) -> str:
    """The backend an already instrumented module was written for (emit.py's module headers)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Import) and any(a.name == "nvtx" and a.asname == "__sp_nvtx__" for a in stmt.names):
            return "nvtx"
    return "runtime"


def instrument_source(source: str, relpath: str, *, ids: IdAllocator, backend: str | emit.Backend = "runtime") -> FileResult:
    """Instrument one module's text. Never raises for bad input: a failure is a FileResult."""
    be = emit.get_backend(backend) if isinstance(backend, str) else backend
    try:
        tree = ast.parse(source, filename=relpath)
    except SyntaxError as exc:
        return FileResult(relpath, "failed", error=f"{relpath}:{exc.lineno}: syntax error: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, too deeply nested
        return FileResult(relpath, "failed", error=f"{relpath}:1: cannot parse: {type(exc).__name__}: {exc}")
    if max(map(len, source.splitlines()), default=0) > 2000:
        depth, line = _max_depth(tree)
        if depth > MAX_DEPTH:
            return FileResult(relpath, "failed", error=f"{relpath}:{line}: expression nested {depth} deep: "
                              f"libcst would take minutes (limit {MAX_DEPTH})")
    try:
        if "__sp_" in source and check_reserved(tree, relpath):
            found = _backend_of(tree)
            if found != be.name:  # carried over as it is, it would not be what was asked for
                return FileResult(relpath, "failed", error=f"{relpath}:1: already instrumented with --backend {found}, "
                                  f"not {be.name}: instrument the original source (or use --backend {found})")
            return FileResult(relpath, "already")
        facts = collect(tree, source)
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError as exc:
            return FileResult(relpath, "failed", error=f"{relpath}:{exc.raw_line}: libcst cannot parse: {exc.message}")
        rewriter = _Rewriter(source, relpath, facts, ids, be)
        body = rewriter.block(module.body, _Scope(prefix="", owner="<module>"))
        if rewriter.index != len(rewriter.facts):
            raise InstrumentError(f"internal: {relpath}: libcst and ast walks disagree (facts left over)")
        if not rewriter.regions:
            return FileResult(relpath, "unchanged", skipped=rewriter.skipped)
        used = _probe_names(rewriter)
        split = _split_docstring(body[0]) if body else None
        if split is not None:
            body[:1] = split
            rewriter.note_split(tree.body[1])
        at = _header_index(body)
        new_module = module.with_changes(body=[*body[:at], emit.header_placeholder(), *body[at:]])
        newline = module.default_newline
        header = "".join(line + newline for line in be.header(relpath, rewriter.regions, used))
        code = new_module.code.replace(emit.HEADER_PLACEHOLDER + newline, header, 1)
    except InstrumentError as exc:
        return FileResult(relpath, "failed", error=str(exc))
    except RecursionError:
        return FileResult(relpath, "failed", error=f"{relpath}:1: expression too deeply nested for libcst")
    linemap = compute_linemap(source, code, rewriter.splits)
    changed = changed_lines(source, code, linemap)
    columns = None
    try:
        # CPython has limits libcst does not check: 20 statically nested blocks per function (each
        # loop and function gets a `try`), so ten nested loops compile only uninstrumented
        with warnings.catch_warnings():  # the user's SyntaxWarnings are Python's to show, at run time
            warnings.simplefilter("ignore")
            if changed:  # lines changed in place need their columns mapped from the instrumented AST
                out_tree = ast.parse(code, relpath)
                compile(out_tree, relpath, "exec", dont_inherit=True)
                columns = column_points(tree, out_tree, changed)
            else:
                compile(code, relpath, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        out_line = getattr(exc, "lineno", None) or 1
        line = linemap[out_line - 1] if 1 <= out_line <= len(linemap) else 1
        why = getattr(exc, "msg", None) or f"{type(exc).__name__}: {exc}"
        return FileResult(relpath, "failed", error=f"{relpath}:{line}: the instrumented code does not compile ({why}); "
                                                   "left as it is")
    return FileResult(relpath, "instrumented", code, rewriter.regions, rewriter.skipped, linemap, columns=columns)


def _probe_names(rewriter: _Rewriter) -> set[str]:
    used = {"__sp_enter__", "__sp_exit__", *rewriter.used}
    kinds = {r.kind for r in rewriter.regions}
    if kinds & {"loop"} or any(k in ("epoch", "step") for k in kinds):
        used.add("__sp_mark__")
    if kinds & {"epoch", "step"}:
        used.add("__sp_iterate__")
    return used
