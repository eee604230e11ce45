"""Review 96: `--diff`'s summary left out the regions of modules carried over already instrumented
(LOW-1), and a module carried over under another name than it was built as was not said (LOW-3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def instrument(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "instrumentor", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def _carried_project(tmp_path: Path, as_name: str = "helper.py") -> Path:
    (tmp_path / "a").mkdir(parents=True)
    (tmp_path / "a" / "helper.py").write_text("def h():\n    return 1\n")
    (tmp_path / "a" / "main.py").write_text("import helper\n\ndef f():\n    return helper.h()\n\nf()\n")
    p = instrument(str(tmp_path / "a"), "-o", str(tmp_path / "built"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    src = tmp_path / "src"
    src.mkdir()
    (src / as_name).write_text((tmp_path / "built" / "helper.py").read_text())  # carried over, instrumented
    (src / "main.py").write_text(f"import {as_name[:-3]}\n\ndef f():\n    return {as_name[:-3]}.h()\n\nf()\n")
    return src


def _regions_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("regions:"))


def test_diff_counts_a_carried_modules_regions_as_the_build_does(tmp_path):
    src = _carried_project(tmp_path)
    diff = instrument(str(src), "-o", str(tmp_path / "out"), "--diff", cwd=tmp_path)
    build = instrument(str(src), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert diff.returncode == 0 and build.returncode == 0, diff.stderr + build.stderr
    assert _regions_line(diff.stderr + diff.stdout) == _regions_line(build.stderr + build.stdout)


def test_a_module_carried_over_under_another_name_is_warned_of(tmp_path):
    src = _carried_project(tmp_path, as_name="extra.py")
    build = instrument(str(src), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    assert "extra.py: already instrumented as helper.py: its regions are recorded under helper.py" in build.stderr
    same = instrument(str(_carried_project(tmp_path / "s")), "-o", str(tmp_path / "s" / "out"), cwd=tmp_path)
    assert "already instrumented as" not in same.stderr
