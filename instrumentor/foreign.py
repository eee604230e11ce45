"""Folders whose modules are not the project's own: build output, installed packages, Python
environments and a Python installation's standard library. One rule for the build (`project.py`)
and the import hook (`importhook.py`), so that `instrument SRC -o OUT` and `launch --instrument`
agree on which modules are the project's (the hook instruments each that is imported, also by a
computed name, as `instrument --all` does; the build follows the static import graph)."""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

# build output and installed packages by name; a regular package of that name (`dist/__init__.py`,
# a torch.distributed helpers package) is the project's own (review 68 M3)
_OUTPUT_DIRS = {"build", "dist", "node_modules"}
# never a package of the project's
_INSTALLED_DIRS = {"site-packages", "dist-packages"}
# a Python installation's standard library, `lib/pythonX.Y/`
_STDLIB_DIR = re.compile(r"python\d+\.\d+t?")


def environment(folder: Path) -> bool:
    """A Python environment: a virtualenv (`pyvenv.cfg`) or a conda environment (`conda-meta/`)
    (review 68 M7: `--all` instrumented the standard library of `conda create -p ./env`)."""
    return os.path.exists(folder / "pyvenv.cfg") or os.path.isdir(folder / "conda-meta")


def foreign_name(parent: str | None, name: str, folder: Path) -> bool:
    """The folder `name` (at `folder`, inside `parent`'s folder) holds modules that are not the
    project's: looked at by name, and for build output, whether it is a regular package."""
    if name in _INSTALLED_DIRS or name.endswith(".egg-info"):
        return True
    if parent == "lib" and _STDLIB_DIR.fullmatch(name):
        return True
    return name in _OUTPUT_DIRS and not os.path.isfile(folder / "__init__.py")


def foreign(root: Path, parts: tuple[str, ...]) -> bool:
    """The folder `root/parts...` is inside a foreign folder, or is one, or is a Python environment."""
    folder = root
    for i, name in enumerate(parts):
        folder = folder / name
        if foreign_name(parts[i - 1] if i else None, name, folder) or environment(folder):
            return True
    return False


def installed_outside(src: Path) -> Callable[[str], bool]:
    """Whether a regular top-level package or module of a name is importable from this Python's
    `sys.path` outside `src` (found by the path finder alone: no `__init__.py` runs), as the program
    gets it instead of `src`'s namespace folders of that name (review 68 L2)."""
    root = src.resolve()
    path = []
    for entry in sys.path:
        where = Path(entry or os.getcwd()).resolve()
        if where != root and root not in where.parents:
            path.append(entry or os.getcwd())
    memo: dict[str, bool] = {}

    def installed(name: str) -> bool:
        if name not in memo:
            try:
                spec = importlib.machinery.PathFinder.find_spec(name, path)
            except (ImportError, ValueError, OSError):
                spec = None
            memo[name] = spec is not None and spec.origin not in (None, "namespace")
        return memo[name]

    return installed
