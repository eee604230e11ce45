"""Checks on a module's `ast` before libcst sees it: already instrumented (and for which backend),
names reserved for the probes, expressions nested too deep for libcst's parser."""

from __future__ import annotations

import ast
import re

from .errors import InstrumentError

_RESERVED = re.compile(r"^__sp_\w*__$")
# type parameters (Python 3.12+), which bind names in the scope of their def, class or alias
_TYPE_PARAMS = tuple(getattr(ast, kind) for kind in ("TypeVar", "ParamSpec", "TypeVarTuple") if hasattr(ast, kind))

# libcst's native parser grows faster than quadratically with nesting: 1000 levels ~1.5 s, 4000 ~60 s.
MAX_DEPTH = 1000


def max_depth(tree: ast.AST) -> tuple[int, int]:
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
    """True when the module was already instrumented: its top level binds `__sp_on__` and imports
    the probes under `__sp_*__` names, as the emitted header does (review 30: `__sp_on__ = 3` alone
    passed a user's module off as instrumented, copied without probes and no word); InstrumentError
    when it binds our names itself."""
    on = imports = False
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__sp_on__" for t in stmt.targets):
            on = True
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)) and any(
                a.asname and _RESERVED.match(a.asname) for a in stmt.names):
            imports = True
    if on and imports:
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
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            name = node.name  # `except E as x`, `case [x]`, `case [*x]` (review 89 L2)
        elif isinstance(node, ast.MatchMapping):
            name = node.rest  # `case {**x}`
        elif isinstance(node, _TYPE_PARAMS):
            name = node.name  # `def f[T]()`, `class C[**P]`, `type A[*Ts] = ...` (3.12+)
        if name and _RESERVED.match(name):
            line = getattr(node, "lineno", 0)
            raise InstrumentError(f"{relpath}:{line}: defines {name!r}; names __sp_*__ are reserved for scaleprobe's probes")
    return False


def define_table(tree: ast.Module) -> list[tuple[int, str, str, int]]:
    """The region table of an already instrumented module (runtime backend), from its header's
    `__sp_on__ = __sp_define__(__name__, globals(), relpath, ((id, kind, qualname, line), ...), ...)`:
    ids its build gave, which a build carrying the module over must not give again (review 89 L1).
    Empty for a module without one (the NVTX backend's ids only key a dict of its own)."""
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, ast.Assign) else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "__sp_define__"
                and len(value.args) >= 4 and any(isinstance(t, ast.Name) and t.id == "__sp_on__" for t in stmt.targets)):
            continue
        try:
            table = ast.literal_eval(value.args[3])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return []
        return [(r[0], r[1], r[2], r[3]) for r in table if isinstance(r, tuple) and len(r) == 4
                and type(r[0]) is int and r[0] >= 0 and isinstance(r[1], str) and isinstance(r[2], str)
                and type(r[3]) is int] if isinstance(table, tuple) else []
    return []


def define_relpath(tree: ast.Module) -> str | None:
    """The relpath an already instrumented module's header passes to `__sp_define__` (the file it
    was built as), or None."""
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, ast.Assign) else None
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "__sp_define__"
                and len(value.args) >= 3 and isinstance(value.args[2], ast.Constant)
                and isinstance(value.args[2].value, str)):
            return value.args[2].value
    return None


def backend_of(tree: ast.Module) -> str:
    """The backend an already instrumented module was written for (emit.py's module headers)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Import) and any(a.name == "nvtx" and a.asname == "__sp_nvtx__" for a in stmt.names):
            return "nvtx"
    return "runtime"
