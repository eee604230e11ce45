"""Keep probes invisible to torch.compile.

Dynamo cannot trace a C extension function or our pure-Python probes and would break the graph
(or fail under fullgraph=True) at every probe. Registering no-op substitutes makes a compiled
region contain no probes at all: its time is measured by the probes around the compiled call.
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


def hide_probes() -> None:
    from . import _backend

    impl = _backend.impl
    hide(impl.enter, impl.exit, impl.mark, impl.left, impl.back)
    if _pending and "torch._dynamo" in sys.modules:
        pending = _pending[:]
        del _pending[:]
        hide(*pending)
