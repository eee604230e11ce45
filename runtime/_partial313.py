"""Python 3.13: a `functools.partial` found as a special method (`__iter__` of an epoch/step loop's
iterable, `__aiter__`/`__anext__` of `async for`, `__aenter__`/`__aexit__` of `async with`).

Its `__get__` returns the partial itself after `FutureWarning: functools.partial will be a method
descriptor in future Python versions; ...`, which C code (PyErr_WarnEx, stack level 1) issues
against the current Python frame: the user's statement without probes, a function of the runtime
with them (and then, with the default filter, once for all statements). The probes' wrappers look
such a method up themselves and issue the warning against the statement's frame, as PyErr_WarnEx
does: that frame's file and line, its globals' `__warningregistry__` and `__name__`, no source
text. Python 3.14's partial is a method descriptor and warns no more; 3.12 and before have no
`__get__`: on those WARNS is False and `GET` matches nothing.
"""

from __future__ import annotations

import sys
from typing import Any

WARNS = sys.version_info[:2] == (3, 13)
MESSAGE = ("functools.partial will be a method descriptor in future Python versions; "
           "wrap it in staticmethod() if you want to preserve the old behavior")
MISSING = object()

if WARNS:
    import functools
    from _warnings import warn_explicit  # what PyErr_WarnEx calls; a program's warnings.warn_explicit is not

    GET = functools.partial.__dict__["__get__"]
else:
    GET = object()  # matches nothing

    def warn_explicit(*args: Any) -> None:  # never called
        raise AssertionError("only Python 3.13's partial warns")


def lookup(kind: type, name: str) -> Any:
    """`name` in the dicts of `kind`'s MRO, as the interpreter looks special methods up; MISSING
    when none has it."""
    for base in kind.__mro__:
        found = base.__dict__.get(name, MISSING)
        if found is not MISSING:
            return found
    return MISSING


def is_partial(attr: Any) -> bool:
    """Whether binding `attr` as a special method is partial.__get__ (a partial, or a subclass that
    keeps its __get__)."""
    return lookup(type(attr), "__get__") is GET


def warning(frame: Any) -> tuple:
    """warn_explicit's arguments for the warning issued in `frame`. The caller calls warn_explicit
    itself, so that an error filter raises the warning in the caller's frame."""
    g = frame.f_globals
    registry = g.get("__warningregistry__", MISSING)
    if registry is MISSING:
        registry = g["__warningregistry__"] = {}
    module = g.get("__name__")
    if module is not None and not isinstance(module, str):
        module = "<string>"
    return MESSAGE, FutureWarning, frame.f_code.co_filename, frame.f_lineno, module, registry
