"""Columns on the lines that instrumenting changed in place, mapped back to the original line.

Most lines of an instrumented file are original lines, moved and re-indented: a column there is the
original one shifted by the change of indentation (`linemap.indent_shifts`). A few lines hold
original code at other places: the statements of a one-line `def f(): a; b` (each on a line of its
own now), an inline loop body after its mark (`for k in r: __sp_on__ and __sp_mark__(3); d[k]`), a
bracketed suspension (`yield (v, __sp_on__ and (__sp_exit__(0), __sp_left__()))[0]`) and a wrapped iterable
(`__sp_iterate__(7, loader)`). Tracebacks point at the start and end columns of AST nodes
(`co_positions`), so for those lines this module pairs every node of the instrumented tree with
the original node it came from, walking both trees together and stepping over what the probes
added, and maps the node boundaries' columns.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence

_PROBE_NAME = re.compile(r"^__sp_\w*__$")
_WRAPPERS = {"__sp_iterate__", "__sp_aiter__", "__sp_actx__"}  # `__sp_x__(ids, operand)`


class _Mismatch(Exception):
    pass


def _is_probe_name(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Name) and bool(_PROBE_NAME.match(node.id))


def _is_probe_expr(node: ast.AST) -> bool:
    """`__sp_on__ and __sp_exit__(3)`, `__sp_back__() and __sp_on__ and ...` (or a header's `__sp_x__ and ...`)."""
    if not isinstance(node, ast.BoolOp):
        return False
    first = node.values[0]
    return _is_probe_name(first.func if isinstance(first, ast.Call) else first)


def _is_probe_stmt(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.If):
        return _is_probe_name(stmt.test)
    if isinstance(stmt, ast.Expr):  # (a `while` epoch or step loop's bare `__sp_tick__(3)`, `__sp_untick__(3)`)
        value = stmt.value
        return _is_probe_name(value.func) if isinstance(value, ast.Call) else _is_probe_expr(value)
    if isinstance(stmt, ast.Assign):  # header: `__sp_on__ = __sp_define__(...)`, NVTX's globals
        return all(_is_probe_name(t) for t in stmt.targets)
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):  # header: `from runtime.probe import enter as __sp_enter__`
        return all(a.asname and _PROBE_NAME.match(a.asname) for a in stmt.names)
    return False


def _is_guard(stmt: ast.stmt) -> bool:
    """A region's `try`/`finally` or a suspending statement's guard (`finally:` or `except BaseException:`
    that re-enters the regions, emit.guarded)."""
    if not isinstance(stmt, ast.Try) or stmt.orelse:
        return False
    if not stmt.handlers:
        return 1 <= len(stmt.finalbody) <= 2 and all(_is_probe_stmt(s) for s in stmt.finalbody)
    if stmt.finalbody or len(stmt.handlers) != 1:
        return False
    handler = stmt.handlers[0]
    return (isinstance(handler.type, ast.Name) and handler.type.id == "BaseException" and handler.name is None
            and len(handler.body) == 2 and _is_probe_stmt(handler.body[0])
            and isinstance(handler.body[1], ast.Raise) and handler.body[1].exc is None)


def _user_statements(stmts: Sequence[ast.stmt]) -> list[ast.stmt]:
    """`stmts` without probe statements, with the bodies of the probes' `try`s in their place."""
    out: list[ast.stmt] = []
    for stmt in stmts:
        if _is_guard(stmt):
            out.extend(_user_statements(stmt.body))
        elif not _is_probe_stmt(stmt):
            out.append(stmt)
    return out


def _unwrap(node: ast.AST) -> Iterator[ast.AST]:
    """The probe wrappers around an expression, outermost first, then the expression itself."""
    while True:
        yield node
        picked = _picked(node)
        if picked is not None:
            node = picked
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _WRAPPERS and len(node.args) == 2:
            node = node.args[1]
        else:
            return


def _picked(node: ast.AST) -> ast.AST | None:
    """`x` of a suspension's `(x, <probes>)[0]` or `(<probes>, x, <probes>)[1]`, else None."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Tuple)
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int):
        return None
    elts, index = node.value.elts, node.slice.value
    if len(elts) < 2 or not 0 <= index < len(elts):
        return None
    if all(_is_probe_expr(e) for i, e in enumerate(elts) if i != index):
        return elts[index]
    return None


def _pairs(orig: ast.AST, out: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
    """(original node, instrumented node) for every original node; a probe wrapper is paired with
    the original node it wraps. Raises _Mismatch where the trees differ otherwise."""
    stack = [(orig, out)]
    while stack:
        a, b = stack.pop()
        *wrappers, b = _unwrap(b)
        if type(a) is not type(b):
            raise _Mismatch
        for w in wrappers:
            yield a, w
        yield a, b
        for name, va in ast.iter_fields(a):
            vb = getattr(b, name, None)
            if isinstance(va, list):
                if not isinstance(vb, list):
                    raise _Mismatch
                if vb and isinstance(vb[0], ast.stmt):
                    vb = _user_statements(vb)
                if len(va) != len(vb):
                    raise _Mismatch
                stack.extend((x, y) for x, y in zip(va, vb) if isinstance(x, ast.AST))
            elif isinstance(va, ast.AST):
                if not isinstance(vb, ast.AST):
                    raise _Mismatch
                stack.append((va, vb))


def column_points(orig: ast.AST, out: ast.AST, changed: set[int]) -> dict[str, list[list[int]]] | None:
    """For each out line in `changed`: [[out column, original column], ...] at the node boundaries
    on it (columns are UTF-8 byte offsets, as in the AST and in `co_positions`). Keys are the out
    line numbers as strings (JSON). None when the trees do not pair up."""
    points: dict[int, dict[int, int]] = {}
    try:
        for a, b in _pairs(orig, out):
            line = getattr(b, "lineno", None)
            if line is None or getattr(a, "lineno", None) is None:
                continue
            if line in changed:
                points.setdefault(line, {}).setdefault(b.col_offset, a.col_offset)
            end = b.end_lineno
            if end in changed and b.end_col_offset is not None and a.end_col_offset is not None:
                points.setdefault(end, {}).setdefault(b.end_col_offset, a.end_col_offset)
    except _Mismatch:
        return None
    return {str(line): [[o, c] for o, c in sorted(cols.items())] for line, cols in sorted(points.items())}
