"""Review 68, import graph: each entry's imports are resolved as Python resolves them for `python
ENTRY` run from SRC (the entry's folder first, per entry; a package before a module of its name),
`from pkg import *` follows `pkg.__all__`, `importlib.import_module` takes `package=` and levels as
importlib does, under any name; what cannot be known is listed, never guessed; the import lists
kept in OUT's state.json are redone when the scanner changes; a src-layout package that a script
puts on sys.path itself is named, not taken for a third-party module.

Where it can, a test runs the program with Python and checks the graph against the files Python
imported (each entry's FOOTER prints them)."""
import hashlib
import json
import sys
from importlib.machinery import EXTENSION_SUFFIXES, PathFinder
from pathlib import Path

from instr_helpers import instrument_cli, project_tree, run
from instrumentor.cli import main as cli_main
from instrumentor.project import Options, Project

FOOTER = (
    "\nimport sys as _s, os as _o, json as _j\n"
    "_root = _o.environ['SRCROOT'] + _o.sep\n"
    "print('LOADED ' + _j.dumps(sorted(_o.path.relpath(m.__file__, _root).replace(_o.sep, '/')"
    " for m in list(_s.modules.values()) if (getattr(m, '__file__', None) or '').startswith(_root))))\n"
)


def loaded(src: Path, entry: str) -> set[str]:
    """The files of SRC that `python ENTRY`, run from SRC, imported (the entry itself too)."""
    done = run([sys.executable, entry], cwd=src, env={"SRCROOT": str(src)})
    assert done.returncode == 0, done.stderr
    line = [x for x in done.stdout.splitlines() if x.startswith("LOADED ")][-1]
    return set(json.loads(line[len("LOADED "):]))


def graph(src: Path, *mains: str):
    return Project(Options(src, None, mains=list(mains))).graph()


def manifest_files(out: Path) -> set[str]:
    return {r["file"] for r in json.loads((out / ".scaleprobe/manifest.json").read_text())["regions"]}


LOOP = "def work(i):\n    for j in range(2):\n        pass\n"


# -- H1: the entry's folder is first on sys.path ------------------------------------------------

def test_entry_in_a_subfolder_imports_its_own_folders_module(tmp_path):
    src = project_tree(tmp_path, {
        "app/main.py": "import utils\nutils.work(1)\n" + FOOTER,
        "app/utils.py": LOOP,
        "utils.py": "def work(i):\n    return i\n",  # SRC's: `python app/main.py` never imports it
    })
    assert loaded(src, "app/main.py") == {"app/main.py", "app/utils.py"}
    found = graph(src, "app/main.py")
    assert found.reached == ["app/main.py", "app/utils.py"]
    assert found.not_reached == ["utils.py"]
    out = tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q", "--main", "app/main.py"]) == 0
    assert manifest_files(out) == {"app/utils.py"}
    assert "__sp_on__" in (out / "app/utils.py").read_text() and "__sp_on__" not in (out / "utils.py").read_text()


# -- H2: each entry with its own sys.path --------------------------------------------------------

def test_two_entries_in_two_folders_each_reach_their_own_module(tmp_path):
    src = project_tree(tmp_path, {
        "a/run.py": "import config\nconfig.work(1)\n" + FOOTER, "a/config.py": LOOP,
        "b/run.py": "import config\nconfig.work(1)\n" + FOOTER, "b/config.py": LOOP,
    })
    assert loaded(src, "a/run.py") == {"a/run.py", "a/config.py"}
    assert loaded(src, "b/run.py") == {"b/run.py", "b/config.py"}
    found = graph(src, "a/run.py", "b/run.py")
    assert found.reached == ["a/config.py", "a/run.py", "b/config.py", "b/run.py"]
    assert found.not_reached == [] and found.third_party == []
    out = tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q", "--main", "a/run.py", "--main", "b/run.py"]) == 0
    assert manifest_files(out) == {"a/config.py", "b/config.py"}


# -- H3: FileFinder's order within a folder ------------------------------------------------------

def test_a_package_hides_a_module_of_its_name_as_in_python(tmp_path):
    src = project_tree(tmp_path, {
        "main.py": "import models\nmodels.build()\nimport helpers\n" + FOOTER,
        "models.py": "def build():\n    print('models.py')\n",
        "models/__init__.py": "from .net import build\n",
        "models/net.py": "def build():\n    for i in range(1):\n        print('models/net.py')\n",
        # a namespace folder does not hide a module of its name
        "helpers.py": "", "helpers/extra.py": "",
    })
    assert loaded(src, "main.py") == {"main.py", "models/__init__.py", "models/net.py", "helpers.py"}
    found = graph(src)
    assert found.reached == ["helpers.py", "main.py", "models/__init__.py", "models/net.py"]
    assert found.not_reached == ["helpers/extra.py", "models.py"]


def test_extension_modules_and_bytecode_take_their_places_in_finders_order(tmp_path):
    src = project_tree(tmp_path, {
        "main.py": "import fast, cached, compiled\n",
        "fast.py": "", "cached.py": "", "compiled.py": "",
    })
    (src / ("fast" + EXTENSION_SUFFIXES[0])).write_bytes(b"not really an ELF")  # before source
    (src / "cached.pyc").write_bytes(b"")  # after source
    (src / "compiled").mkdir()
    (src / "compiled/__init__.pyc").write_bytes(b"")  # a package (of bytecode) before a module
    # Python's own finder, asked without importing anything
    origins = {n: Path(PathFinder.find_spec(n, [str(src)]).origin).relative_to(src).as_posix()
               for n in ("fast", "cached", "compiled")}
    assert origins == {"fast": "fast" + EXTENSION_SUFFIXES[0], "cached": "cached.py", "compiled": "compiled/__init__.pyc"}
    found = graph(src)
    assert found.reached == ["cached.py", "main.py"]
    assert found.not_reached == ["compiled.py", "fast.py"]
    assert found.third_party == []


# -- H4: `from pkg import *` and `__all__` -------------------------------------------------------

def test_star_import_reaches_the_submodules_named_in_all(tmp_path):
    src = project_tree(tmp_path, {
        "main.py": "from pkg import *\nsub.f()\nfrom plain import *\nfrom dyn import *\n" + FOOTER,
        "pkg/__init__.py": "__all__ = ['sub', 'f2']\nif True:\n    __all__ += ('grown',)\ndef f2():\n    pass\n",
        "pkg/sub.py": "def f():\n    for i in range(1):\n        pass\n",
        "pkg/grown.py": "", "pkg/unnamed.py": "",
        "plain/__init__.py": "X = 1\n", "plain/other.py": "",  # no __all__: no submodule imported
        "dyn/__init__.py": "import os\n__all__ = [n for n in os.listdir('.') if n == 'never']\n", "dyn/part.py": "",
    })
    assert loaded(src, "main.py") == {"main.py", "pkg/__init__.py", "pkg/sub.py", "pkg/grown.py",
                                      "plain/__init__.py", "dyn/__init__.py"}
    found = graph(src)
    assert found.reached == ["dyn/__init__.py", "main.py", "pkg/__init__.py", "pkg/grown.py", "pkg/sub.py",
                             "plain/__init__.py"]
    assert found.not_reached == ["dyn/part.py", "pkg/unnamed.py", "plain/other.py"]
    # an __all__ that is no literal: said where it is, not guessed
    assert found.unresolved == [
        "dyn/__init__.py:2: __all__ = [n for n in os.listdir('.') if n == 'never'] "
        "(`__all__` of `from dyn import *` in main.py)"
    ]


# -- H5, L4: import_module's package, levels, and other names for it -----------------------------

IMPORTLIB = {
    "main.py": (
        "import importlib\n"
        "a = importlib.import_module('.plugins', package='pkg')\n"
        "b = importlib.import_module('..tools', 'pkg.sub')\n"
        "c = importlib.import_module('.', 'pkg.sub')\n"
        "def never(name):\n"
        "    importlib.import_module('...gone', 'pkg.sub')\n"  # above the top-level package
        "    importlib.import_module('.plugins')\n"  # TypeError: no package
        "    importlib.import_module('.plugins', name)\n"  # a package not known here
        + FOOTER
    ),
    "pkg/__init__.py": "", "pkg/plugins.py": "", "pkg/tools.py": "",
    "pkg/sub/__init__.py": "", "pkg/sub/tools.py": "", "pkg/sub/plugins.py": "",
    "plugins.py": "", "tools.py": "", "gone.py": "",  # where a wrong resolution would land
}


def test_import_module_takes_package_and_levels_as_importlib_does(tmp_path):
    src = project_tree(tmp_path, IMPORTLIB)
    assert loaded(src, "main.py") == {"main.py", "pkg/__init__.py", "pkg/plugins.py", "pkg/tools.py",
                                      "pkg/sub/__init__.py"}
    found = graph(src)
    assert found.reached == ["main.py", "pkg/__init__.py", "pkg/plugins.py", "pkg/sub/__init__.py", "pkg/tools.py"]
    assert found.unresolved == [
        "main.py:6: importlib.import_module('...gone', 'pkg.sub')",
        "main.py:7: importlib.import_module('.plugins')",
        "main.py:8: importlib.import_module('.plugins', name)",
    ]


def test_import_module_under_another_name_is_resolved_or_listed(tmp_path):
    src = project_tree(tmp_path, {
        "main.py": (
            "from importlib import import_module as load\n"
            "import importlib as il\n"
            "from builtins import __import__ as imp\n"
            "load('pkg.a')\n"
            "il.import_module('.b', package='pkg')\n"
            "again = il.import_module\n"
            "again('pkg.c')\n"
            "imp('pkg.d')\n"
            "def never(names, x):\n"
            "    load(x)\n"
            "    return list(map(il.import_module, names))\n"
            + FOOTER
        ),
        "pkg/__init__.py": "", "pkg/a.py": "", "pkg/b.py": "", "pkg/c.py": "", "pkg/d.py": "", "pkg/e.py": "",
    })
    assert loaded(src, "main.py") == {"main.py", "pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/c.py", "pkg/d.py"}
    found = graph(src)
    assert found.reached == ["main.py", "pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/c.py", "pkg/d.py"]
    assert found.not_reached == ["pkg/e.py"]
    assert found.unresolved == [
        "main.py:10: load(x)",
        "main.py:11: il.import_module (not called here: the names it is given are not known)",
    ]


# -- L3: import lists of an earlier scanner are redone -------------------------------------------

def test_import_lists_kept_by_an_earlier_scanner_are_made_again(tmp_path):
    src = project_tree(tmp_path, {"main.py": "import helper\nhelper.work(1)\n", "helper.py": LOOP})
    out = tmp_path / "out"
    assert cli_main([str(src), "-o", str(out), "-q"]) == 0
    assert manifest_files(out) == {"helper.py"}
    # state.json as an earlier scaleprobe wrote it, keyed by the file's hash alone, with the list its
    # scanner found (here: none), for an unchanged main.py
    path = out / ".scaleprobe/state.json"
    state = json.loads(path.read_text())
    digest = hashlib.blake2b((src / "main.py").read_bytes(), digest_size=16).hexdigest()
    state["imports"] = {"main.py": [digest, [], []]}
    path.write_text(json.dumps(state))
    (src / "helper.py").write_text(LOOP + "def more():\n    return 1\n")
    assert cli_main([str(src), "-o", str(out), "-q"]) == 0
    assert "__sp_on__" in (out / "helper.py").read_text()
    assert {r["name"] for r in json.loads((out / ".scaleprobe/manifest.json").read_text())["regions"]} == {
        "work", "work:for@2", "more"}
    kept = json.loads(path.read_text())["imports"]["main.py"]
    assert kept[0] != digest and kept[0].endswith(digest) and kept[1] == [["helper", 0, []]]


# -- M4: a src-layout package a script puts on sys.path itself -----------------------------------

def test_a_script_importing_a_src_layout_package_is_told_so(tmp_path):
    src = project_tree(tmp_path, {
        "scripts/train.py": (
            "import sys, os\n"
            "sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'src'))\n"
            "from mypkg import model\nmodel.fit()\n"
        ),
        "src/mypkg/__init__.py": "",
        "src/mypkg/model.py": "def fit():\n    for i in range(2):\n        pass\n",
    })
    found = graph(src, "scripts/train.py")
    assert found.third_party == []
    assert found.reached == ["scripts/train.py"]
    (note,) = found.unresolved
    assert note.startswith("scripts/train.py: mypkg: not found from scripts/ or SRC, but SRC has the package src/mypkg/")
    assert "--all" in note and "--main src/mypkg/" in note
    built = instrument_cli(str(src), "-o", str(tmp_path / "out"), "--main", "scripts/train.py")
    assert built.returncode == 0, built.stderr
    # the entry alone, with the runtime's header and no region (review 100: it runs at its own lines)
    assert "modules instrumented: 1" in built.stdout and "regions: 0" in built.stdout
    assert "dynamic imports not resolved: 1" in built.stdout
    # ... and a warning, on stderr also with -q (0 modules instrumented and exit 0 said nothing)
    assert f"instrument: warning: {note}" in built.stderr.splitlines(), built.stderr
    quiet = instrument_cli(str(src), "-o", str(tmp_path / "out"), "--main", "scripts/train.py", "-q")
    assert f"instrument: warning: {note}" in quiet.stderr.splitlines(), quiet.stderr
    shown = instrument_cli(str(src), "--graph", "--main", "scripts/train.py")
    assert "third-party modules (0):" in shown.stdout and "src/mypkg/" in shown.stdout
    assert f"instrument: warning: {note}" in shown.stderr.splitlines(), shown.stderr
    # with --all, or the package named as an entry too, its modules are instrumented
    assert "src/mypkg/model.py" in graph(src, "scripts/train.py", "src/mypkg/model.py").reached


# -- --jobs ----------------------------------------------------------------------------------------

def test_jobs_two_builds_the_same_tree_as_jobs_one(tmp_path):
    files = {
        "a/run.py": "import config\nfrom pkg import *\n", "a/config.py": LOOP,
        "b/run.py": "import config\nimport importlib\nimportlib.import_module('..tools', 'pkg.sub')\n",
        "b/config.py": LOOP,
        "pkg/__init__.py": "__all__ = ['sub']\n", "pkg/sub/__init__.py": "", "pkg/tools.py": LOOP,
        "models.py": LOOP, "models/__init__.py": LOOP,
    }
    src = project_tree(tmp_path, files)
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        assert cli_main([str(src), "-o", str(out), "-q", "-j", jobs, "--main", "a/run.py", "--main", "b/run.py"]) == 0
        outs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0] == outs[1]
    assert manifest_files(tmp_path / "out1") == {"a/config.py", "b/config.py", "pkg/tools.py"}


# -- L2: what comes before SRC's modules ----------------------------------------------------------

def test_an_installed_package_hides_a_namespace_folder_of_its_name(tmp_path):
    # `numpy/` without `__init__.py` is a namespace portion: Python takes the installed regular
    # package instead, so SRC's numpy/linalg.py never runs (it was reached and instrumented)
    src = project_tree(tmp_path, {
        "main.py": "from numpy import linalg\nprint(linalg.norm([3, 4]))\n" + FOOTER,
        "numpy/linalg.py": LOOP,
    })
    assert loaded(src, "main.py") == {"main.py"}
    found = graph(src, "main.py")
    assert found.reached == ["main.py"]
    assert "numpy" in found.third_party


def test_a_namespace_folder_of_no_installed_name_is_still_followed(tmp_path):
    src = project_tree(tmp_path, {
        "main.py": "from helpers_ns import tool\ntool.work(1)\n" + FOOTER,
        "helpers_ns/tool.py": LOOP,
    })
    assert loaded(src, "main.py") == {"main.py", "helpers_ns/tool.py"}
    assert graph(src, "main.py").reached == ["helpers_ns/tool.py", "main.py"]


def test_a_builtin_module_hides_a_module_of_its_name(tmp_path):
    assert "time" in sys.builtin_module_names  # CPython on Linux
    src = project_tree(tmp_path, {
        "main.py": "import time\nprint(time.monotonic() > 0)\n" + FOOTER,
        "time.py": LOOP,
    })
    assert loaded(src, "main.py") == {"main.py"}
    found = graph(src, "main.py")
    assert found.reached == ["main.py"]
    assert "time" not in found.third_party  # the standard library is not third-party
