"""The project's import graph, resolved statically from the entry files (no user code runs).

Resolution is done against SRC's file list rather than `importlib`, in the order of Python's
path-based finder, with each entry's own `sys.path`: it is exact for the modules we instrument,
handles namespace packages (which `modulefinder` crashes on) and never runs an `__init__.py` (which
`importlib.util.find_spec` does for parent packages).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from importlib.machinery import BYTECODE_SUFFIXES, EXTENSION_SUFFIXES, SOURCE_SUFFIXES
from pathlib import PurePosixPath

from .quiet import quiet_warnings

# Bumped whenever `scan_imports` finds other imports in the same source: OUT's state.json keeps each
# file's import lists under this version, and lists of another version are scanned again (review 68
# L3: an earlier scanner's lists were reused until the file changed).
# (2: `__all__` of packages, import_module's `package=`, levels of 2 and more, aliases of
#  import_module, __import__ read by its own signature)
SCAN_VERSION = 2

# Functions called as `importlib.import_module` / as `__import__`, whatever they are bound to in a file
_MODULE_FUNCS = frozenset({"importlib.import_module", "import_module"})
_DUNDER_FUNCS = frozenset({"__import__", "importlib.__import__", "builtins.__import__"})
# FileFinder's order in one folder of sys.path: a package folder (with an `__init__` of any kind),
# then extension modules, source, bytecode (review 68 H3); a folder without `__init__` is a
# namespace portion, taken only when no folder of the path has a package or module of that name
_SUFFIXES = (*EXTENSION_SUFFIXES, *SOURCE_SUFFIXES, *BYTECODE_SUFFIXES)
# in a cached import list, the levels that mark a package's `__all__` (no import has a level < 0)
_EXPORTS, _DYNAMIC_EXPORTS = -1, -2


@dataclass
class ImportFacts:
    """Imports found in one file: (module, level, names) per import, plus dynamic ones."""

    imports: list[tuple[str, int, tuple[str, ...]]] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # "line: text"
    # the module's `__all__`: its names where it is a literal list or tuple of strings (also with
    # `+=`, `.extend`, `.append`), "line: text" of the first assignment that is none, None without one
    exports: tuple[str, ...] | str | None = None


@dataclass
class ImportGraph:
    reached: list[str]
    not_reached: list[str]
    unresolved: list[str]  # "relpath:line: text"
    third_party: list[str]
    #: packages of SRC that an import names but that no entry's path reaches (a src layout): also
    #: in `unresolved`, and a warning of the build (review 68 M4: 0 modules instrumented, exit 0)
    unfollowed: list[str] = field(default_factory=list)


def cache_entry(digest: str, facts: ImportFacts) -> list:
    """A file's facts as state.json keeps them: [version:digest, imports, unresolved] (the shape
    `stateshape` checks); `__all__` is one more import of a level no import has."""
    imports = [[m, level, list(names)] for m, level, names in facts.imports]
    if isinstance(facts.exports, str):
        imports.append(["__all__", _DYNAMIC_EXPORTS, [facts.exports]])
    elif facts.exports is not None:
        imports.append(["__all__", _EXPORTS, list(facts.exports)])
    return [f"{SCAN_VERSION}:{digest}", imports, list(facts.unresolved)]


def cached_facts(entry: object, digest: str) -> ImportFacts | None:
    """The facts of a `cache_entry` for a file of this digest, scanned by this version; else None."""
    if not (isinstance(entry, list) and len(entry) == 3 and entry[0] == f"{SCAN_VERSION}:{digest}"):
        return None
    facts = ImportFacts(unresolved=list(entry[2]))
    for module, level, names in entry[1]:
        if level == _EXPORTS:
            facts.exports = tuple(names)
        elif level == _DYNAMIC_EXPORTS:
            facts.exports = names[0] if names else "?"
        else:
            facts.imports.append((module, level, tuple(names)))
    return facts


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        left = _dotted(node.value)
        return f"{left}.{node.attr}" if left else ""
    return ""


def _text(node: ast.AST) -> str:
    return ast.unparse(node)[:80]


def _arg(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    """The argument of `call` for a parameter, given by position or keyword; None when not given
    (or not to be known: after a `*args`)."""
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return arg
        if i == index:
            return arg
    for kw in call.keywords:
        if kw.arg == keyword or kw.arg is None:  # `**kwargs` may hold it
            return kw.value
    return None


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _strings(node: ast.expr | None) -> list[str] | None:
    """The items of a literal list or tuple of strings."""
    if isinstance(node, (ast.List, ast.Tuple)) and all(_string(e) is not None for e in node.elts):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def _own_package(node: ast.expr | None, is_init: bool) -> bool:
    """`__package__` (or `__spec__.parent`; `__name__` in a package's `__init__.py`): the importing
    module's own package, against which `resolve` takes relative imports."""
    name = _dotted(node) if node is not None else ""
    return name in ("__package__", "__spec__.parent") or (is_init and name == "__name__")


def _import_module_call(call: ast.Call, facts: ImportFacts, is_init: bool) -> None:
    """`importlib.import_module(name, package=None)`: a relative name is taken against `package`,
    dropping one part of it for each dot past the first, as importlib does (review 68 H5)."""
    name = _string(_arg(call, 0, "name"))
    if name is None:
        facts.unresolved.append(f"{call.lineno}: {_text(call)}")
        return
    level = len(name) - len(name.lstrip("."))
    if not level:
        facts.imports.append((name, 0, ()))  # `package` is not used for an absolute name
        return
    rest, package = name[level:], _arg(call, 1, "package")
    given = _string(package)
    if given:
        bits = given.rsplit(".", level - 1)
        if len(bits) >= level and all(bits):  # else ImportError "beyond top-level package"
            facts.imports.append((f"{bits[0]}.{rest}" if rest else bits[0], 0, ()))
            return
    elif _own_package(package, is_init):
        facts.imports.append((rest, level, ()))
        return
    # no package (TypeError when it runs), one not known here, or one too short: never guessed
    facts.unresolved.append(f"{call.lineno}: {_text(call)}")


def _dunder_import_call(call: ast.Call, facts: ImportFacts) -> None:
    """`__import__(name, globals=None, locals=None, fromlist=(), level=0)`."""
    name = _string(_arg(call, 0, "name"))
    level_node, fromlist = _arg(call, 4, "level"), _arg(call, 3, "fromlist")
    level = 0 if level_node is None else getattr(level_node, "value", None)
    names = () if fromlist is None else _strings(fromlist)
    if (
        name is not None and names is not None and isinstance(level, int) and not isinstance(level, bool)
        and level >= 0 and (name if level == 0 else True) and not name.startswith(".")
    ):
        if level == 0:
            facts.imports.append((name, 0, tuple(names)))
            return
        where = _arg(call, 1, "globals")  # a relative name is taken against the package of `globals`
        if isinstance(where, ast.Call) and _dotted(where.func) == "globals" and not where.args:
            facts.imports.append((name, level, tuple(names)))
            return
    facts.unresolved.append(f"{call.lineno}: {_text(call)}")


def _exports(body: list[ast.stmt]) -> tuple[str, ...] | str | None:
    """A module's `__all__` from its top-level statements (also in `if`/`try`/`with` blocks):
    `__all__ = [...]`, `__all__ += [...]`, `__all__.extend([...])`, `__all__.append("x")`."""
    names: list[str] = []
    found = False
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or type(stmt).__name__ == "TryStar":
            blocks = [getattr(stmt, k, []) for k in ("body", "orelse", "finalbody")]
            blocks += [h.body for h in getattr(stmt, "handlers", [])]
            for block in reversed(blocks):
                stack.extend(reversed(block))
            continue
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and any(_binds_all(t) for t in stmt.targets):
            value = stmt.value if all(isinstance(t, ast.Name) for t in stmt.targets) else None
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and _binds_all(stmt.target):
            if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
                continue
            value = stmt.value if isinstance(stmt, ast.AnnAssign) or isinstance(stmt.op, ast.Add) else None
        elif (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute) and _dotted(stmt.value.func.value) == "__all__"
        ):
            call, method = stmt.value, stmt.value.func.attr
            if method in ("extend", "append") and len(call.args) == 1 and not call.keywords:
                value = call.args[0] if method == "extend" else ast.List(elts=[call.args[0]])
            elif method not in ("remove", "sort", "reverse", "index", "count"):
                value = None
            else:
                continue
        else:
            continue
        found = True
        items = _strings(value)
        if items is None:
            return f"{stmt.lineno}: {_text(stmt)}"
        names.extend(items)
    return tuple(dict.fromkeys(names)) if found else None


def _binds_all(target: ast.expr) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "__all__" for n in ast.walk(target))


def scan_imports(source: str | bytes, filename: str = "<unknown>") -> ImportFacts:
    """Every import in the file, including those inside functions, try and if branches; and the
    module's `__all__` (`from pkg import *` imports the submodules it names)."""
    facts = ImportFacts()
    with quiet_warnings(filename):  # the user's SyntaxWarnings are Python's to show, at run time
        tree = ast.parse(source, filename=filename)
    is_init = PurePosixPath(filename).name == "__init__.py"
    # no call of an import function without one of these names in the text (aliases name them too)
    if isinstance(source, bytes):
        dynamic = b"import_module" in source or b"__import__" in source
    else:
        dynamic = "import_module" in source or "__import__" in source
    module_funcs, dunder_funcs = set(_MODULE_FUNCS), set(_DUNDER_FUNCS)
    calls: list[ast.Call] = []
    aliases: list[tuple[str, ast.expr]] = []  # `load = importlib.import_module`
    refs: list[ast.expr] = []  # import_module named and not called here: `map(importlib.import_module, names)`
    Name, Attribute, Call, Import, ImportFrom, Assign, Load = (
        ast.Name, ast.Attribute, ast.Call, ast.Import, ast.ImportFrom, ast.Assign, ast.Load)
    for node in ast.walk(tree):
        cls = type(node)
        if cls is Import:
            for alias in node.names:
                facts.imports.append((alias.name, 0, ()))
                if alias.name == "importlib" or (alias.asname is None and alias.name.startswith("importlib.")):
                    bound = alias.asname or "importlib"  # `import importlib.util` binds `importlib` too
                    module_funcs.add(f"{bound}.import_module")
                    dunder_funcs.add(f"{bound}.__import__")
                elif alias.name == "builtins":
                    dunder_funcs.add(f"{alias.asname or 'builtins'}.__import__")
        elif cls is ImportFrom:
            facts.imports.append((node.module or "", node.level, tuple(a.name for a in node.names)))
            if node.level == 0 and node.module in ("importlib", "builtins"):
                for alias in node.names:
                    if alias.name == "import_module" and node.module == "importlib":
                        module_funcs.add(alias.asname or alias.name)
                    elif alias.name == "__import__":
                        dunder_funcs.add(alias.asname or alias.name)
        elif not dynamic:
            continue
        elif cls is Name:
            if node.id == "import_module" and type(node.ctx) is Load:
                refs.append(node)
        elif cls is Attribute:
            if node.attr == "import_module" and type(node.ctx) is Load:
                refs.append(node)
        elif cls is Call:
            calls.append(node)
        elif cls is Assign:
            value = node.value
            if len(node.targets) == 1 and type(node.targets[0]) is Name and (
                type(value) is Name or (type(value) is Attribute and value.attr in ("import_module", "__import__"))
            ):
                aliases.append((node.targets[0].id, value))
    changed = bool(aliases)
    while changed:  # an alias of an alias
        changed = False
        for name, value in aliases:
            dotted = _dotted(value)
            for funcs in (module_funcs, dunder_funcs):
                if dotted in funcs and name not in funcs:
                    funcs.add(name)
                    changed = True
    called = set()
    for call in calls:
        func = _dotted(call.func)
        if func in module_funcs:
            _import_module_call(call, facts, is_init)
        elif func in dunder_funcs:
            _dunder_import_call(call, facts)
        else:
            continue
        called.add(id(call.func))
    if refs:
        assigned = {id(value) for _, value in aliases}
        for ref in refs:
            if id(ref) not in called and id(ref) not in assigned and _dotted(ref) in module_funcs:
                facts.unresolved.append(f"{ref.lineno}: {_text(ref)} (not called here: the names it is given are not known)")
    facts.exports = _exports(tree.body)
    return facts


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


@dataclass(frozen=True)
class _Spec:
    """What Python's path-based finder finds for a name: the module's file (a package's `__init__`;
    None for a namespace package) and a package's folders (None for a plain module)."""

    file: str | None
    path: tuple[str, ...] | None


class _Finder:
    """Python's path-based finder over SRC's file list, for a `sys.path` made of SRC's folders
    ('' = SRC itself): the first folder of the path with a package or a module of the name wins,
    in FileFinder's order within a folder (review 68 H3); namespace portions only where none has one."""

    def __init__(self, own: Iterable[str], files: Iterable[str],
                 installed: Callable[[str], bool] | None = None) -> None:
        self.installed = installed
        self.names: dict[str, set[str]] = {}  # folder -> names of the files in it
        for rel in files:
            folder, _, name = rel.rpartition("/")
            self.names.setdefault(folder, set()).add(name)
        # namespace portions: folders holding own modules (as before: a folder of data files alone
        # is taken for no package, and an installed package of its name is not hidden)
        self.portions: set[str] = set()
        for rel in own:
            if rel.endswith(".py"):
                folder = rel.rpartition("/")[0]
                while folder and folder not in self.portions:
                    self.portions.add(folder)
                    folder = folder.rpartition("/")[0]
        self._memo: dict[tuple[tuple[str, ...], str], _Spec | None] = {}

    def find(self, path: tuple[str, ...], name: str) -> _Spec | None:
        if not name:
            return None
        portions = []
        for folder in path:
            base = f"{folder}/{name}" if folder else name
            inside = self.names.get(base)
            if inside:
                for suffix in _SUFFIXES:
                    if "__init__" + suffix in inside:
                        return _Spec(f"{base}/__init__{suffix}", (base,))
            here = self.names.get(folder, ())
            for suffix in _SUFFIXES:
                if name + suffix in here:
                    return _Spec(base + suffix, None)
            if base in self.portions:
                portions.append(base)
        return _Spec(None, tuple(portions)) if portions else None

    def spec(self, path: tuple[str, ...], dotted: str) -> _Spec | None:
        """`dotted` as Python finds it with this sys.path: its top-level package on the path, each
        submodule in its package's folders."""
        key = (path, dotted)
        if key not in self._memo:
            parent, _, last = dotted.rpartition(".")
            if parent:
                above = self.spec(path, parent)
                found = None if above is None or above.path is None else self.find(above.path, last)
            else:
                found = self.find(path, last)
                if found is not None and (last in sys.builtin_module_names or (
                        found.file is None and self.installed is not None and self.installed(last))):
                    # a built-in module comes before sys.path, and a regular package or module
                    # anywhere on it before namespace portions (review 68 L2: SRC's `yaml/` folder
                    # was taken for the installed PyYAML that `from yaml import safe_load` gets)
                    found = None
            self._memo[key] = found
        return self._memo[key]


def _sys_path(folder: str) -> tuple[str, ...]:
    """The folders searched for an entry's imports: its own folder first (`sys.path[0]`), then SRC."""
    return (folder, "") if folder else ("",)


def _importable(rel: str, roots: Iterable[str]) -> bool:
    """Whether an own file is a module some root can import (named by identifiers from there)."""
    if not rel.endswith(".py"):
        return False
    for root in roots:
        if root:
            if not rel.startswith(root + "/"):
                continue
            parts = rel[len(root) + 1:].split("/")
        else:
            parts = rel.split("/")
        stem = parts[-1][:-3]
        if all(p.isidentifier() for p in parts[:-1]) and (stem.isidentifier() and (stem != "__init__" or len(parts) > 1)):
            return True
    return False


def resolve(
    entries: list[str],
    relpaths: list[str],
    scan: Callable[[str], ImportFacts],
    files: Iterable[str] | None = None,
    installed: Callable[[str], bool] | None = None,
    scripts: Collection[str] = (),
) -> ImportGraph:
    """Walk imports from the entry files. `scan(relpath) -> ImportFacts` (cached by the caller);
    `relpaths`: the project's own modules (the ones to instrument); `files`: every file of SRC
    (default: `relpaths`), for packages and modules that hide others (a package `__init__`, an
    extension module, a `.pyc`, modules of folders never instrumented).

    Each entry's imports are resolved with its own `sys.path` (review 68 H1, H2): a plain script's
    folder, then SRC; an entry inside a package (`entry_package`) is named by its dotted name, with
    the folder above its topmost package first, and its packages' `__init__.py` files are reached,
    as with `python -m pkg.app`. A plain script is named by its stem: its relative imports resolve
    as top-level ones. A module's relative imports resolve against the name it was reached under (a
    file reached under two names, or by two entries, is followed under each). `installed(name)`:
    whether a regular package or module of the top-level `name` is importable outside SRC, which
    hides SRC's namespace portions of that name; a built-in module hides SRC's module of its name.
    `scripts`: entries run as plain scripts also inside a package (the targets of symlinked entries,
    which `python LINK` runs with their own folder first on sys.path)."""
    own = set(relpaths)
    finder = _Finder(own, relpaths if files is None else files, installed)
    reached: set[str] = set()
    done: set[tuple[tuple[str, ...], str, str]] = set()
    unresolved: list[str] = []
    unfollowed: list[str] = []
    noted: set[str] = set()
    third: set[str] = set()
    queue: list[tuple[tuple[str, ...], str, str]] = []
    roots: set[str] = {""}
    facts_of: dict[str, ImportFacts | None] = {}
    elsewhere: dict[str, list[str]] | None = None  # top-level package name -> its folders in SRC
    misses: dict[tuple[tuple[str, ...], str, str], None] = {}  # (path, file, top-level name) not found, in order
    paths: set[tuple[str, ...]] = set()  # the sys.paths followed

    def facts(rel: str) -> ImportFacts | None:
        if rel not in facts_of:
            try:
                facts_of[rel] = scan(rel)
            except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
                # the same failure is reported when the file is instrumented (OSError: unreadable,
                # gone; `scan` notes that for --graph)
                facts_of[rel] = None
        return facts_of[rel]

    def note(text: str) -> None:
        if text not in noted:
            noted.add(text)
            unresolved.append(text)

    def reach(path: tuple[str, ...], name: str) -> tuple[bool, _Spec | None]:
        """Queue the own modules `import name` runs (each package above it first): whether any part
        of the name was found, and what `name` itself is (None: not found)."""
        parts = name.split(".")
        found = False
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            spec = finder.spec(path, prefix)
            if spec is None:
                return found, None
            found = True
            if spec.file in own and (path, spec.file, prefix) not in done:
                queue.append((path, spec.file, prefix))
        return found, spec

    def star(path: tuple[str, ...], rel: str, module: str, spec: _Spec | None) -> None:
        """`from module import *`: the submodules named in the package's `__all__` (review 68 H4)."""
        if spec is None or spec.path is None or spec.file not in own:
            return  # a module, a namespace package (no `__all__`), an `__init__` that is no own source
        init = facts(spec.file)
        if init is None or init.exports is None:
            return  # without `__all__`, `import *` imports no submodule
        if isinstance(init.exports, str):  # once per package, at its `__all__`
            if spec.file not in noted:
                noted.add(spec.file)
                unresolved.append(f"{spec.file}:{init.exports} (`__all__` of `from {module} import *` in {rel})")
            return
        for item in init.exports:
            reach(path, f"{module}.{item}")

    def missing(path: tuple[str, ...], rel: str, top: str) -> None:
        """A top-level name not found from this entry's path (nor from another's: an entry followed
        both as a script and under `python -m`): third-party, unless SRC has a package of that name
        elsewhere, which the program can only import by putting its folder on sys.path itself (a
        src layout, review 68 M4): said, never guessed."""
        nonlocal elsewhere
        if any(finder.spec(other, top) is not None for other in paths):
            return
        if elsewhere is None:
            elsewhere = {}
            for mod in sorted(own, key=lambda r: (r.count("/"), r)):
                if mod.endswith("/__init__.py"):
                    folder = mod[: -len("/__init__.py")]
                    elsewhere.setdefault(folder.rpartition("/")[2], []).append(folder)
        found = elsewhere.get(top)
        if not found:
            third.add(top)
            return
        searched = " or ".join(f"{f}/" if f else "SRC" for f in path)
        text = (f"{rel}: {top}: not found from {searched}, but SRC has the package {found[0]}/ (a src layout "
                f"that the program puts on sys.path?): not followed; use --all, or --main {found[0]}/<module>.py")
        if text not in noted:
            unfollowed.append(text)
        note(text)

    for entry in entries:
        folder = PurePosixPath(entry).parent.as_posix()
        folder = "" if folder == "." else folder
        in_package = None if entry in scripts else entry_package(entry, relpaths)
        if in_package is None:
            path = _sys_path(folder)
            roots.update(path)
            queue.append((path, entry, PurePosixPath(entry).stem))
            # in a namespace package (no `__init__.py`), its relative imports only run under
            # `python -m pkg.app` from SRC: follow one that has any under that name too (one without
            # is a script: `python app/main.py` imports app/utils.py, never SRC's utils.py, H1)
            dotted = entry[:-3].replace("/", ".") if entry.endswith(".py") else ""
            relative = facts(entry)
            if (
                folder and all(p.isidentifier() for p in dotted.split("."))
                and relative is not None and any(level for _, level, _ in relative.imports)
            ):
                spec = finder.spec(("",), dotted)
                if spec is not None and spec.file == entry:
                    reach(("",), dotted)
            continue
        root, name = in_package
        variants = [(_sys_path(root), name)]
        if root:  # also `python -m` from SRC (namespace packages)
            variants.append((("",), f"{root.replace('/', '.')}.{name}"))
        for i, (path, dotted) in enumerate(variants):
            spec = finder.spec(path, dotted)
            if spec is not None and spec.file == entry:
                roots.update(path)
                reach(path, dotted)  # the entry and every package above it, `__init__.py` first
            elif i == 0:
                roots.update(path)
                queue.append((path, entry, dotted))
                reach(path, dotted.rpartition(".")[0])
    while queue:
        path, rel, this = queue.pop()
        if (path, rel, this) in done:
            continue
        done.add((path, rel, this))
        first = rel not in reached
        reached.add(rel)
        found_facts = facts(rel)
        if found_facts is None:
            continue
        is_package = rel.rpartition("/")[2] == "__init__.py"
        for module, level, names in found_facts.imports:
            if level:
                base = this.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (level - 1)] if level > 1 else base
                module = ".".join([*base, module] if module else base)
            if not module:
                continue
            found, spec = reach(path, module)
            if found:
                if spec is None or spec.path is None:
                    continue  # `from module import name` of a module: names, no submodules
                for item in names:
                    if item == "*":
                        star(path, rel, module, spec)
                    else:
                        reach(path, f"{module}.{item}")
            elif level == 0:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and (path, rel, top) not in misses:
                    misses[(path, rel, top)] = None
        if first:
            unresolved.extend(f"{rel}:{u}" for u in found_facts.unresolved)
    paths.update(path for path, _, _ in done)
    for path, rel, top in misses:
        missing(path, rel, top)
    return ImportGraph(
        reached=sorted(reached),
        not_reached=sorted(r for r in own if r not in reached and _importable(r, roots)),
        unresolved=unresolved,
        third_party=sorted(third),
        unfollowed=unfollowed,
    )
