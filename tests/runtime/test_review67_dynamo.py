"""Review 67 F3: dynamo guarded on the module global `__sp_on__` (`G['__sp_on__'] == False`), so every
torch.compile'd frame was compiled again when the probes switched (SCALEPROBE_SCHEDULE,
runtime.probe.set_enabled), and a program under `torch.compiler.set_stance("fail_on_recompile")`
failed with "Detected recompile". runtime/dynamo.py now has dynamo read the flag as False, unguarded."""
import importlib.util
import subprocess
import sys

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

from .test_comm import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")

# Hand-instrumented as instrumentor/emit.py writes it: `double` runs eagerly, `forward` is compiled,
# the `for` is the step loop (the schedule switches the probes at its steps).
APP = '''
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, iterate as __sp_iterate__, define as __sp_define__
from runtime.probe import set_enabled
__sp_on__ = __sp_define__(__name__, globals(), "app.py", ((0, "function", "double", 8), (1, "function", "forward", 15), (2, "step", "main:for@26", 26)))
import sys
import torch
from torch._dynamo.utils import counters

def double(x):
    if __sp_on__: __sp_enter__(0)
    try:
        return x * 2
    finally:
        if __sp_on__: __sp_exit__(0)

def forward(x):
    if __sp_on__: __sp_enter__(1)
    try:
        for i in range(3):
            x = torch.sin(x) * 1.5 + i
        return x.sum()
    finally:
        if __sp_on__: __sp_exit__(1)

torch.manual_seed(0)
data = [torch.randn(16) for _ in range(8)]
compiled = torch.compile(forward, backend="eager", fullgraph=True)
got = []
if __sp_on__: __sp_enter__(2)
try:
    for i, x in __sp_iterate__(2, enumerate(data)):
        if i == 1:
            torch.compiler.set_stance("fail_on_recompile")
        got.append(compiled(double(x)))
finally:
    if __sp_on__: __sp_exit__(2)
for on in (False, True, False):
    set_enabled(on)
    got.append(compiled(double(data[0])))

def reference(x):  # the same, uncompiled and without probes
    x = x * 2
    for i in range(3):
        x = torch.sin(x) * 1.5 + i
    return x.sum()

want = [reference(x) for x in data] + [reference(data[0])] * 3
assert all(torch.equal(a, b) for a, b in zip(got, want)), (got, want)
print("unique_graphs", counters["stats"]["unique_graphs"], flush=True)
'''


@pytest.mark.slow
def test_switching_probes_compiles_nothing_again(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", SCALEPROBE_OUT=str(tmp_path / "out"),
               SCALEPROBE_SCHEDULE="wait=2,warmup=1,active=2", TORCH_LOGS="recompiles")
    done = subprocess.run([sys.executable, str(tmp_path / "app.py")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    # before: RuntimeError: Detected recompile ... G['__sp_on__'] == False
    assert done.returncode == 0, done.stderr[-3000:]
    assert "__sp_on__" not in done.stderr and "Recompiling" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "1", done.stdout
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    visits = {run.callpath_name(k): s.visits for k, s in run.profile.items()}
    # probes outside compiled code still record while on: steps 2, 3, 4 and 7 of the schedule, then
    # set_enabled(True) once; none inside the compiled `forward`
    assert visits.get("main:for@26->double") == 4, visits
    assert visits.get("double") == 1, visits
    assert not any("forward" in name for name in visits), visits
    assert [s["active"] for s in run.steps] == [False, False, False, True, True, False, False, False], run.steps
