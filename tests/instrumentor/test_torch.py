"""torch: TorchScript functions are left alone; torch.compile(fullgraph=True) accepts the probes."""
import sys

import pytest

from instr_helpers import TESTDATA, instrument_cli, run

pytest.importorskip("torch")


@pytest.mark.slow
def test_torchscript_and_torch_compile_survive_instrumentation(tmp_path):
    out = tmp_path / "out"
    built = instrument_cli(str(TESTDATA / "torchproj"), "-o", str(out))
    assert built.returncode == 0, built.stdout + built.stderr
    assert "TorchScript (@torch.jit.script) 1" in built.stdout
    result = run([sys.executable, "main.py"], cwd=out, env={"SCALEPROBE_OUT": str(tmp_path / "runs")}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["compiled_same: True", "scripted: [2.0, 3.0, 4.0, 5.0]", "instrumented: True"]
