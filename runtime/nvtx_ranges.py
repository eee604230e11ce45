"""SCALEPROBE_NVTX=1: push every region as an NVTX range too, so an nsys capture shows them.

Uses nvtx's domain API with attributes registered once per region id. The module's
`__sp_enter__`/`__sp_exit__` globals are replaced by variants that push/pop and then call the
normal probes, so programs run without NVTX pay nothing for it.
"""

from __future__ import annotations

from typing import Any

from . import _backend

impl = _backend.impl
_state: dict[str, Any] = {}


def _domain() -> tuple[Any, dict]:
    if not _state:
        import nvtx

        _state["domain"] = nvtx.get_domain("scaleprobe")
        _state["attrs"] = {}
    return _state["domain"], _state["attrs"]


def install(rec: Any, module_globals: dict) -> None:
    domain, attrs = _domain()
    for rid, (kind, name, *_rest) in list(rec.regions.items()):
        if rid not in attrs:
            attrs[rid] = domain.get_event_attributes(message=name)
    push, pop = domain.push_range, domain.pop_range
    enter, exit = impl.enter, impl.exit

    def nvtx_enter(rid: int, _attrs: dict = attrs) -> None:
        a = _attrs.get(rid)
        if a is None:
            name = rec.regions.get(rid, ("", f"region {rid}"))[1]
            a = _attrs[rid] = domain.get_event_attributes(message=name)
        push(a)
        enter(rid)

    def nvtx_exit(rid: int) -> None:
        exit(rid)
        pop()

    from .dynamo import hide

    hide(nvtx_enter, nvtx_exit)
    if "__sp_enter__" in module_globals:
        module_globals["__sp_enter__"] = nvtx_enter
    if "__sp_exit__" in module_globals:
        module_globals["__sp_exit__"] = nvtx_exit
