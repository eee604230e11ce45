"""Text from user code (region names, formulas, messages) made safe for markdown.

Call paths can hold any character: a backtick would close a code span early, `*` and `_` start
emphasis, `|` ends a table cell and a newline ends the row. Two forms: `code` for names and
formulas (a code span shows them as they are), `text` for prose such as warnings.
"""

from __future__ import annotations

import re

_BLANKS = re.compile(r"[\r\n\t]+")
_BACKTICKS = re.compile(r"`+")
# CommonMark's ASCII punctuation that can start markup inline
_MARKUP = re.compile(r"([\\`*_\[\]<>#|~!])")


def code(value: object) -> str:
    """A code span showing `value` as is, in one table cell: its fence is one backtick longer than
    the longest run inside, with a space of padding where the value starts or ends with one;
    `|` is escaped for the table (GitHub reads `\\|` inside a code span in a table as `|`)."""
    text = _BLANKS.sub(" ", str(value))
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


def text(value: object) -> str:
    """`value` as plain text on one line: markup characters backslash-escaped."""
    return _MARKUP.sub(r"\\\1", _BLANKS.sub(" ", str(value)))
