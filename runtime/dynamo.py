"""Keep probes invisible to torch.compile.

Dynamo cannot trace a C extension function or our pure-Python probes and would break the graph
(or fail under fullgraph=True) at every probe. Registering no-op substitutes makes a compiled
region contain no probes at all: its time is measured by the probes around the compiled call.

The flag `__sp_on__` that guards each probe is a module global, and dynamo guards on every global
it reads (`G['__sp_on__'] == False`): each switch of the flag (SCALEPROBE_SCHEDULE, rank selection,
runtime.probe.set_enabled) then compiled every compiled frame once more, and failed a program
under `torch.compiler.set_stance("fail_on_recompile")` (review 67 F3). Dynamo's tracer therefore
reads that one global as the constant False, with no guard (`unguard_flag`): the graph is the same
either way, since the probes it would otherwise trace are the no-ops above.

Done only once the program has imported torch._dynamo (importing it ourselves costs seconds).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

_hidden: set[int] = set()
# Probes that asked to be hidden before the program loaded dynamo (the SCALEPROBE_TRACE and
# SCALEPROBE_NVTX wrappers are made at the instrumented module's import, before its `import torch`):
# hidden by `hide_probes` once dynamo is there.
_pending: list[Callable] = []
_FLAG = "__sp_on__"
_unguarded = [False]


def _noop(*args: Any) -> None:
    return None


def hide(*fns: Callable) -> None:
    """Register no-op substitutes for `fns` now if dynamo is loaded, else as soon as it is."""
    compiler = getattr(sys.modules.get("torch"), "compiler", None)
    substitute = getattr(compiler, "substitute_in_graph", None)
    if substitute is None or "torch._dynamo" not in sys.modules:
        _pending.extend(fn for fn in fns if all(fn is not p for p in _pending))
        return
    for fn in fns:
        if id(fn) in _hidden:
            continue
        try:
            substitute(fn, skip_signature_check=True)(_noop)
            _hidden.add(id(fn))
        except Exception as e:  # an older torch: compiled code then sees graph breaks, still correct
            print(f"scaleprobe: cannot hide probes from torch.compile: {e!r}", file=sys.stderr)
            return


def unguard_flag() -> bool:
    """Make dynamo's tracer read the global `__sp_on__` (a bool) as the constant False and install
    no guard on it; True once done. Dynamo has no public way to leave one global unguarded: this
    wraps its `_load_global` (torch 2.x; checked on 2.13), the one place an instruction `LOAD_GLOBAL` of
    a frame it traces or inlines reads the frame's globals. Where that is missing, compiled frames
    keep the guard (they are compiled again when the probes switch) and a note says so."""
    if _unguarded[0]:
        return True
    sc = sys.modules.get("torch._dynamo.symbolic_convert")
    variables = sys.modules.get("torch._dynamo.variables")
    base = getattr(sc, "InstructionTranslatorBase", None)
    constant = getattr(getattr(variables, "ConstantVariable", None), "create", None)
    classes = [
        c for c in vars(sc).values()
        if isinstance(c, type) and base is not None and issubclass(c, base) and callable(c.__dict__.get("_load_global"))
    ] if sc is not None else []
    if constant is None or not classes:
        print("scaleprobe: torch.compile guards on the probes' flag: compiled code is compiled again when"
              " the probes switch on or off", file=sys.stderr)
        _unguarded[0] = True  # (said once)
        return False
    for cls in classes:
        orig = cls.__dict__["_load_global"]
        if getattr(orig, "__sp_wrapped__", False):
            continue

        def _load_global(self: Any, inst: Any, _orig: Callable = orig) -> Any:
            # the flag of an instrumented module (a bool); a name that resolves elsewhere (not in
            # the frame's globals: the builtins' OFF_PROBES) takes dynamo's own way
            if inst.argval == _FLAG and type(self.f_globals.get(_FLAG)) is bool:
                self.push(constant(False))
                return None
            return _orig(self, inst)

        _load_global.__sp_wrapped__ = True  # type: ignore[attr-defined]
        _load_global.__wrapped__ = orig  # type: ignore[attr-defined]
        cls._load_global = _load_global  # type: ignore[attr-defined]
    _unguarded[0] = True
    return True


def hide_probes() -> None:
    from . import _backend

    impl = _backend.impl
    hide(impl.enter, impl.exit, impl.mark, impl.left, impl.back)
    if "torch._dynamo" in sys.modules:
        try:
            unguard_flag()
        except Exception as e:  # noqa: BLE001 - compiled code then keeps its guard, still correct
            print(f"scaleprobe: cannot keep torch.compile from guarding on the probes' flag: {e!r}", file=sys.stderr)
    if _pending and "torch._dynamo" in sys.modules:
        pending = _pending[:]
        del _pending[:]
        hide(*pending)
