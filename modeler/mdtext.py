"""Text from user code (region names, formulas, messages) made safe for markdown.

Call paths can hold any character: a backtick would close a code span early, `*` and `_` start
emphasis, `|` ends a table cell, a newline ends the row, and `&` starts an entity reference. Two
forms: `code` for names and formulas (a code span shows them as they are), `text` for prose such
as warnings.
"""

from __future__ import annotations

import re

_BLANKS = re.compile(r"[\r\n\t]+")
_BACKTICKS = re.compile(r"`+")
# CommonMark's ASCII punctuation that can start markup inline, and `&`, which starts an entity
# reference (`&amp;` in a name renders as `&`, `&lt;x&gt;` as `<x>`: review 69 F6)
_MARKUP = re.compile(r"([\\`*_\[\]<>#|~!&])")


def code(value: object, *, cell: bool = True) -> str:
    """A code span showing `value` as is, on one line: its fence is one backtick longer than the
    longest run inside, with a space of padding where the value starts or ends with one. In a
    table cell (`cell`) `|` is escaped (GitHub reads `\\|` inside a code span in a table as `|`);
    in prose and lists it stays, since there a code span shows a backslash as one."""
    text = _BLANKS.sub(" ", str(value))
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if cell else span


def text(value: object) -> str:
    """`value` as plain text on one line: markup characters backslash-escaped."""
    return _MARKUP.sub(r"\\\1", _BLANKS.sub(" ", str(value)))
