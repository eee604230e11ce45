"""Line maps from instrumented lines back to original lines, and compiling with original lines.

An instrumented file cannot keep its line numbers (a `try:` needs a line of its own), so:
- build mode writes `OUT/.scaleprobe/linemap.json` (`{relpath: [orig line of out line 1, 2, ...]}`),
  which the runtime applies to tracebacks;
- the import hook compiles the instrumented AST after setting every node's line back to the original
  one, under the original file name, so tracebacks need no mapping at all (`runtime.original_lines`
  does the same for a built tree's modules at run time, and owns `remap_tree` and `indent_shifts`).

The inserted lines are recognised by the shapes `emit.py` gives them; everything else is an original
line, in order, where the rewriter's `splits` say how many lines each original line became (a one-line
`def f(): a; b` became three; `"doc"; x = 1` two). Should the counts still disagree, the stripped
lines are aligned in order instead (`_aligned_linemap`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Bumped when line maps or column points of the same source change: cached rewrites are redone.
MAP_FORMAT = 2

_NEWLINE = re.compile(r"\r\n|\r|\n")
_PROLOGUE = re.compile(r"if __sp_on__: __sp_(?:enter|push)__\(")
_EPILOGUE = re.compile(r"if __sp_on__: __sp_(?:exit|pop)__\(")
_MARK = re.compile(r"if __sp_on__: __sp_mark__\(")
# The one-line clause of the guard of a statement that suspends (emit.guarded); its `try:` is the
# nearest one above at the same indentation (everything between is the statement, indented deeper).
# A user's `finally:` that re-enters first (emit.reenter_first) has its own code after a `;`.
_GUARD_CLAUSE = re.compile(r"(?:finally: __sp_back__\(\) and [^;]*|except BaseException: __sp_back__\(\) and [^;]*; raise)$")


def split_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer counts them (str.splitlines also splits on form feeds)."""
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def inserted_lines(out_lines: list[str]) -> list[bool]:
    flags = [False] * len(out_lines)
    stripped = [line.strip() for line in out_lines]
    for i, text in enumerate(stripped):
        if flags[i] or "__sp_" not in text:
            continue
        if text.startswith("__sp_") or (text.startswith(("from runtime.probe import", "import nvtx as __sp_"))):
            flags[i] = True
        elif _PROLOGUE.match(text):
            flags[i] = True
            if i + 1 < len(stripped) and stripped[i + 1] == "try:":
                flags[i + 1] = True
        elif _MARK.match(text):
            flags[i] = True
        elif _EPILOGUE.match(text):
            if i > 0 and stripped[i - 1] == "finally:":
                flags[i - 1] = flags[i] = True
        elif _GUARD_CLAUSE.match(text):
            flags[i] = True
            indent = len(out_lines[i]) - len(out_lines[i].lstrip())
            for j in range(i - 1, -1, -1):
                if stripped[j] == "try:" and len(out_lines[j]) - len(out_lines[j].lstrip()) == indent:
                    flags[j] = True
                    break
    return flags


def compute_linemap(source: str, code: str, splits: Mapping[int, int] | None = None) -> list[int]:
    """For each line of `code` (index 0 = line 1), the 1-based line of `source` it came from.

    `splits`: original line -> how many more lines of `code` it became (beyond its own)."""
    orig = split_lines(source)
    out = split_lines(code)
    flags = inserted_lines(out)
    splits = splits or {}
    if len(out) - sum(flags) == len(orig) + sum(splits.values()):
        order = iter([n for n in range(1, len(orig) + 1) for _ in range(1 + splits.get(n, 0))])
        result, current = [], 0
        for flag in flags:
            if not flag:
                current = next(order)
            result.append(max(current, 1))
        return result
    return _aligned_linemap(orig, out, flags)


def _aligned_linemap(orig: list[str], out: list[str], flags: list[bool]) -> list[int]:
    """Walk both in order: equal lines advance together; a line found inside the previous original
    line is the tail of a one-line `def f(): body` that became a block; anything else is an
    original line we changed in place (`for b in __sp_iterate__(7, loader):`)."""
    a = [line.strip() for line in orig]
    result, i = [], 0
    for flag, line in zip(flags, out):
        text = line.strip()
        if not flag:
            if i < len(a) and a[i] == text:
                i += 1
            elif not (i > 0 and text and text in a[i - 1]) and i < len(a):
                i += 1
        result.append(max(i, 1))
    return result


def changed_lines(source: str, code: str, linemap: list[int]) -> set[int]:
    """Out lines (1-based) that hold original code but not as the original line did (a one-line
    def's body, an inline loop body after its mark, a bracketed yield): see positions.py."""
    orig = split_lines(source)
    out = split_lines(code)
    changed = set()
    for i, (text, line, flag) in enumerate(zip(out, linemap, inserted_lines(out))):
        before = orig[line - 1] if 0 < line <= len(orig) else ""
        if not flag and before.strip() != text.strip():
            changed.add(i + 1)
    return changed
