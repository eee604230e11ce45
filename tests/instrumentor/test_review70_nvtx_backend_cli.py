"""Review 70 F10: `instrument --backend nvtx` says when the built modules cannot import nvtx here."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
# the CLI in a Python that cannot import nvtx
WITHOUT_NVTX = "import sys; sys.modules['nvtx'] = None; from instrumentor.cli import main; sys.exit(main(sys.argv[1:]))"
WITH_NVTX = "import sys; from instrumentor.cli import main; sys.exit(main(sys.argv[1:]))"


def instrument(tmp_path, code, *args):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "main.py").write_text("def f():\n    return 1\n\nprint(f())\n")
    return subprocess.run([sys.executable, "-c", code, str(src), *args], env=clean_env(PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_nvtx_backend_build_warns_when_nvtx_is_missing(tmp_path, quiet):
    p = instrument(tmp_path, WITHOUT_NVTX, "-o", str(tmp_path / "out"), "--backend", "nvtx", *quiet)
    assert p.returncode == 0, p.stderr
    assert ("instrument: warning: --backend nvtx: the built modules import the nvtx package, which this Python "
            "cannot import") in p.stderr  # before: nothing, and the build failed at run time
    assert "SCALEPROBE_DISABLE=1" in p.stderr and "SCALEPROBE_NVTX=1" in p.stderr
    assert (tmp_path / "out" / "main.py").read_text().startswith("import nvtx as __sp_nvtx__")


def test_no_warning_for_the_runtime_backend_or_without_a_build(tmp_path):
    p = instrument(tmp_path, WITHOUT_NVTX, "-o", str(tmp_path / "out"))
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr
    p = instrument(tmp_path, WITHOUT_NVTX, "--backend", "nvtx", "--graph")
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr


def test_no_warning_where_nvtx_is_installed(tmp_path):
    pytest.importorskip("nvtx")
    p = instrument(tmp_path, WITH_NVTX, "-o", str(tmp_path / "out"), "--backend", "nvtx")
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr
