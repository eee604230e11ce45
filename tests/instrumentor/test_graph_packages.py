"""An entry file inside a package (`--main pkg/app.py`, run as `python -m pkg.app`): it is named by its
dotted name, its packages' `__init__.py` files are reached, and its relative imports resolve against
that name (review 15, finding 8). A plain script keeps being resolved as a top-level module."""
import json
import sys

from instr_helpers import instrument_cli, project_tree, run, run_env
from instrumentor.cli import main as cli_main
from instrumentor.project import Options, Project
from runtime.runfile import find_run_files, read_run

NESTED = {
    "main.py": "print('a script beside the package')\n",
    "pkg/__init__.py": "def setup_env():\n    return 1\n",
    "pkg/top.py": "",
    "pkg/shared.py": "x = 1\n",
    "pkg/unused.py": "",
    "pkg/sub/__init__.py": "VALUE = 1\n",
    "pkg/sub/app.py": (
        "from . import helper, VALUE\n"    # a submodule and a name of pkg/sub/__init__.py
        "from .. import top, setup_env\n"  # a submodule and a name of pkg/__init__.py
        "from ..shared import x\n"
        "from .local import y\n"
    ),
    "pkg/sub/helper.py": "from . import deeper\n",  # reached as pkg.sub.helper: resolves in pkg.sub
    "pkg/sub/deeper.py": "",
    "pkg/sub/local.py": "y = 2\n",
}


def test_entry_in_a_package_reaches_every_init_and_resolves_relative_imports(tmp_path):
    src = project_tree(tmp_path, NESTED)
    graph = Project(Options(src, None, mains=["pkg/sub/app.py"])).graph()
    assert graph.reached == sorted([
        "pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/app.py", "pkg/sub/helper.py",
        "pkg/sub/deeper.py", "pkg/top.py", "pkg/shared.py", "pkg/sub/local.py",
    ])
    assert graph.not_reached == ["main.py", "pkg/unused.py"]
    shown = instrument_cli(str(src), "--graph", "--main", "pkg/sub/app.py")
    assert shown.returncode == 0, shown.stderr
    assert "own modules not reached (2):\n  main.py\n  pkg/unused.py\n" in shown.stdout
    assert "  pkg/__init__.py\n" in shown.stdout and "  pkg/sub/__init__.py\n" in shown.stdout


def test_package_main_and_src_layout_entries(tmp_path):
    src = project_tree(tmp_path, {
        "pkg/__init__.py": "", "pkg/__main__.py": "from . import core\n", "pkg/core.py": "",
        # a src layout: run as `cd src && python -m app.cli`; absolute imports name the package
        "src/app/__init__.py": "", "src/app/cli.py": "from app import tools\nfrom . import more\n",
        "src/app/tools.py": "", "src/app/more.py": "",
    })
    graph = Project(Options(src, None, mains=["pkg/__main__.py"])).graph()
    assert graph.reached == ["pkg/__init__.py", "pkg/__main__.py", "pkg/core.py"]
    graph = Project(Options(src, None, mains=["src/app/cli.py"])).graph()
    assert graph.reached == ["src/app/__init__.py", "src/app/cli.py", "src/app/more.py", "src/app/tools.py"]


def test_plain_script_in_a_folder_is_resolved_as_before(tmp_path):
    # no __init__.py beside it: `python scripts/train.py`, its folder on sys.path; relative imports
    # of a script have no package (Python refuses `from . import x`): resolved as top-level ones
    src = project_tree(tmp_path, {
        "scripts/train.py": "import util\nfrom .rel import z\nfrom . import nothing\n",
        "scripts/util.py": "", "scripts/rel.py": "", "nothing.py": "", "lib/__init__.py": "",
    })
    graph = Project(Options(src, None, mains=["scripts/train.py"])).graph()
    assert graph.reached == ["scripts/rel.py", "scripts/train.py", "scripts/util.py"]
    assert graph.not_reached == ["lib/__init__.py", "nothing.py"]


INITCASE = {
    "main.py": "from pkg import app\napp.main()\n",
    "pkg/__init__.py": "import time\ndef setup_env():\n    time.sleep(0.01)\n    return 1\nsetup_env()\n",
    "pkg/app.py": (
        "from . import setup_env\n"
        "def main():\n    for i in range(3):\n        setup_env()\n"
        "if __name__ == '__main__':\n    main()\n"
    ),
}


def test_package_entry_run_with_dash_m_times_the_init_functions(tmp_path):
    src, out = project_tree(tmp_path, INITCASE), tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q", "--main", "pkg/app.py"]) == 0
    regions = json.loads((out / ".scaleprobe/manifest.json").read_text())["regions"]
    assert {(r["file"], r["name"]) for r in regions} == {
        ("pkg/__init__.py", "setup_env"), ("pkg/app.py", "main"), ("pkg/app.py", "main:for@3")}
    env, runs = run_env(tmp_path), tmp_path / "runs"
    done = run([sys.executable, "-m", "pkg.app"], cwd=out, env=env)
    assert done.returncode == 0, done.stderr
    (path,) = find_run_files(runs)
    recorded = read_run(path)
    profile = {recorded.callpath_name(p, " > "): s.visits for p, s in recorded.profile.items()}
    assert profile["main > main:for@3 > setup_env"] == 3
    assert profile["setup_env"] == 1  # the call at import, when `python -m` runs pkg/__init__.py


def test_changed_package_init_is_instrumented_again(tmp_path):
    src, out = project_tree(tmp_path, INITCASE), tmp_path / "out"
    opts = Options(src, out, mains=["pkg/app.py"])
    Project(opts).build()
    again = Project(opts).build()
    assert sorted(again.reused) == ["pkg/__init__.py", "pkg/app.py"]
    (src / "pkg/__init__.py").write_text(INITCASE["pkg/__init__.py"] + "from . import extra\ndef teardown():\n    return 0\n")
    (src / "pkg/extra.py").write_text("def more():\n    return sum(range(3))\n")
    changed = Project(opts).build()
    assert changed.reused == ["pkg/app.py"]
    assert sorted(changed.instrumented) == ["pkg/__init__.py", "pkg/app.py", "pkg/extra.py"]
    names = {r["name"] for r in json.loads((out / ".scaleprobe/manifest.json").read_text())["regions"]}
    assert {"teardown", "more", "setup_env"} <= names


def test_import_hook_instruments_the_package_init_of_a_module_run_with_dash_m(tmp_path):
    # the in-memory path has no static graph: Python's own import of pkg/__init__.py goes through the hook
    src = project_tree(tmp_path, INITCASE)
    program = ("from pathlib import Path\nfrom instrumentor.importhook import install\nimport runpy\n"
               "install(Path('.'), cache_dir=Path('cache'))\n"
               "runpy.run_module('pkg.app', run_name='__main__', alter_sys=True)\n")
    env, runs = run_env(tmp_path), tmp_path / "runs"
    done = run([sys.executable, "-c", program], cwd=src, env=env)
    assert done.returncode == 0, done.stderr
    (path,) = find_run_files(runs)
    recorded = read_run(path)
    profile = {recorded.callpath_name(p, " > "): s.visits for p, s in recorded.profile.items()}
    assert profile["main > main:for@3 > setup_env"] == 3 and profile["setup_env"] == 1


def test_an_entry_in_a_namespace_package_resolves_its_relative_imports(tmp_path):
    # review 16 F8: `python -m pkg.app` from SRC, `pkg` with no __init__.py: `from . import util`
    # left pkg/util.py "not reached", so it ran without probes
    src = project_tree(tmp_path, {
        "pkg/app.py": "from . import util\nfrom .deep import more\n",
        "pkg/util.py": "", "pkg/deep/more.py": "", "pkg/unused.py": "",
    })
    graph = Project(Options(src, None, mains=["pkg/app.py"])).graph()
    assert graph.reached == ["pkg/app.py", "pkg/deep/more.py", "pkg/util.py"]
    assert graph.not_reached == ["pkg/unused.py"]
