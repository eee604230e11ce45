"""Synthetic call paths with known PMNF functions, the oracle ceiling and the known-form floor.

Used by benchmarks/modeler_vs_extrap.py and by the engine tests in tests/modeler/. True functions are
drawn from the PMNF space the modelers search: each call path depends on 1..P of the parameters,
combined in one of Extra-P's structures (products, sums and mixtures), each factor an
`x^i * log2(x)^j` from the 42 hypotheses; every term is given a visible share of the value.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modeler.model import Factor, Model, Term
from modeler.pmnf.hypotheses import EXPONENTS, N_HYPOTHESES, basis
from modeler.pmnf.lstsq import wls
from modeler.pmnf.structures import extrap_structures

PARAMETERS = ("p", "n", "m")
VALUES = {"p": (2, 4, 8, 16, 32), "n": (5, 10, 15, 20, 25), "m": (10, 20, 30, 40, 50)}
#: the constant is drawn log-uniformly from this range
CONSTANT_RANGE = (1.0, 100.0)
#: each term's value at the largest measured point, over the constant: drawn log-uniformly from this range
SHARE_RANGE = (0.5, 20.0)


@dataclass(frozen=True)
class TrueFunction:
    model: Model
    active: tuple[int, ...]  # parameters the function depends on
    structure: tuple[tuple[int, ...], ...]  # terms as tuples of positions in `active`
    hypotheses: tuple[int, ...]  # hypothesis index per active parameter


def grid(n_params: int) -> np.ndarray:
    names = PARAMETERS[:n_params]
    return np.array(list(itertools.product(*[VALUES[p] for p in names])), dtype=float)


def target_point(n_params: int) -> np.ndarray:
    """4x the largest value of every parameter: where users act on the predictions."""
    return np.array([[4.0 * max(VALUES[p]) for p in PARAMETERS[:n_params]]])


def draw_function(rng: np.random.Generator, n_params: int) -> TrueFunction:
    names = PARAMETERS[:n_params]
    k = int(rng.integers(1, n_params + 1))
    active = tuple(sorted(rng.choice(n_params, size=k, replace=False).tolist()))
    structures = extrap_structures(k)
    structure = structures[int(rng.integers(len(structures)))]
    hyps = tuple(int(h) for h in rng.integers(N_HYPOTHESES, size=k))
    constant = float(10 ** rng.uniform(*np.log10(CONSTANT_RANGE)))
    top = np.array([[max(VALUES[p]) for p in names]], dtype=float)
    terms = []
    for term in structure:
        factors = tuple(
            Factor(names[active[i]], float(EXPONENTS[hyps[i]][0]), int(EXPONENTS[hyps[i]][1])) for i in term
        )
        unit = Term(1.0, factors).evaluate({names[j]: top[:, j] for j in range(n_params)})[0]
        share = 10 ** rng.uniform(*np.log10(SHARE_RANGE))
        terms.append(Term(float(constant * share / unit), factors))
    return TrueFunction(Model(names, constant, tuple(terms)), active, structure, hyps)


def make_case(seed: int, n_params: int, n_paths: int, noise: float, reps: int = 5):
    """(true functions, points, values (paths, points, reps)) with uniform multiplicative noise ±noise."""
    rng = np.random.default_rng(seed)
    funcs = [draw_function(rng, n_params) for _ in range(n_paths)]
    pts = grid(n_params)
    exact = np.array([f.model.evaluate(pts) for f in funcs])
    values = exact[:, :, None] * (1.0 + rng.uniform(-noise, noise, size=exact.shape + (reps,)))
    return funcs, pts, values


def write_jsonl(path: Path, n_params: int, pts: np.ndarray, values: np.ndarray) -> None:
    names = PARAMETERS[:n_params]
    with open(path, "w") as f:
        for i in range(values.shape[0]):
            for j, pt in enumerate(pts):
                f.write(
                    json.dumps(
                        {
                            "params": {names[d]: int(pt[d]) for d in range(n_params)},
                            "callpath": f"main->f{i}",
                            "metric": "time",
                            "value": [float(v) for v in values[i, j]],
                        }
                    )
                    + "\n"
                )


def oracle(func: TrueFunction, pts: np.ndarray, y: np.ndarray) -> Model:
    """Knows which parameters, which structure; picks the exponents with the least relative squared
    error (in-sample). Exhaustive for up to 2 parameters, coordinate-wise (3 sweeps) for 3."""
    names = PARAMETERS[: pts.shape[1]]
    bases = [basis(pts[:, p]) for p in range(pts.shape[1])]
    w = 1.0 / y**2
    k = len(func.active)

    def design(hyps: np.ndarray) -> np.ndarray:  # hyps (C, k) -> (C, n, 1 + terms)
        cols = [np.ones((hyps.shape[0], len(y)))]
        for term in func.structure:
            col = np.ones((hyps.shape[0], len(y)))
            for i in term:
                col = col * bases[func.active[i]][hyps[:, i]]
            cols.append(col)
        return np.stack(cols, axis=-1)

    def rss(hyps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = design(hyps)
        res = wls(X, np.broadcast_to(y, X.shape[:2]), np.broadcast_to(w, X.shape[:2]))
        r = (y[None] - res.fitted) ** 2 * w[None]
        return np.where(np.isfinite(r.sum(-1)), r.sum(-1), np.inf), res.coef

    if k <= 2:
        combos = np.array(list(itertools.product(range(N_HYPOTHESES), repeat=k)))
    else:
        combos = None
    if combos is not None:
        scores = np.concatenate([rss(combos[i : i + 256])[0] for i in range(0, len(combos), 256)])
        best = combos[int(np.nanargmin(scores))]
    else:
        best = np.full(k, 18)  # start from x^1, not from the truth
        for _ in range(3):
            for i in range(k):
                trial = np.repeat(best[None], N_HYPOTHESES, axis=0)
                trial[:, i] = np.arange(N_HYPOTHESES)
                best = trial[int(np.nanargmin(rss(trial)[0]))]
    coef = rss(best[None])[1][0]
    terms = []
    for j, term in enumerate(func.structure):
        factors = tuple(
            Factor(names[func.active[i]], float(EXPONENTS[best[i]][0]), int(EXPONENTS[best[i]][1])) for i in term
        )
        terms.append(Term(float(coef[1 + j]), factors))
    return Model(names, float(coef[0]), tuple(terms))


def known_form(func: TrueFunction, pts: np.ndarray, y: np.ndarray) -> Model:
    """The floor: knows the exact form (terms and exponents) and fits only the coefficients, with
    the same relative least squares. Its error at the target is what the noise alone leaves; a
    modeler that must also find the form cannot be expected to do better on average."""
    names = func.model.parameters
    at = {names[j]: pts[:, j] for j in range(pts.shape[1])}
    X = np.stack([np.ones(len(y))] + [Term(1.0, t.factors).evaluate(at) for t in func.model.terms], axis=-1)
    coef = wls(X[None], y[None], (1.0 / y**2)[None]).coef[0]
    return Model(names, float(coef[0]), tuple(Term(float(coef[1 + j]), t.factors) for j, t in enumerate(func.model.terms)))
