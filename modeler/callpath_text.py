"""A region's name as one step of a call path.

Call paths are region names joined with `->` (`main->train->Model.forward`), and every consumer
splits them there again: parents and leaves (`modeler.parts`, `modeler.share`, the report), the
Extra-P export (Extra-P splits on `->` too). A name that holds `->` itself (`runtime.manual.region`
takes any string) would read as two regions and merge with a real call path of those two: review 69
F3, manual region `a->b` under `main` and region `b` under `main->a` became one series
`main->a->b`, the sum of both. So a `>` that follows a `-` and any backslashes gets one more
backslash before it: `a->b` is `a-\\>b`, a name `a-\\>b` is `a-\\\\>b`. The step then never holds
`->`, and no two names give the same step; names without `->` (or `-\\>`) are unchanged.
"""

from __future__ import annotations

import re

SEPARATOR = "->"

_ARROW = re.compile(r"-(\\*)>")


def step(name: str) -> str:
    """`name` as it stands in a call path: without `->` (see the module's text)."""
    return _ARROW.sub(lambda m: f"-{m.group(1)}\\>", name) if "-" in name else name
