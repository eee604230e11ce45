"""How often the ranking takes a model's growth as not settled (`modeler.level_growth`: forms in play
that stay level carry at least 10% of the weight) and ranks it with the constants, and to what
effect. One parameter, x = 4..64, 5 repetitions, multiplicative Gaussian noise, three kinds of
true functions c + a * x^i * log2(x)^j:

- `level`: a = 0 (any ranking above the constants is wrong);
- `flat`: rising 5-40% over the measured range (a small effect whose exponent noise leaves free);
- `rising`: rising 2-11x over it (the rule should never fire).

For each it prints how many models grow, how many are ranked level, and how many are off the
true growth by a whole degree or more, above it (overstated) and below it (understated), ranked by
their own growth and as the ranking does now. Both ways count: a row ranked level takes the
overstated growth of a near-flat region out of the ranking, and takes a real small growth (every
`flat` function grows) down to level (review 109 F4: the overstated count alone hid that).

    python benchmarks/level_growth_rates.py [--series 150] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _args import positive_int  # noqa: E402
from end_slope_rates import FORMS, XS, _term, noisy_series  # noqa: E402 - the same sweep, forms and noise

from modeler.dataset import Dataset  # noqa: E402
from modeler.estimator import PMNFModeler  # noqa: E402
from modeler.growth import growth  # noqa: E402
from modeler.level_growth import LEVEL, level_weight  # noqa: E402

RISE = {"level": (0.0, 0.0), "flat": (0.05, 0.4), "rising": (1.0, 10.0)}


def truths(kind: str, n: int, rng: np.random.Generator) -> list:
    """(true growth, function) pairs: c + a * term rising by a share drawn from `RISE[kind]` of c."""
    out = []
    for _ in range(n):
        form, c = FORMS[rng.integers(len(FORMS))], rng.uniform(0.1, 10)
        a = c * rng.uniform(*RISE[kind]) / (_term(XS[-1], form) - _term(XS[0], form))
        out.append((LEVEL if a == 0 else (float(form[0]), float(form[1])),
                    lambda x, form=form, c=c, a=a: c + a * _term(x, form)))
    return out


def rates(kind: str, noise: float, n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    pairs = truths(kind, n, rng)
    series = noisy_series([f for _, f in pairs], noise, rng)
    at = {"x": 4.0 * XS[-1]}
    grows = ranked_level = over_own = over_ranked = under_own = under_ranked = 0
    for m, (truth, _) in zip(PMNFModeler().fit(Dataset(("x",), series)).models_, pairs):
        own = growth(m.model)
        level = level_weight(m, own, ("x",), at, {"x": float(XS[-1])}) is not None
        ranked = LEVEL if level else own
        grows += own > LEVEL
        ranked_level += level
        over_own += own[0] >= truth[0] + 1
        over_ranked += ranked[0] >= truth[0] + 1
        under_own += own[0] <= truth[0] - 1
        under_ranked += ranked[0] <= truth[0] - 1
    return (f"{kind:6s} noise {100 * noise:3.0f}%: growing {grows:3d}/{n}, ranked level {ranked_level:3d}, "
            f"off by >= 1 degree: overstated own {over_own:3d}, ranked {over_ranked:3d}; "
            f"understated own {under_own:3d}, ranked {under_ranked:3d}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=positive_int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for kind in RISE:
        for noise in (0.0, 0.02, 0.05, 0.1):
            print(rates(kind, noise, args.series, args.seed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
