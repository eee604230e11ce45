"""An instrumented function compiled with fullgraph=True: the probes must not break the graph."""
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, mark as __sp_mark__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "compile_app.py", ((0, "function", "f", 8), (1, "loop", "f.loop", 11), (2, "function", "outer", 20)))
import torch


def f(x):
    if __sp_on__: __sp_enter__(0)
    try:
        for i in range(3):
            if __sp_on__: __sp_mark__(1)
            x = torch.sin(x) + i
        return x
    finally:
        if __sp_on__: __sp_exit__(0)


def outer(x):
    if __sp_on__: __sp_enter__(2)
    try:
        return torch.compile(f, backend="eager", fullgraph=True)(x)
    finally:
        if __sp_on__: __sp_exit__(2)


print(outer(torch.ones(4)).tolist())
