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


def _noop(rid: Any) -> None:
    return None


def hide(*fns: Callable) -> None:
    """Register no-op substitutes for `fns`, if dynamo is loaded; else remember nothing."""
    compiler = getattr(sys.modules.get("torch"), "compiler", None)
    substitute = getattr(compiler, "substitute_in_graph", None)
    if substitute is None or "torch._dynamo" not in sys.modules:
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
    hide(impl.enter, impl.exit, impl.mark)
