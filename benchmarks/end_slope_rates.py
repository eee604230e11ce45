"""How often `modeler.end_slope` says a model parts from its values' growth at the end of the sweep,
and whether it is right: on one-term PMNF functions (where any note is a false alarm) and on sums of
two growing terms of one parameter (which the engine fits as one term, review 104 H1), with
multiplicative Gaussian noise, 5 repetitions, x = 4..64. For the sums it prints how many notes
were said, how many of them had the direction of the error at 4x the largest x right ("steepens":
predicted low), and the median error at 4x of the models with and without a note.

    python benchmarks/end_slope_rates.py [--series 150] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _args import positive_int  # noqa: E402

from modeler.dataset import Dataset, Series  # noqa: E402
from modeler.estimator import PMNFModeler  # noqa: E402

XS = (4, 8, 16, 32, 64)
FORMS = [(0.25, 0), (1 / 3, 0), (0.5, 0), (2 / 3, 0), (0.75, 0), (1, 0), (1.25, 0), (1.5, 0), (2, 0), (2.5, 0), (3, 0),
         (0, 1), (0, 2), (0.5, 1), (1, 1), (1, 2), (2, 1)]


def _term(x: float, form: tuple[float, int]) -> float:
    return x ** form[0] * math.log2(x) ** form[1]


def functions(kind: str, n: int, rng: np.random.Generator) -> list:
    out = []
    for _ in range(n):
        if kind == "one":
            form, c, a = FORMS[rng.integers(len(FORMS))], rng.uniform(0.1, 10), rng.uniform(0.1, 10)
            out.append(lambda x, form=form, c=c, a=a: c + a * _term(x, form))
        else:  # two growing terms that cross inside the sweep (within 3x of each other at its middle)
            f1, f2 = sorted(FORMS[t] for t in rng.choice(len(FORMS), 2, replace=False))
            a = rng.uniform(0.1, 10)
            b = a * _term(XS[2], f1) / _term(XS[2], f2) * rng.uniform(0.3, 3)
            out.append(lambda x, f1=f1, f2=f2, a=a, b=b: a * _term(x, f1) + b * _term(x, f2))
    return out


def noisy_series(truths, noise: float, rng: np.random.Generator) -> list[Series]:
    """One series per true function over `XS`, 5 runs a point with normal relative noise."""
    return [Series(f"c{k}", "time", [[x] for x in XS],
                   [[f(x) * (1 + noise * rng.standard_normal()) for _ in range(5)] for x in XS])
            for k, f in enumerate(truths)]


def rates(kind: str, noise: float, n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    truths = functions(kind, n, rng)
    series = noisy_series(truths, noise, rng)
    said, right, err_said, err_not = 0, 0, [], []
    for m, f in zip(PMNFModeler().fit(Dataset(("x",), series)).models_, truths):
        err = float(m.predict([[4 * XS[-1]]])[0]) / f(4 * XS[-1]) - 1
        notes = [w for w in m.warnings if " are likely low" in w or " are likely high" in w]
        if notes:
            said += 1
            right += (err < 0) == notes[0].endswith("likely low")
            err_said.append(abs(err))
        else:
            err_not.append(abs(err))
    med = (lambda v: f"{100 * float(np.median(v)):.0f}%" if v else "-")
    return (f"{kind:4s} noise {100 * noise:4.0f}%: said {said:3d}/{n}, direction right {right}/{said}, "
            f"|error at 4x| median: said {med(err_said)}, not said {med(err_not)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=positive_int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for kind in ("one", "sum"):
        for noise in (0.0, 0.01, 0.02, 0.05, 0.1):
            print(rates(kind, noise, args.series, args.seed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
