"""The module header: which probe names it imports, and where it goes (after the module docstring
and the `from __future__` imports)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from . import emit
from .regions import Region
from .syntax import is_docstring


def header_index(body: Sequence[cst.BaseStatement]) -> int:
    """Probes go after the module docstring and the `from __future__` imports."""
    index = 0
    if body and is_docstring(body[0]):
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


def probe_names(regions: Sequence[Region], optional: set[str]) -> set[str]:
    """The probe names the module imports: enter/exit, those its regions' kinds need, and `optional`."""
    used = {"__sp_enter__", "__sp_exit__", *optional}
    kinds = {r.kind for r in regions}
    if kinds & {"loop"} or any(k in ("epoch", "step") for k in kinds):
        used.add("__sp_mark__")
    if kinds & {"epoch", "step"}:
        used.add("__sp_iterate__")
    return used


def add_header(module: cst.Module, body: list[cst.BaseStatement], backend: emit.Backend, relpath: str,
               regions: list[Region], optional: set[str]) -> str:
    """The code of `module` with `body`, the backend's header inserted at `header_index`."""
    used = probe_names(regions, optional)
    at = header_index(body)
    new_module = module.with_changes(body=[*body[:at], emit.header_placeholder(), *body[at:]])
    newline = module.default_newline
    header = "".join(line + newline for line in backend.header(relpath, regions, used))
    return new_module.code.replace(emit.HEADER_PLACEHOLDER + newline, header, 1)
