"""Lists in messages: the first few items, then how many more."""

from __future__ import annotations

from typing import Sequence


def listing(items: Sequence[str], most: int, more: str = "more") -> str:
    """`a, b, c and 4 more`: at most `most` items named, the rest counted (`more` names them)."""
    text = ", ".join(items[:most])
    return text + (f" and {len(items) - most} {more}" if len(items) > most else "")
