"""The project's import graph, resolved statically from the entry files (no user code runs).

Resolution is done against the project's own file list rather than `importlib`: it is exact for the
modules we instrument, handles namespace packages (which `modulefinder` crashes on) and never runs
an `__init__.py` (which `importlib.util.find_spec` does for parent packages).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from .quiet import quiet_warnings

_IMPORT_FUNCS = {"importlib.import_module", "import_module", "__import__"}


@dataclass
class ImportFacts:
    """Imports found in one file: (module, level, names) per import, plus dynamic ones."""

    imports: list[tuple[str, int, tuple[str, ...]]] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # "line: text"


@dataclass
class ImportGraph:
    reached: list[str]
    not_reached: list[str]
    unresolved: list[str]  # "relpath:line: text"
    third_party: list[str]


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        left = _dotted(node.value)
        return f"{left}.{node.attr}" if left else ""
    return ""


def scan_imports(source: str | bytes, filename: str = "<unknown>") -> ImportFacts:
    """Every import in the file, including those inside functions, try and if branches."""
    facts = ImportFacts()
    with quiet_warnings(filename):  # the user's SyntaxWarnings are Python's to show, at run time
        tree = ast.parse(source, filename=filename)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                facts.imports.append((alias.name, 0, ()))
        elif isinstance(node, ast.ImportFrom):
            facts.imports.append((node.module or "", node.level, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Call) and _dotted(node.func) in _IMPORT_FUNCS:
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                name = arg.value
                level = len(name) - len(name.lstrip("."))
                package = node.args[1] if len(node.args) > 1 else None
                if level and not (isinstance(package, ast.Constant) and isinstance(package.value, str)):
                    # relative to __package__: the importing module's own package
                    facts.imports.append((name[level:], level, ()))
                elif level:
                    facts.imports.append((f"{package.value}.{name[level:]}".rstrip("."), 0, ()))
                else:
                    facts.imports.append((name, 0, ()))
            else:
                facts.unresolved.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return facts


def module_names(relpaths: Iterable[str], roots: Iterable[str]) -> tuple[dict[str, str], set[str]]:
    """Module name -> relpath for every .py under each root ('' = SRC itself), and package names."""
    modules: dict[str, str] = {}
    packages: set[str] = set()
    for root in roots:
        prefix = PurePosixPath(root) if root else None
        for rel in relpaths:
            path = PurePosixPath(rel)
            if prefix is not None:
                try:
                    path = path.relative_to(prefix)
                except ValueError:
                    continue
            parts = list(path.parts)
            if not parts[-1].endswith(".py") or not all(p.isidentifier() for p in parts[:-1]):
                continue
            stem = parts[-1][:-3]
            if stem == "__init__":
                parts = parts[:-1]
            else:
                parts[-1] = stem
            if not parts or not all(p.isidentifier() for p in parts):
                continue
            for i in range(1, len(parts)):
                packages.add(".".join(parts[:i]))  # namespace packages too
            name = ".".join(parts)
            if stem == "__init__":
                packages.add(name)
            modules.setdefault(name, rel)
    return modules, packages


def entry_package(entry: str, relpaths: Iterable[str]) -> tuple[str, str] | None:
    """For an entry file inside a package (an `__init__.py` beside it): the folder above its topmost
    package (walking up through folders with an `__init__.py`, never above SRC) and its dotted name
    from there, as `python -m` names it (`pkg/app.py` -> ("", "pkg.app")). None for a plain script."""
    have = set(relpaths)
    path = PurePosixPath(entry)
    folder = path.parent
    if folder == PurePosixPath(".") or (folder / "__init__.py").as_posix() not in have:
        return None
    parts = [] if path.stem == "__init__" else [path.stem]
    while folder != PurePosixPath(".") and (folder / "__init__.py").as_posix() in have and folder.name.isidentifier():
        parts.insert(0, folder.name)
        folder = folder.parent
    if not parts or parts == [path.stem]:
        return None  # the package folder's own name is no identifier: not importable as one
    return ("" if folder == PurePosixPath(".") else folder.as_posix()), ".".join(parts)


def resolve(
    entries: list[str],
    relpaths: list[str],
    roots: list[str],
    scan: "callable",
) -> ImportGraph:
    """Walk imports from the entry files. `scan(relpath) -> ImportFacts` (cached by the caller).

    A module's relative imports resolve against the name it was reached under (a file reached under
    two names, through two roots, is followed under each). An entry inside a package is named by its
    dotted name (`entry_package`), and its packages' `__init__.py` files are reached, as with
    `python -m pkg.app`; pass the folder above its topmost package among `roots`. A plain script is
    named by its stem: its relative imports resolve as top-level ones."""
    modules, packages = module_names(relpaths, roots)
    by_path = {rel: name for name, rel in modules.items()}
    reached: set[str] = set()
    done: set[tuple[str, str]] = set()
    unresolved: list[str] = []
    third: set[str] = set()
    queue: list[tuple[str, str]] = []

    def reach(name: str) -> bool:
        parts = name.split(".")
        found = False
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            rel = modules.get(prefix)
            if rel is not None:
                found = True
                if (rel, prefix) not in done:
                    queue.append((rel, prefix))
            elif prefix in packages:
                found = True
        return found

    for entry in entries:
        in_package = entry_package(entry, relpaths)
        if in_package is None:
            name = by_path.get(entry, PurePosixPath(entry).stem)
            queue.append((entry, name))
            # in a namespace package (no `__init__.py`), its relative imports only run under
            # `python -m pkg.app` from SRC: follow it under that name too
            dotted = PurePosixPath(entry).with_suffix("").as_posix().replace("/", ".")
            if dotted != name and modules.get(dotted) == entry:
                queue.append((entry, dotted))
            continue
        root, name = in_package
        names = [name]
        if root and modules.get(f"{root.replace('/', '.')}.{name}") == entry:
            names.append(f"{root.replace('/', '.')}.{name}")  # also `python -m` from SRC (namespace packages)
        for dotted in names:
            if modules.get(dotted) == entry:
                reach(dotted)  # the entry and every package above it, `__init__.py` first
            else:
                queue.append((entry, dotted))
                reach(dotted.rpartition(".")[0])
    while queue:
        rel, this = queue.pop()
        if (rel, this) in done:
            continue
        done.add((rel, this))
        first = rel not in reached
        reached.add(rel)
        try:
            facts = scan(rel)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
            # the same failure is reported when the file is instrumented (OSError: unreadable, gone;
            # `scan` notes that for --graph)
            continue
        is_package = rel.endswith("__init__.py")
        for module, level, names in facts.imports:
            if level:
                base = this.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (level - 1)] if level > 1 else base
                module = ".".join([*base, module] if module else base)
            if not module:
                continue
            if reach(module):
                for item in names:
                    if item != "*":
                        reach(f"{module}.{item}")
            elif level == 0:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names:
                    third.add(top)
        if first:
            unresolved.extend(f"{rel}:{u}" for u in facts.unresolved)
    own = sorted(set(modules.values()))
    return ImportGraph(
        reached=sorted(reached),
        not_reached=[r for r in own if r not in reached],
        unresolved=unresolved,
        third_party=sorted(third),
    )
