"""Line maps from instrumented lines back to original lines, and compiling with original lines.

An instrumented file cannot keep its line numbers (a `try:` needs a line of its own), so:
- build mode writes `OUT/.scaleprobe/linemap.json` (`{relpath: [orig line of out line 1, 2, ...]}`),
  which the runtime applies to tracebacks;
- the import hook compiles the instrumented AST after setting every node's line back to the original
  one, under the original file name, so tracebacks need no mapping at all (`runtime.original_lines`
  does the same for a built tree's modules at run time, and owns `remap_tree` and `indent_shifts`).

The inserted lines are recognised by the shapes `emit.py` gives them; everything else is an original
line, in order, where the rewriter's `splits` say how many lines each original line became (a one-line
`def f(): a; b` became three; `"doc"; x = 1` two). An inserted line is always a statement of its own, so
a line inside a string, or one continuing a statement (after a backslash, inside brackets), is an
original line whatever it reads (`for i in r: \\` puts the loop's inline mark at the start of the next
line; a help text may quote probe code): where the shapes alone leave doubt (the counts disagree, or a
guard's `try:` could be a line of a string), the code is tokenized and only the lines where a logical
line starts can be inserted ones (`logical_starts`). Should the counts still disagree, the stripped
lines are aligned in order instead (`_aligned_linemap`).
"""

from __future__ import annotations

import re
import tokenize
from collections.abc import Collection, Mapping

# Bumped when line maps or column points of the same source change: cached rewrites are redone.
MAP_FORMAT = 3

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


def inserted_lines(out_lines: list[str], starts: Collection[int] | None = None) -> list[bool]:
    """Per line, whether instrumenting inserted it. `starts`: the (0-based) lines where a logical line
    of the code starts (`logical_starts`); only those can be inserted lines (None: judge by the text)."""
    return _inserted(out_lines, starts)[0]


def _inserted(out_lines: list[str], starts: Collection[int] | None) -> tuple[list[bool], bool]:
    """(inserted_lines, doubtful): doubtful when, judged by the text alone, a guard's `try:` was taken
    across a multi-line string (the `try:` found could be a line of the string)."""
    flags = [False] * len(out_lines)
    doubtful = False
    stripped = [line.strip() for line in out_lines]
    for i, text in enumerate(stripped):
        if flags[i] or "__sp_" not in text or (starts is not None and i not in starts):
            continue
        if text.startswith("__sp_") or (text.startswith(("from runtime.probe import", "import nvtx as __sp_"))):
            flags[i] = True
        elif _PROLOGUE.match(text):
            flags[i] = True
            if i + 1 < len(stripped) and stripped[i + 1] == "try:" and (starts is None or i + 1 in starts):
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
                if (stripped[j] == "try:" and len(out_lines[j]) - len(out_lines[j].lstrip()) == indent
                        and (starts is None or j in starts)):
                    flags[j] = True
                    # a `try:` inside the guarded statement is a line of a string that ends below it
                    doubtful = doubtful or (starts is None and any(
                        '"""' in line or "'''" in line or line.endswith("\\") for line in out_lines[j + 1:i]))
                    break
    return flags, doubtful


def logical_starts(out_lines: list[str]) -> set[int] | None:
    """The (0-based) lines of the code where a logical line starts: not those inside a string, after
    a backslash or inside brackets (nor blank or comment lines). None where the code does not tokenize."""
    lines = iter([line + "\n" for line in out_lines])  # counted as split_lines counts them
    starts: set[int] = set()
    new = True
    skip = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    try:
        for kind, _, (row, _), _, _ in tokenize.generate_tokens(lambda: next(lines, "")):
            if kind == tokenize.NEWLINE:
                new = True
            elif new and kind not in skip:
                starts.add(row - 1)
                new = False
    except Exception:  # tokenize.TokenError, SyntaxError (IndentationError), ...: judge by the text
        return None
    return starts


def inserted_in(out_lines: list[str], originals: int | None = None) -> list[bool]:
    """`inserted_lines` of the code, tokenized where its text leaves doubt: `originals` (how many
    original lines the code holds; None: unknown) disagrees with the text's count, or a guard's
    `try:` may be a line of a string. Tokenizing every file would cost 13 to 15% of a rewrite
    (Python 3.11, the standard library); the text alone decides for every file there."""
    flags, doubtful = _inserted(out_lines, None)
    if doubtful or originals is None or len(out_lines) - sum(flags) != originals:
        starts = logical_starts(out_lines)
        if starts is not None:
            flags = inserted_lines(out_lines, starts)
    return flags


def compute_linemap(source: str, code: str, splits: Mapping[int, int] | None = None) -> list[int]:
    """For each line of `code` (index 0 = line 1), the 1-based line of `source` it came from.

    `splits`: original line -> how many more lines of `code` it became (beyond its own)."""
    orig = split_lines(source)
    out = split_lines(code)
    splits = splits or {}
    originals = len(orig) + sum(splits.values())
    flags = inserted_in(out, originals)
    if len(out) - sum(flags) == originals:
        order = iter([n for n in range(1, len(orig) + 1) for _ in range(1 + splits.get(n, 0))])
        result, current = [], 0
        for flag in flags:
            if not flag:
                current = next(order)
            result.append(max(current, 1))
        return result
    return _aligned_linemap(orig, out, flags, splits)



def _aligned_linemap(orig: list[str], out: list[str], flags: list[bool],
                     splits: Mapping[int, int] | None = None) -> list[int]:
    """Walk both in order: a line that follows an original line the rewriter split (`splits`) stays on
    it as often as the split says; equal lines advance together; a line equal to one of the next few
    original lines skips to it (the lines between were taken for inserted ones); a line found inside
    the previous original line is the tail of a one-line `def f(): body` that became a block; anything
    else is an original line we changed in place (`for b in __sp_iterate__(7, loader):`)."""
    a = [line.strip() for line in orig]
    splits = splits or {}
    result, i, more = [], 0, 0
    for flag, line in zip(flags, out):
        text = line.strip()
        if not flag:
            if more:
                more -= 1
            elif i < len(a) and a[i] == text:
                i += 1
                more = splits.get(i, 0)
            elif (ahead := _ahead(a, i, text)) is not None:
                i = ahead + 1
                more = splits.get(i, 0)
            elif not (i > 0 and text and text in a[i - 1]) and i < len(a):
                i += 1
                more = splits.get(i, 0)
        result.append(max(i, 1))
    return result


_AHEAD = 8


def _ahead(a: list[str], i: int, text: str) -> int | None:
    """The index of the first of the original lines after a[i] (a few) that `text` equals, where the
    text is a statement of some length that instrumenting does not change."""
    if len(text) < 8 or "__sp_" in text:
        return None
    for k in range(i + 1, min(i + 1 + _AHEAD, len(a))):
        if a[k] == text:
            return k
    return None


def changed_lines(source: str, code: str, linemap: list[int], splits: Mapping[int, int] | None = None) -> set[int]:
    """Out lines (1-based) that hold original code but not as the original line did (a one-line
    def's body, an inline loop body after its mark, a bracketed yield): see positions.py. `splits`
    as for `compute_linemap`, whose judgement of the inserted lines this repeats."""
    orig = split_lines(source)
    out = split_lines(code)
    flags = inserted_in(out, len(orig) + sum((splits or {}).values()))
    changed = set()
    for i, (text, line, flag) in enumerate(zip(out, linemap, flags)):
        before = orig[line - 1] if 0 < line <= len(orig) else ""
        if not flag and before.strip() != text.strip():
            changed.add(i + 1)
    return changed
