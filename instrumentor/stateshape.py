"""Whether OUT's `.scaleprobe/state.json` is in the shape the build wrote it: a state edited by
hand (or damaged) is taken as no state, and the build starts over, instead of ending in a Python
traceback (review 31: `"files": "x"`, `"next_id": "x"`, `"imports": []`).

Only what the build reads is checked; a key it does not know is left alone.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import PurePosixPath
from typing import Any

from .regions import Region
from .results import Skip

_REGION_KEYS = frozenset(f.name for f in fields(Region))
_SKIP_KEYS = frozenset(f.name for f in fields(Skip))


def inside(rel: object) -> bool:
    """Whether `rel` can name a file a build wrote: an OUT-relative posix path that stays inside."""
    return isinstance(rel, str) and bool(rel) and not PurePosixPath(rel).is_absolute() and ".." not in PurePosixPath(rel).parts


def written_in_shape(written: object) -> bool:
    """The record of what builds wrote: a list of paths inside OUT."""
    return isinstance(written, list) and all(inside(r) for r in written)


def state_in_shape(state: dict[str, Any]) -> bool:
    """Every key the build reads (`next_id`, `files`, `imports`, `epoch_bodies`) of the type it
    wrote, down to each file's entry; `written` is checked apart (`written_in_shape`)."""
    next_id = state.get("next_id", 0)
    if not isinstance(next_id, int) or isinstance(next_id, bool) or next_id < 0:
        return False
    files, imports, bodies = state.get("files", {}), state.get("imports", {}), state.get("epoch_bodies", {})
    if not (isinstance(files, dict) and isinstance(imports, dict) and isinstance(bodies, dict)):
        return False
    return all(_file_entry(e) for e in files.values()) and all(_imports_entry(e) for e in imports.values()) \
        and all(isinstance(e, list) and len(e) == 3 and isinstance(e[1], list) for e in bodies.values())


def _file_entry(e: object) -> bool:
    if not isinstance(e, dict):
        return False
    block = e.get("block")
    return (
        isinstance(e.get("hash"), (str, type(None))) and isinstance(e.get("fingerprint"), str)
        and isinstance(e.get("status"), str) and isinstance(e.get("out_size"), int)
        and isinstance(e.get("out_hash"), (str, type(None)))
        and (block is None or (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) for b in block)))
        and isinstance(e.get("regions"), list)
        and all(isinstance(r, dict) and set(r) == _REGION_KEYS and _region_values(r) for r in e["regions"])
        and isinstance(e.get("skipped", []), list)
        and all(isinstance(s, dict) and set(s) == _SKIP_KEYS for s in e.get("skipped", []))
        and isinstance(e.get("warnings", []), list) and all(isinstance(w, str) for w in e.get("warnings", []))
    )


def _region_values(r: dict) -> bool:
    return all(isinstance(r[k], int) and not isinstance(r[k], bool) for k in ("id", "line")) \
        and all(isinstance(r[k], str) for k in ("kind", "name", "file", "key"))


def _imports_entry(e: object) -> bool:
    return isinstance(e, list) and len(e) == 3 and isinstance(e[0], str) and isinstance(e[1], list) \
        and all(isinstance(i, list) and len(i) == 3 and isinstance(i[0], str) and isinstance(i[1], int)
                and isinstance(i[2], list) for i in e[1]) and isinstance(e[2], list)
