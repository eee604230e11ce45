"""An entry script with nothing to instrument gets the runtime header alone (review 100 HIGH-1:
`python OUT/main.py` then runs it, and the modules it imports, at their own lines)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}


def test_a_file_that_becomes_an_entry_gets_its_header_on_the_next_build(tmp_path):
    """A rebuild that names another entry (--main) rewrites both, though neither file changed: the
    reused files kept their form (the new entry had no header, the old one kept it)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("import b\nprint(b.f())\n")
    (src / "b.py").write_text("def f():\n    return 1\n")
    (src / "c.py").write_text("import b\nprint(b.f() + 1)\n")

    def build(main: str) -> None:
        p = subprocess.run([sys.executable, "-m", "instrumentor", str(src), "-o", str(tmp_path / "out"), "--main", main,
                            "--all"], capture_output=True, text=True, timeout=120, env=ENV)
        assert p.returncode == 0, p.stderr

    build("a.py")
    assert "__sp_define__" in (tmp_path / "out" / "a.py").read_text()
    assert (tmp_path / "out" / "c.py").read_text() == (src / "c.py").read_text()
    build("c.py")
    assert "__sp_define__" in (tmp_path / "out" / "c.py").read_text()
    assert (tmp_path / "out" / "a.py").read_text() == (src / "a.py").read_text()
