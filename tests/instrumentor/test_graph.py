"""The static import graph: what is reached from the entry file, never by running user code."""
from pathlib import Path

import pytest

from instr_helpers import instrument_cli
from instrumentor.errors import InstrumentError
from instrumentor.project import Options, Project

FILES = {
    "main.py": (
        "import os\nimport torch\nimport a.b as c\nfrom pkg import sub\nfrom pkg.inner import deep\n"
        "import ns.mod\nimport importlib\n"
        "def f(name):\n    import lazy\n    importlib.import_module('plugins.one')\n    __import__('plugins.two')\n"
        "    return importlib.import_module(name)\n"
        "try:\n    import fast\nexcept ImportError:\n    import slow\n"
        "raise SystemExit('must never run')\n"
    ),
    "a/__init__.py": "",
    "a/b.py": "X = 1\n",
    "pkg/__init__.py": "from . import sibling\n",
    "pkg/sibling.py": "",
    "pkg/sub.py": "",
    "pkg/helpers.py": "",
    "pkg/inner/__init__.py": "",
    "pkg/inner/deep.py": "from ..helpers import h\nfrom . import *\n",
    "ns/mod.py": "from .other import thing\n",
    "ns/other.py": "",
    "lazy.py": "",
    "fast.py": "",
    "slow.py": "",
    "plugins/one.py": "def one():\n    return 1\n",
    "plugins/two.py": "",
    "plugins/three.py": "",
    "unreached.py": "def u():\n    return 1\n",
    "build/lib/copy.py": "def c():\n    return 1\n",
    "venv/pyvenv.cfg": "",
    "venv/lib/site.py": "",
}


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        path = tmp_path / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "src"


def test_graph_follows_every_static_import_form(project):
    graph = Project(Options(project, None)).graph()
    assert graph.reached == sorted([
        "main.py", "a/__init__.py", "a/b.py", "pkg/__init__.py", "pkg/sibling.py", "pkg/sub.py",
        "pkg/inner/__init__.py", "pkg/inner/deep.py", "pkg/helpers.py", "ns/mod.py", "ns/other.py",
        "lazy.py", "fast.py", "slow.py", "plugins/one.py", "plugins/two.py",
    ])
    assert graph.not_reached == ["plugins/three.py", "unreached.py"]
    assert graph.unresolved == ["main.py:12: importlib.import_module(name)"]
    assert graph.third_party == ["torch"]


def test_graph_command_prints_the_four_lists(project):
    result = instrument_cli(str(project), "--graph")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "own modules reached (16):" in out and "  plugins/one.py" in out
    assert "own modules not reached (2):\n  plugins/three.py\n  unreached.py" in out
    assert "dynamic imports not resolved (1):\n  main.py:12: importlib.import_module(name)" in out
    assert "third-party modules (1):\n  torch" in out


def test_only_reached_modules_are_instrumented_unless_all(project, tmp_path):
    Project(Options(project, tmp_path / "out")).build()
    out = tmp_path / "out"
    assert "__sp_on__" in (out / "plugins/one.py").read_text()
    for rel in ("unreached.py", "build/lib/copy.py"):
        assert (out / rel).read_bytes() == (project / rel).read_bytes()
    assert not (out / "venv").exists()
    Project(Options(project, tmp_path / "all", all=True)).build()
    assert "__sp_on__" in (tmp_path / "all/unreached.py").read_text()
    assert "__sp_on__" not in (tmp_path / "all/build/lib/copy.py").read_text()


def test_missing_entry_is_a_clear_error(project):
    with pytest.raises(InstrumentError, match="--main nothere.py: no such file"):
        Project(Options(project, None, mains=["nothere.py"])).graph()
