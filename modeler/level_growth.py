"""Growth the data do not establish: a model that grows (or falls) while forms that stay level
explain its values about as well.

A region whose values barely change over the measured range, under noise, can be fitted with a
steep term of tiny coefficient: its exponent is almost free. Ranked by that exponent, a near-flat
region came first, above a region growing as n^2 with 130x its time (review 104 M1:
`0.5067 + 9.778e-12 * n^(2) * log2(n)^(2)` for 0.5 + 1e-5 n at 10% noise). Every fitted model
carries the forms in play with their weights (`FittedModel.alternatives`, `modeler.uncertainty`).
Where the forms that do not go the model's way (level, or the other way: toward the target,
`growth.target_growth`) carry at least `LEVEL_WEIGHT` of that weight, the low end of the 80%
prediction range is theirs, and the model's growth is not taken as settled: the row is ranked
with the constant models, its growth shown with a `?`, and a warning names it. As a part (exclusive
time or child) it is level to the parts' rules (`parts_growth.parts_growths`), and a whole/parts
contradiction that goes away with it at the level end of its range is none
(`parts_growth.unsettled_contradictions`; review 109 F3).

How often, and to what effect, is measured by `benchmarks/level_growth_rates.py`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from .growth import growth_text, target_growth
from .listing import listing
from .model import FittedModel, first_of_each_key

if TYPE_CHECKING:
    from .ranking import RankedModel

#: the weight of the level forms in play from which a model's growth is not settled: the share below
#: the 80% prediction range's low end (`ranking.RANGE_LEVEL`)
LEVEL_WEIGHT = 0.1

LEVEL = (0.0, 0.0)


def level_weight(fm: FittedModel, growth: tuple[float, float], parameters: Sequence[str],
                 at: Mapping[str, float], largest: Mapping[str, float] | None) -> float | None:
    """The share of the weight of `fm`'s forms in play whose growth toward `at` is level or goes
    against `growth` (the model's own: rising or falling), where it is at least `LEVEL_WEIGHT`;
    None where it is less, where `growth` is level, or where the model has no forms in play."""
    if growth == LEVEL or len(fm.alternatives) < 2:
        return None
    total = sum(a.weight for a in fm.alternatives)
    if not total > 0:
        return None
    rising = growth > LEVEL
    other = 0.0
    for a in fm.alternatives:
        g = target_growth(a.model, parameters, at, largest)[0]
        if (g <= LEVEL) if rising else (g >= LEVEL):
            other += a.weight
    share = other / total
    return share if share >= LEVEL_WEIGHT else None


def unsettled_growths(models: Iterable[FittedModel], parameters: Sequence[str], at: Mapping[str, float],
                      largest: Mapping[str, float] | None) -> dict[tuple[str, str], tuple[float, float]]:
    """(call path, metric) -> own growth toward `at` (`growth.target_growth`) of each of `models`
    whose growth is not settled (`level_weight`), the first model of a key only. The parts' rules take
    such a part as level, as its row is ranked (`parts_growth.parts_growths`; review 109 F3: the
    near-flat child of review 104 M1, ranked level on its own row, still ranked its parent first
    through the parts' rule)."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for fm in first_of_each_key(models):
        g = target_growth(fm.model, parameters, at, largest)[0]
        if level_weight(fm, g, parameters, at, largest) is not None:
            out[(fm.callpath, fm.metric)] = g
    return out


def level_ends(unsettled: Mapping[tuple[str, str], tuple[float, float]],
               predictions: Mapping[tuple[str, str], float],
               ranges: Mapping[tuple[str, str], tuple[float, float] | None]) -> dict[tuple[str, str], float]:
    """(call path, metric) -> the value at the target of each model whose growth is not settled
    (`unsettled_growths`) were it level: the end of its 80% prediction range that its level forms
    hold (at least `LEVEL_WEIGHT` of the weight, so at least the share outside the range on that
    side), the low end of a rising model's, the high end of a falling one's; its prediction where no
    range is known. The whole/parts checks hold a contradiction only where it stands with these
    values too (`parts_growth.unsettled_contradictions`)."""
    out = {}
    for key, g in unsettled.items():
        value = predictions.get(key)
        rng = ranges.get(key)
        if value is None or rng is None or not math.isfinite(value):
            continue
        out[key] = min(rng[0], value) if g > LEVEL else max(rng[1], value)
    return out


def level_growth_warning(rows: Sequence["RankedModel"]) -> str | None:
    """One warning naming the rows ranked with the constants because their growth is not settled
    (`RankedModel.level_weight`), or None."""
    named = [f"{r.fitted.callpath} ({r.fitted.metric}) {growth_text(r.growth)}, {100 * r.level_weight:.0f}%"
             for r in rows if r.ranked_level()]
    if not named:
        return None
    n = len(named)
    whose = "models'" if n > 1 else "model's"
    return (f"{n} {whose} growth is not settled by the data: forms in play that stay level "
            f"explain {'their' if n > 1 else 'its'} values about as well (their share of the weight): "
            f"{listing(named, 5)}; {'they are' if n > 1 else 'it is'} ranked with the constant models, the growth "
            "shown with a '?'. Values that barely change over the measured range, under noise, leave the exponent "
            "free: measure further along the parameters to settle it")
