"""Probe code for the two backends, built as libcst nodes (parsing templates per probe would cost a parse).

Line shapes matter: `linemap.py` recognises inserted lines by them, so that the original lines of a
rewritten file can be numbered without a second parse.
- prologue:  `if __sp_on__: __sp_enter__(N)` followed by the `try:` line;
- epilogue:  `finally:` followed by `if __sp_on__: __sp_exit__(N)`;
- per loop iteration: `if __sp_on__: __sp_mark__(N)`; in a `while` epoch or step loop (runtime
  backend) `__sp_tick__(N)` instead, unguarded (a step schedule switches `__sp_on__` at the steps),
  and its epilogue gets a line `__sp_untick__(N)` after the exit;
- around yield/await: the operand first, then the exits, which tell the runtime that this frame
  left its regions: `x = yield (v, __sp_on__ and (__sp_exit__(N), __sp_left__()))[0]`. Inside a
  larger expression the suspension re-enters in place, if the frame left them:
  `((yield (v, <exits>)[0]), __sp_back__() and __sp_on__ and <enters>)[0]`. The statement holding
  the suspension is guarded by a `try:` line and a one-line clause that re-enters after a
  suspension that raised (`gen.throw`, `close()`, a failed await):
  `except BaseException: __sp_back__() and __sp_on__ and __sp_enter__(N); raise`, or, for a
  statement that is one suspension or a `try`/`with` guarded as a whole,
  `finally: __sp_back__() and __sp_on__ and __sp_enter__(N)`, which also re-enters when it
  returned. A user's `finally:` of a `try` that suspends in a header or a one-line clause, and the
  handlers of a one-line `try:` body that suspends, get `__sp_back__() and __sp_on__ and
  __sp_enter__(N)` first;
- the hidden awaits of `async for`/`async with` add no line: their operand is wrapped in place
  (`__sp_aiter__((N, M), it)`, `__sp_actx__((N,), cm)`);
- the module header: lines starting with `from runtime.probe import enter as __sp_`,
  `import nvtx as __sp_` or `__sp_`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Protocol

import libcst as cst

from .regions import Region
from .revision import BUILD, PROBE_ABI

ON = "__sp_on__"


# In json.dumps' output: an escaped backslash, or the surrogate pair JSON writes for a character
# outside the BMP (in a Python literal that pair would be two lone surrogates, not the character).
_JSON_ESCAPE = re.compile(r"\\\\|\\ud([89ab][0-9a-f]{2})\\ud([c-f][0-9a-f]{2})")


def _one_char(match: re.Match) -> str:
    if match.group(1) is None:
        return match.group(0)
    high, low = int("d" + match.group(1), 16), int("d" + match.group(2), 16)
    return f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"


def py_str(text: str) -> str:
    """`text` as a double-quoted Python literal of ASCII characters only, so that it reads the
    same in a file of any encoding (a name or file name may hold any character)."""
    return _JSON_ESCAPE.sub(_one_char, json.dumps(text))


def _name(value: str) -> cst.Name:
    return cst.Name(value)


def _call(func: str, *args: cst.BaseExpression) -> cst.Call:
    return cst.Call(cst.Name(func), [cst.Arg(a) for a in args])


def _int(value: int) -> cst.Integer:
    return cst.Integer(str(value))


def _int_tuple(values: Sequence[int]) -> cst.Tuple:
    return cst.Tuple([cst.Element(_int(v)) for v in values])


# Probe names whose runtime.probe function is named differently (`aiter` would shadow a builtin there).
_ABI_NAMES = {"aiter": "async_iter", "actx": "async_ctx"}


def _guarded(call: cst.BaseExpression) -> cst.If:
    return cst.If(test=_name(ON), body=cst.SimpleStatementSuite([cst.Expr(call)]))


def _and_expr(calls: Sequence[cst.BaseExpression]) -> cst.BaseExpression:
    right = calls[0] if len(calls) == 1 else cst.Tuple([cst.Element(c) for c in calls])
    return cst.BooleanOperation(_name(ON), cst.And(), right)


class Backend(Protocol):
    name: str

    def enter(self, rid: int) -> cst.BaseExpression: ...
    def exit(self, rid: int) -> cst.BaseExpression: ...
    def mark(self, rid: int) -> cst.BaseExpression | None: ...
    def tick(self, rid: int, last: bool) -> cst.BaseExpression | None: ...
    def iterate(self, rid: int, iterable: cst.BaseExpression) -> cst.BaseExpression | None: ...
    def async_iter(self, rids: Sequence[int], iterable: cst.BaseExpression) -> cst.BaseExpression | None: ...
    def async_ctx(self, rids: Sequence[int], manager: cst.BaseExpression) -> cst.BaseExpression | None: ...
    def header(self, relpath: str, regions: Sequence[Region], used: set[str]) -> list[str]: ...


class RuntimeBackend:
    """Calls into `runtime.probe` (docs/internals.md section 1)."""

    name = "runtime"

    def enter(self, rid: int) -> cst.BaseExpression:
        return _call("__sp_enter__", _int(rid))

    def exit(self, rid: int) -> cst.BaseExpression:
        return _call("__sp_exit__", _int(rid))

    def mark(self, rid: int) -> cst.BaseExpression | None:
        return _call("__sp_mark__", _int(rid))

    def tick(self, rid: int, last: bool) -> cst.BaseExpression | None:
        return _call("__sp_untick__" if last else "__sp_tick__", _int(rid))

    def iterate(self, rid: int, iterable: cst.BaseExpression) -> cst.BaseExpression | None:
        return _call("__sp_iterate__", _int(rid), iterable)

    def async_iter(self, rids: Sequence[int], iterable: cst.BaseExpression) -> cst.BaseExpression | None:
        return _call("__sp_aiter__", _int_tuple(rids), iterable)

    def async_ctx(self, rids: Sequence[int], manager: cst.BaseExpression) -> cst.BaseExpression | None:
        return _call("__sp_actx__", _int_tuple(rids), manager)

    def header(self, relpath: str, regions: Sequence[Region], used: set[str]) -> list[str]:
        names = [n for n in ("enter", "exit", "mark", "iterate", "tick", "untick", "left", "back", "aiter", "actx")
                 if f"__sp_{n}__" in used]
        imports = ", ".join(f"{_ABI_NAMES.get(n, n)} as __sp_{n}__" for n in [*names, "define"])
        table = ", ".join(
            f"({r.id}, {py_str(r.kind)}, {py_str(r.name)}, {r.line})" for r in regions
        )
        if len(regions) == 1:
            table += ","
        # abi: the probe ABI this code calls (define refuses another one, one line and exit 2);
        # build: the scaleprobe and rewrite revision that wrote it (docs/internals.md section 1)
        return [
            f"from runtime.probe import {imports}",
            f"{ON} = __sp_define__(__name__, globals(), {py_str(relpath)}, ({table}), abi={PROBE_ABI}, build={py_str(BUILD)})",
        ]


class NvtxBackend:
    """NVTX domain ranges named after the regions; the emitted code needs only the `nvtx` package.

    Where scaleprobe's `runtime` package can be imported, the module registers with
    `runtime.linemap` as runtime-backend modules do (through `define`), so tracebacks show the
    original lines. `map_lines=False` leaves that out: for a project with a top-level `runtime`
    module of its own, which the lookup would find (and import) instead.
    """

    name = "nvtx"

    def __init__(self, map_lines: bool = True) -> None:
        self.map_lines = map_lines

    def enter(self, rid: int) -> cst.BaseExpression:
        attr = cst.Subscript(_name("__sp_attr__"), [cst.SubscriptElement(cst.Index(_int(rid)))])
        return _call("__sp_push__", attr)

    def exit(self, rid: int) -> cst.BaseExpression:
        return _call("__sp_pop__")

    def mark(self, rid: int) -> cst.BaseExpression | None:
        return None  # one NVTX event per iteration of every loop would swamp the trace

    def tick(self, rid: int, last: bool) -> cst.BaseExpression | None:
        return None

    def iterate(self, rid: int, iterable: cst.BaseExpression) -> cst.BaseExpression | None:
        return None

    # Left alone: the wrappers live in `runtime.probe`, which code of this backend must not need;
    # NVTX ranges therefore still include time suspended in `async for`/`async with`.
    def async_iter(self, rids: Sequence[int], iterable: cst.BaseExpression) -> cst.BaseExpression | None:
        return None

    def async_ctx(self, rids: Sequence[int], manager: cst.BaseExpression) -> cst.BaseExpression | None:
        return None

    def header(self, relpath: str, regions: Sequence[Region], used: set[str]) -> list[str]:
        attrs = ", ".join(
            f"{r.id}: __sp_domain__.get_event_attributes(message={py_str(r.name)})" for r in regions
        )
        lines = [
            "import nvtx as __sp_nvtx__",
            '__sp_domain__ = __sp_nvtx__.get_domain("scaleprobe"); __sp_push__ = __sp_domain__.push_range; '
            "__sp_pop__ = __sp_domain__.pop_range",
            f"__sp_attr__ = {{{attrs}}}",
            # the words runtime.config's flags take for "on"; any other value leaves the ranges on
            # (no runtime here to refuse it: docs/instrument.md, "Backends")
            f'{ON} = __import__("os").environ.get("SCALEPROBE_DISABLE", "").lower() not in ("1", "true", "yes", "on")',
            # for code run with other globals (runtime.probe.OFF_PROBES): probes off
            '__sp_builtins__ = __import__("builtins").__dict__; __sp_builtins__ and (__sp_builtins__.setdefault('
            '"__sp_on__", False), __sp_builtins__.setdefault("__sp_back__", lambda inner=0: False))',
        ]
        if LEFT in used:
            # runtime.probe's left()/back() (see LEFT) in pure Python: this backend's code needs no
            # `runtime`. The module's set of frame ids, each the frame of its function (a
            # comprehension runs in a frame of its own before Python 3.12).
            # A note holds its frame on 3.11+ (runtime/_pyprobe.py: a stale one is never taken by
            # a later frame at the same address).
            lines += [
                '__sp_held__ = {}; __sp_frame__ = __import__("sys")._getframe; '
                '__sp_keep__ = __import__("sys").version_info >= (3, 11)',
                '__sp_owner__ = lambda f: __sp_owner__(f.f_back) if f.f_code.co_name[-5:] == "comp>" and f.f_back else f',
                f"{LEFT} = lambda inner=0: not __sp_held__.__setitem__(id(__sp_f__ := __sp_owner__(__sp_frame__(1)) if inner "
                "else __sp_frame__(1)), __sp_f__ if __sp_keep__ else True)",
                f"{BACK} = lambda inner=0: bool(__sp_held__) and __sp_held__.pop(id(__sp_owner__(__sp_frame__(1)) if inner "
                "else __sp_frame__(1)), None) is not None",
            ]
        if self.map_lines:
            # Found without importing anything: a `runtime` package that has a `linemap` module.
            lines += [
                '__sp_spec__ = __import__("importlib.util").util.find_spec("runtime")',
                "__sp_spec__ and __sp_spec__.submodule_search_locations and "
                '__import__("importlib.machinery").machinery.PathFinder.find_spec("runtime.linemap", '
                "__sp_spec__.submodule_search_locations) and "
                f'__import__("runtime.linemap").linemap.register(globals().get("__file__"), {py_str(relpath)})',
            ]
        return lines


BACKENDS: dict[str, type] = {"runtime": RuntimeBackend, "nvtx": NvtxBackend}


def get_backend(name: str) -> Backend:
    from .errors import InstrumentError

    try:
        return BACKENDS[name]()
    except KeyError:
        raise InstrumentError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}") from None


# Stands for the header while libcst prints the module: parsing the header's long region table
# as a statement would cost as much as a third of the module's own parse.
HEADER_PLACEHOLDER = "__sp_header_placeholder__"


def header_placeholder() -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine([cst.Expr(_name(HEADER_PLACEHOLDER))])


def prologue(backend: Backend, rid: int) -> cst.If:
    return _guarded(backend.enter(rid))


def epilogue(backend: Backend, rid: int, untick: cst.BaseExpression | None = None) -> cst.Finally:
    """`finally:` and the region's exit; a `while` epoch or step loop's open iteration is closed
    after it (`untick`: `__sp_untick__(N)`)."""
    last = [] if untick is None else [cst.SimpleStatementLine([cst.Expr(untick)])]
    return cst.Finally(body=cst.IndentedBlock([_guarded(backend.exit(rid)), *last]))


def mark_statement(backend: Backend, rid: int) -> cst.If | None:
    call = backend.mark(rid)
    return None if call is None else _guarded(call)


def tick_statement(backend: Backend, rid: int) -> cst.SimpleStatementLine | None:
    call = backend.tick(rid, False)
    return None if call is None else cst.SimpleStatementLine([cst.Expr(call)])


def inline_tick(backend: Backend, rid: int) -> cst.Expr | None:
    call = backend.tick(rid, False)
    return None if call is None else cst.Expr(call)


def inline_mark(backend: Backend, rid: int) -> cst.Expr | None:
    call = backend.mark(rid)
    return None if call is None else cst.Expr(cst.BooleanOperation(_name(ON), cst.And(), call))


# A generator or coroutine that leaves its regions at a suspension calls `__sp_left__()` after the
# exits, and `__sp_back__()` after the suspension, which says whether it left them (and forgets
# it): the runtime keeps that per suspending frame, so the function gets no local of ours (which
# `locals()`, `f_locals` and debuggers would show). An exception raised while the operand was
# evaluated finds nothing noted and the regions still open.
LEFT = "__sp_left__"
BACK = "__sp_back__"


def _noting(func: str, in_comprehension: bool) -> cst.Call:
    # In a comprehension's element, conditions or inner iterables: its own frame before Python 3.12,
    # and the runtime looks for the function's frame (`__sp_left__(1)`); elsewhere it needs not.
    return _call(func, _int(1)) if in_comprehension else _call(func)


def leave_expr(backend: Backend, rids: Sequence[int], in_comprehension: bool = False) -> cst.BaseExpression:
    """Exit the open regions innermost first and note it: `__sp_on__ and (__sp_exit__(1), __sp_exit__(0), __sp_left__())`."""
    calls = [*(backend.exit(r) for r in rids), _noting(LEFT, in_comprehension)]
    return cst.BooleanOperation(_name(ON), cst.And(), cst.Tuple([cst.Element(c) for c in calls]))


def reenter_expr(backend: Backend, rids: Sequence[int], in_comprehension: bool = False) -> cst.BaseExpression:
    """Re-enter them outermost first if they were left: `__sp_back__() and __sp_on__ and (__sp_enter__(0), __sp_enter__(1))`."""
    enters = _and_expr([backend.enter(r) for r in reversed(rids)])
    return cst.BooleanOperation(_noting(BACK, in_comprehension), cst.And(), enters)


def reenter_statement(backend: Backend, rids: Sequence[int]) -> cst.Expr:
    return cst.Expr(reenter_expr(backend, rids))


def reenter_first(backend: Backend, rids: Sequence[int], suite: cst.BaseSuite) -> cst.BaseSuite:
    """A `finally:` block of a statement that suspends in its headers (an `except` clause's type)
    or one-line clauses, or a handler of a one-line `try:` body that suspends, which runs before
    the statement's guard: it re-enters the regions first if they were left
    (`__sp_back__() and __sp_on__ and __sp_enter__(0)`)."""
    again = reenter_statement(backend, rids)
    if isinstance(suite, cst.IndentedBlock):
        return suite.with_changes(body=[cst.SimpleStatementLine([again]), *suite.body])
    assert isinstance(suite, cst.SimpleStatementSuite)
    return suite.with_changes(body=[again, *suite.body])


def guarded(backend: Backend, rids: Sequence[int], stmt: cst.BaseStatement, inline: bool) -> cst.Try:
    """`stmt`, which suspends, guarded so that the regions are re-entered after a suspension that
    raised (`gen.throw()`, `close()`, a failed or cancelled await). `inline`: every suspension of
    `stmt` re-enters in place when it returns, so only an exception needs the guard:
    `try:` / stmt / `except BaseException: __sp_back__() and ...; raise` (nothing runs on the normal
    path; the bare `raise` re-raises with the traceback as it was). Otherwise the statement is one
    suspension (`x = yield v`, `return await f()`), or a `try`/`with`, which may swallow what its
    suspension raised, re-entered by `finally: __sp_back__() and ...` (after an in-place re-entry
    back() finds nothing: it re-enters once).
    Each clause is one line (linemap.py tells them from a user's `finally:` by that)."""
    body = cst.IndentedBlock([stmt.with_changes(leading_lines=())])
    again = reenter_statement(backend, rids)
    # A `try` or `with` guarded as a whole (a one-line suite, an `except` type that suspends) may
    # swallow what its suspension raised: its own handlers, `__exit__`, a `return`/`break` in its
    # `finally:`. The guard must run then too.
    if not inline or isinstance(stmt, (cst.Try, cst.TryStar, cst.With)):
        final = cst.Finally(body=cst.SimpleStatementSuite([again]))
        return cst.Try(body=body, finalbody=final, leading_lines=stmt.leading_lines)
    handler = cst.ExceptHandler(
        body=cst.SimpleStatementSuite([again, cst.Raise()]),
        type=_name("BaseException"),
    )
    return cst.Try(body=body, handlers=[handler], leading_lines=stmt.leading_lines)
