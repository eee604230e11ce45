"""Probes are invisible to torch.compile (no graph break even with fullgraph=True)."""
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parent / "data" / "compile_app.py"


@pytest.mark.slow
@pytest.mark.parametrize("pure", ["0", "1"])
def test_fullgraph_compile_of_instrumented_function(tmp_path, pure):
    pytest.importorskip("torch")
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_PURE=pure)
    p = subprocess.run([sys.executable, str(APP)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    names = {run.callpath_name(k) for k in run.profile}
    assert "outer" in names
    assert "outer->f" not in names  # inside the compiled graph the probes are no-ops
