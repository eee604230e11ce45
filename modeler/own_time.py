"""Say where a top-level region's time is its own: code in no instrumented child.

The ranking is of inclusive time, so a `main` that grows because of what it runs itself (the DDP
constructor's connection set-up, an import that the first optimizer step triggers: calls into
libraries, which are not instrumented) shows growth that no child explains (review 15: 81% of
`main` at 4 ranks was its own). One note per such top-level call path points at its exclusive time.
"""

from __future__ import annotations

from typing import Collection, Sequence

import numpy as np

from .dataset import Series
from .listing import listing
from .pointtext import point_text

SEPARATOR = "->"
#: a top-level call path whose exclusive time is at least this share of its time is named
OWN_SHARE = 0.5


def own_time_note(measured: Sequence[Series], parameters: Sequence[str],
                  among: Collection[str] | None = None) -> str | None:
    """One note naming the top-level call paths (of `among`, the call paths shown, where given) with
    children whose own (exclusive) time is at least OWN_SHARE of their time at the point where their
    time is largest, or None."""
    time = {s.callpath: s for s in measured if s.metric == "time" and SEPARATOR not in s.callpath
            and (among is None or s.callpath in among)}
    own = {s.callpath: s for s in measured if s.metric == "exclusive_time" and s.callpath in time}
    parents = {s.callpath.split(SEPARATOR, 1)[0] for s in measured if s.metric == "time" and SEPARATOR in s.callpath}
    named = []
    for cp in sorted(time.keys() & own.keys() & parents):
        t, e = time[cp], own[cp]
        values = t.values()
        if not len(values):
            continue
        i = int(np.argmax(values))
        point = tuple(t.points[i])
        match = [j for j, p in enumerate(e.points) if tuple(p) == point]
        if not match or values[i] <= 0:
            continue
        share = float(e.values()[match[0]]) / float(values[i])
        if share >= OWN_SHARE:
            at = point_text(parameters, point)
            named.append(f"{cp} {share * 100:.0f}% at {at}")
    if not named:
        return None
    n = len(named)
    return (f"{n} top-level region{'s' if n > 1 else ''} spend{'' if n > 1 else 's'} most of {'their' if n > 1 else 'its'} "
            f"time in {'their' if n > 1 else 'its'} own code, in no instrumented child: {listing(named, 5)}; that is "
            "calls into libraries (a DDP constructor's set-up, imports, the first call of a compiled function): "
            "`--metric exclusive_time` models it")
