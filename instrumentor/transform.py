"""Instrument one module's text: checks, the rewrite, the module header, line map and columns, and a
compile of the result; every outcome is a FileResult.

The pieces: `prechecks.py` (already instrumented, reserved names, nesting depth), `facts.py` (lines
and loop kinds from `ast`), `rewriter.py` (the statement walk; `suspend.py` for yield/await,
`syntax.py` for questions about nodes, `scopes.py` for where the walk stands), `header.py` (the
probe imports), `linemap.py` and `positions.py` (mapping back to the original lines and columns).
"""

from __future__ import annotations

import ast

import libcst as cst

from . import emit
from .errors import InstrumentError
from .facts import collect, loop_warnings, untimed_expressions
from .fileerrors import parse_failure
from .header import add_header
from .linemap import changed_lines, compute_linemap
from .positions import column_points
from .prechecks import MAX_DEPTH, backend_of, check_reserved, max_depth
from .regions import IdAllocator
from .results import FileResult
from .rewriter import Rewriter, numba_names
from .scopes import Scope
from .quiet import quiet_warnings
from .syntax import split_docstring


def instrument_source(source: str, relpath: str, *, ids: IdAllocator, backend: str | emit.Backend = "runtime",
                      epoch_callees: frozenset[str] = frozenset(), entry: bool = False) -> FileResult:
    """Instrument one module's text. Never raises for bad input: a failure is a FileResult.

    `epoch_callees`: functions of the project's other modules that run one epoch (`facts.collect`).
    `entry`: a script the program is run as (`python OUT/main.py`), which gets the runtime's header
    even with no region: its `define` runs it at its own lines, and installs the finder that does so
    for the modules it imports (review 100 HIGH-1: a thin `train.py` that imports the model's
    module left that module at OUT's lines, and TorchScript of its functions raised)."""
    be = emit.get_backend(backend) if isinstance(backend, str) else backend
    try:
        with quiet_warnings(relpath):  # the user's SyntaxWarnings are Python's to show, at run time
            tree = ast.parse(source, filename=relpath)
    except SyntaxError as exc:  # NUL bytes: a SyntaxError without a line (3.10: a ValueError)
        return FileResult(relpath, "failed", error=parse_failure(relpath, source, exc))
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, too deeply nested
        return FileResult(relpath, "failed", error=parse_failure(relpath, source, exc),
                          transient=not isinstance(exc, ValueError))
    if max(map(len, source.splitlines()), default=0) > 2000:
        depth, line = max_depth(tree)
        if depth > MAX_DEPTH:
            return FileResult(relpath, "failed", error=f"{relpath}:{line}: expression nested {depth} deep: "
                              f"libcst would take minutes (limit {MAX_DEPTH})")
    try:
        if "__sp_" in source and check_reserved(tree, relpath):
            found = backend_of(tree)
            if found != be.name:  # carried over as it is, it would not be what was asked for
                return FileResult(relpath, "failed", error=f"{relpath}:1: already instrumented with --backend {found}, "
                                  f"not {be.name}: instrument the original source (or use --backend {found})")
            return FileResult(relpath, "already")
        facts = collect(tree, source, epoch_callees)
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError as exc:
            return FileResult(relpath, "failed", error=f"{relpath}:{exc.raw_line}: libcst cannot parse: {exc.message}")
        rewriter = Rewriter(source, relpath, facts, ids, be, numba_names(tree) if "numba" in source else None)
        body = rewriter.block(module.body, Scope(prefix="", owner="<module>"))
        if rewriter.index != len(rewriter.facts):
            raise InstrumentError(f"internal: {relpath}: libcst and ast walks disagree (facts left over)")
        # comprehensions and lambdas inside a subtree left out whole (`# scaleprobe: off`) are counted there
        untimed = [u for u in untimed_expressions(tree, source)
                   if not any(a <= u.line <= b for a, b in rewriter.skipped_spans)]
        skipped = sorted(rewriter.skipped + untimed, key=lambda skip: skip.line)
        if not rewriter.regions and not (entry and be.name == "runtime"):
            return FileResult(relpath, "unchanged", skipped=skipped)
        split = split_docstring(body[0]) if body else None
        if split is not None:
            body[:1] = split
            rewriter.note_split(tree.body[1])
        code = add_header(module, body, be, relpath, rewriter.regions, rewriter.used)
    except InstrumentError as exc:
        return FileResult(relpath, "failed", error=str(exc))
    except RecursionError:
        _, line = max_depth(tree)  # where the nesting is deepest (iterative: no recursion left here)
        return FileResult(relpath, "failed", error=f"{relpath}:{line or 1}: expression too deeply nested for libcst",
                          transient=True)
    linemap = compute_linemap(source, code, rewriter.splits)
    changed = changed_lines(source, code, linemap, rewriter.splits)
    columns = None
    try:
        # CPython has limits libcst does not check: 20 statically nested blocks per function (each
        # loop and function gets a `try`), so ten nested loops compile only uninstrumented
        with quiet_warnings(relpath):  # the user's SyntaxWarnings are Python's to show, at run time
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
                                                   "left as it is", transient=isinstance(exc, (RecursionError, MemoryError)))
    return FileResult(relpath, "instrumented", code, rewriter.regions, skipped, linemap, columns=columns,
                      warnings=loop_warnings(facts, relpath))
