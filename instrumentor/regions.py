"""Region records, id allocation and the regions manifest written to OUT."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import InstrumentError

KINDS = ("function", "method", "generator", "async_generator", "coroutine", "loop", "epoch", "step")
MANIFEST_VERSION = 1
STATE_DIR = ".scaleprobe"
MANIFEST_NAME = "manifest.json"
_REGION_WORDS = re.compile(r"\b(?:def|for|while)\b")
#: the region ids the runtime hands out itself (`runtime.recorder.RESERVED_BASE` and `RESERVED_END`:
#: the manual API's regions, communication's, the modules `--instrument` compiles), which no build
#: gives a module: a build with more ids goes on above them
RUNTIME_IDS = (1 << 16, 1 << 18)


def past_runtime_ids(start: int, size: int) -> int:
    """Where a block of `size` ids wanted from `start` begins: `start`, or the end of the runtime's
    ids (`RUNTIME_IDS`) where it would take some of them."""
    low, high = RUNTIME_IDS
    return high if start < high and start + size > low else start


def in_runtime_ids(rid: int) -> bool:
    return RUNTIME_IDS[0] <= rid < RUNTIME_IDS[1]


@dataclass
class Region:
    id: int
    kind: str
    name: str
    file: str
    line: int
    key: str  # stable identity across edits: qualname/loop ordinal, no line numbers


def region_bound(source: str) -> int:
    """An upper bound on the regions a module can yield: every region starts with def, for or while."""
    return len(_REGION_WORDS.findall(source))


class IdAllocator:
    """Hands out ids: the previous id for a known key, else the next one from the file's pool."""

    def __init__(self, pool: Iterable[int], prior: dict[str, int] | None = None) -> None:
        self._prior = dict(prior or {})
        taken = set(self._prior.values())
        self._pool: Iterator[int] = (i for i in pool if i not in taken)
        self.used: list[int] = []

    def take(self, key: str) -> int:
        rid = self._prior.pop(key, None)
        if rid is None:
            try:
                rid = next(self._pool)
            except StopIteration:
                raise InstrumentError("internal: region id pool exhausted") from None
        self.used.append(rid)
        return rid


def manifest_path(out: Path) -> Path:
    return out / STATE_DIR / MANIFEST_NAME


def write_manifest(out: Path, regions: Iterable[Region], *, backend: str, source: str | None = None,
                   build: str | None = None, abi: int | None = None) -> Path:
    """One region a line: readable, and written by json's C encoder (`indent=` falls back to the
    pure-Python one, which made a no-change re-run of a large tree spend most of its time here).
    `build`: the instrumentor that wrote the tree (revision.BUILD); `abi`: the probe ABI its code
    calls (runtime backend only)."""
    path = manifest_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    head: dict = {"version": MANIFEST_VERSION, "backend": backend}
    if build is not None:
        head["build"] = build
    if abi is not None:
        head["abi"] = abi
    if source is not None:
        head["source"] = source
    rows = ",\n  ".join(
        json.dumps({"id": r.id, "kind": r.kind, "name": r.name, "file": r.file, "line": r.line, "key": r.key})
        for r in sorted(regions, key=lambda r: r.id)
    )
    text = json.dumps(head)[:-1] + (f', "regions": [\n  {rows}\n]}}\n' if rows else ', "regions": []}\n')
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def read_manifest(path: Path) -> list[Region]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InstrumentError(f"{path}: cannot read regions manifest: {exc}") from None
    if doc.get("version") != MANIFEST_VERSION:
        raise InstrumentError(
            f"{path}: manifest version {doc.get('version')!r}, this instrumentor reads {MANIFEST_VERSION}"
        )
    return [Region(**r) for r in doc["regions"]]
