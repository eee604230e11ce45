"""Series that are zero at the fewest ranks and above zero at every other point: communication,
which a single rank does not do. A model of all the points bends to fit the zeros (review 43 F5: a
weak-scaling parent took a ÷ranks form, -30% at 1024 ranks, its range missing the truth; its
allreduce child fitted 0.145 + 0.292·log2 p, +9.5%), and nothing said why. One warning names them and
the option that models the others, and that their speedup and efficiency are relative to the fewest
ranks where their time is above 0 (review 66 F1)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .dataset import RANKS_PARAMETER, Series
from .listing import listing
from .pointtext import param_text

#: the other ranks values a series needs for the warning: with fewer, the zeros are most of it
MIN_OTHER_VALUES = 3
#: the metrics whose baseline is the fewest ranks where the time is above 0 (`modeler.aggregate`)
DERIVED_FROM_TIME = ("speedup", "parallel_efficiency")


def zero_at_fewest_ranks_warning(parameters: Sequence[str], series: Sequence[Series],
                                 ranks_parameter: str = RANKS_PARAMETER) -> str | None:
    """The warning, or None; `ranks_parameter`: the parameter that counts the ranks
    (`Dataset.ranks_parameter`: review 109 F2, a rank count named `p` by `--ranks-parameter` got no
    warning)."""
    if ranks_parameter not in parameters:
        return None
    i = list(parameters).index(ranks_parameter)
    named, fewest, timed = [], None, []
    derived = {s.callpath for s in series if s.metric in DERIVED_FROM_TIME}
    for s in series:
        ranks = np.asarray(s.points, dtype=float)[:, i]
        if ranks.size == 0:
            continue
        low = float(ranks.min())
        others = ranks != low
        if np.unique(ranks[others]).size < MIN_OTHER_VALUES:
            continue
        values = s.values()
        if np.all(values[~others] == 0) and np.all(values[others] > 0):
            named.append(f"{s.callpath} ({s.metric})")
            fewest = low if fewest is None else min(fewest, low)
            if s.metric == "time" and s.callpath in derived:
                timed.append(s.callpath)
    if not named:
        return None
    n, at = len(named), f"{ranks_parameter}={param_text(fewest)}"
    return (f"{n} series {'are' if n > 1 else 'is'} 0 at the fewest ranks ({at}) and above 0 at every "
            f"other point (communication, which one rank does not do): {listing(named, 5)}; a model of all the points bends "
            f"to fit the zeros, and so does each caller's: --exclude {at} models the others"
            + (f"; the speedup and parallel_efficiency of {'these call paths' if len(timed) > 1 else timed[0]} "
               f"are relative to the fewest ranks where {'their' if len(timed) > 1 else 'its'} time is above 0"
               if timed else ""))
