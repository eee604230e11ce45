"""Where the ranking takes a model's fastest term as minor (`modeler.minor_terms`: under 5% of the
value at the target, at least 4x the largest measured point) and ranks it by the growth of the terms
that carry the value, and where it keeps a small real term's growth (review 123 LOW-5).

Two parameters, ranks = 1, 2, 4, 8 and batch = 16..256, 3 runs a point, multiplicative Gaussian
noise. True functions `rest + b * ranks^k`, the ranks term carrying a share s of the value at the
largest measured point (ranks=8, batch=256), with `rest` either `c + a * batch` (the batch term 95%
of it there: the loader of review 123, whose contention term was ranks^(3/2)) or a constant `c`
(the ranks term the only growing one: the rule never applies). Printed per k, rest, s and noise:
how many fits have the ranks term as their leading term (own growth above deg 1 with `rest` the
batch, above deg 0 with a constant), and how many of those are ranked by the slower growth, at the
default target (the largest point) and at ranks=64.

    python benchmarks/minor_term_rates.py [--series 40] [--seed 1]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _args import positive_int  # noqa: E402

from modeler.dataset import Dataset, Series  # noqa: E402
from modeler.estimator import PMNFModeler  # noqa: E402
from modeler.ranking import rank_models  # noqa: E402

RANKS, BATCH = (1.0, 2.0, 4.0, 8.0), (16.0, 32.0, 64.0, 128.0, 256.0)
PARAMETERS = ("ranks", "batch")
TARGETS = {"largest": {"ranks": 8.0, "batch": 256.0}, "ranks=64": {"ranks": 64.0, "batch": 256.0}}


def series(k: float, rest: str, share: float, noise: float, n: int, rng: np.random.Generator) -> list[Series]:
    out = []
    for j in range(n):
        c = rng.uniform(0.1, 10.0)
        # the rest at the largest point: c alone, or c as 5% of c + a * batch
        a = 19.0 * c / BATCH[-1] if rest == "batch" else 0.0
        top = c + a * BATCH[-1]
        b = share / (1 - share) * top / RANKS[-1] ** k
        pts, values = [], []
        for r, x in itertools.product(RANKS, BATCH):
            pts.append((r, x))
            values.append((c + a * x + b * r ** k) * (1 + noise * rng.standard_normal(3)))
        out.append(Series(f"main->f{j}", "time", np.array(pts), values))
    return out


def rates(k: float, rest: str, share: float, noise: float, n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    data = series(k, rest, share, noise, n, rng)
    models = PMNFModeler().fit(Dataset(PARAMETERS, data)).models_
    text = f"ranks^{k:<3g} rest {rest:5s} share {100 * share:3.0f}% noise {100 * noise:2.0f}%:"
    floor = (1.0, 0.0) if rest == "batch" else (0.0, 0.0)
    for name, at in TARGETS.items():
        rows = rank_models(models, PARAMETERS, at, measured=data).rows
        lead = [r for r in rows if r.growth > floor]
        minor = sum(r.ranked_minor() for r in lead)
        text += f"  {name}: ranks term leads {len(lead):3d}/{n}, ranked minor {minor:3d}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=positive_int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for k, rest, share, noise in itertools.product((1.5, 2.0), ("batch", "const"), (0.01, 0.03, 0.1),
                                                   (0.01, 0.05)):
        print(rates(k, rest, share, noise, args.series, args.seed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
