"""SRC that is itself a package (review 128 LOW-6): `instrument src/mytrain -o build --main train.py`
where `src/mytrain/__init__.py` exists and `train.py` uses relative imports. Such an entry runs only
as `python -m mytrain.train` from the folder above the package, which OUT does not have (OUT is
named `build`): `python build/train.py` fails with "attempted relative import with no known parent
package", as the original would run as a script. The build is made as asked; `hint` says what to do.
"""

from __future__ import annotations

import ast
from pathlib import Path, PurePosixPath


def hint(src: Path, out: Path | None, entries: list[str]) -> str | None:
    """The warning for such a build, or None: SRC has an `__init__.py`, an entry lies in SRC's
    package (every folder from SRC to it has one) and has a relative import, and OUT is not a folder
    named as the package (`-o build/mytrain` runs as `python -m mytrain.train` in build/)."""
    try:
        real = src.resolve()
    except OSError:
        return None
    package = real.name
    if not package.isidentifier() or not (real / "__init__.py").is_file():
        return None
    if out is not None and Path(out).resolve().name == package:
        return None
    for entry in entries:
        path = PurePosixPath(entry)
        folders = [f for f in path.parents if f != PurePosixPath(".")]
        if any(not (real / f / "__init__.py").is_file() for f in folders):
            continue
        if not _relative_imports(real / entry):
            continue
        dotted = ".".join([package, *path.parent.parts, *([] if path.stem == "__main__" else [path.stem])])
        parent = src.parent if str(src.parent) != "." else Path(".")
        return (f"SRC {src} is the package {package} (it has __init__.py) and {entry} uses relative imports, so it "
                f"runs only as `python -m {dotted}` from the folder above {package}/: instrument that folder "
                f"(instrument {parent} -o OUT --main {package}/{entry}) and run `python -m {dotted}` in OUT, or "
                f"build into a folder named {package} (-o OUT/{package}) and run `python -m {dotted}` in OUT; "
                f"`python {Path(out or 'OUT') / entry}` fails with \"attempted relative import with no known parent "
                "package\"")
    return None


def _relative_imports(path: Path) -> bool:
    """Whether the module at `path` has a relative import (`from . import x`, `from .m import y`)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))
