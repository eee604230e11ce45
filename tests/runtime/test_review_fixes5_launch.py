"""Fifth review, launcher: the probes of SCALEPROBE_TRACE and SCALEPROBE_NVTX hidden from dynamo, and
the script's `__main__` as Python builds it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .test_launch_cluster import write
from .test_launch_e2e import clean_env, launch
from .test_review_fixes2 import _build


# ----- instrumentor 6: the trace and NVTX probes are hidden from dynamo ----------------------------------

COMPILED = '''
import torch

def block(x):
    for i in range(3):
        x = torch.sin(x) + i
    return x

print(torch.compile(block, fullgraph=True, backend="eager")(torch.ones(2)).tolist())
'''


@pytest.mark.slow
@pytest.mark.parametrize("variable", ["SCALEPROBE_TRACE", "SCALEPROBE_NVTX"])
def test_fullgraph_compile_with_trace_or_nvtx_probes(tmp_path, variable):
    pytest.importorskip("torch")
    if variable == "SCALEPROBE_NVTX":
        pytest.importorskip("nvtx")
    _, out = _build(tmp_path, COMPILED)
    done = subprocess.run([sys.executable, str(out / "main.py")], cwd=tmp_path, capture_output=True, text=True,
                          env=clean_env({variable: "1", "SCALEPROBE_OUT": str(tmp_path / "o")}), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("[2.98")


def test_a_probe_hidden_before_dynamo_is_loaded_is_hidden_once_it_is(monkeypatch):
    import types

    from runtime import dynamo

    substituted = []
    torch = types.SimpleNamespace(compiler=types.SimpleNamespace(
        substitute_in_graph=lambda fn, skip_signature_check: (lambda noop: substituted.append(fn))))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)
    monkeypatch.setattr(dynamo, "_hidden", set())
    monkeypatch.setattr(dynamo, "_pending", [], raising=False)

    def wrapper(rid):
        return None

    dynamo.hide(wrapper)  # SCALEPROBE_TRACE's wrapper, made at the module's import
    assert substituted == []
    monkeypatch.setitem(sys.modules, "torch._dynamo", types.ModuleType("torch._dynamo"))
    dynamo.hide_probes()  # the program imported torch._dynamo
    assert wrapper in substituted


# ----- instrumentor 7: `__main__` as `python script.py` builds it --------------------------------------

NAMESPACE = '''
__builtins__.answer = 42
print(answer, type(__builtins__).__name__)
print(sorted(globals()))
print(__loader__.get_source(__name__).splitlines()[1])
'''


@pytest.mark.parametrize("ranks", [[], ["--nproc", "1"]])
def test_the_scripts_main_module_is_the_one_python_builds(tmp_path, ranks):
    write(tmp_path / "b.py", NAMESPACE)
    plain = subprocess.run([sys.executable, "b.py"], cwd=tmp_path, capture_output=True, text=True,
                           env=clean_env())
    launched = launch([*ranks, "b.py"], tmp_path, {"SCALEPROBE_DISABLE": "1"})
    assert plain.returncode == 0, plain.stderr
    assert (launched.returncode, launched.stdout) == (0, plain.stdout), launched.stderr
    assert plain.stdout.startswith("42 module\n")
