"""SCALEPROBE_NVTX=1 swaps in NVTX-pushing probes; without it the bare probes stay."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
CODE = """
from runtime.probe import enter as __sp_enter__, exit as __sp_exit__, define as __sp_define__
__sp_on__ = __sp_define__(__name__, globals(), "m.py", ((0, "function", "f", 3),))
def f():
    if __sp_on__: __sp_enter__(0)
    try:
        return 1
    finally:
        if __sp_on__: __sp_exit__(0)
for _ in range(3):
    f()
print(__sp_enter__.__name__, __sp_exit__.__name__)
"""


@pytest.mark.parametrize("flag,expected", [("1", "nvtx_enter nvtx_exit"), ("0", "enter exit")])
def test_nvtx_swaps_probes_and_still_records(tmp_path, flag, expected):
    pytest.importorskip("nvtx")
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), SCALEPROBE_NVTX=flag)
    p = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[-2:] == expected.split()
    from runtime.runfile import find_run_files, read_run

    [f] = find_run_files(tmp_path / "out")
    assert read_run(f).profile[(0,)].visits == 3
