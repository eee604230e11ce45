"""The Bayes bound: what the best possible modeler could reach on the benchmark's synthetic data.

It knows what no real modeler knows: how `_synthetic.draw_function` draws the functions (how many
parameters have a term, which ones, the structure, the exponents, the ranges of the constant and
of each term's share) and the noise level. From the mean of each point's repetitions it weighs
every form the generator can draw by its posterior probability: a Gaussian likelihood of the
relative residuals (the mean of 5 uniform draws is close to normal), the coefficients integrated
out by Laplace's approximation under the generator's log-uniform priors, and the generator's prior
over forms. It then predicts at the target point with the rule that is best for a given criterion:

- `mean_choice`: the least expected relative error (a weighted median of the forms' predictions);
- `within_choice`: the greatest probability that the relative error is at most `t`. Over many call
  paths this minimizes the expected share whose error exceeds `t`, so when even this rule leaves
  more than 10% of the errors above `t`, no modeler can expect a 90th percentile at or below `t`.

It sees only the means, as every modeler that does not assume the shape of the noise; the exact
likelihood of uniform noise would pin each value between bounds, which real run times do not give.
Enumerating every form is feasible for 1 and 2 parameters (84 and 7,140 forms); 3 parameters would
need 1.7 million per call path. There `posterior(..., exponents=L)` keeps every one-parameter form
but builds the forms of 2 and 3 parameters from the L best exponents of each parameter alone
(leave-one-out ranking on the averaged lines, `modeler.pmnf.single`): about 40,000 forms per call
path for L = 10. Forms outside that set are taken to weigh nothing; on the benchmark's 200 call
paths with 3 parameters and 10% noise, L = 16 gave the same errors as L = 10.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from _synthetic import CONSTANT_RANGE, SHARE_RANGE

from modeler.pmnf.hypotheses import N_HYPOTHESES, basis
from modeler.pmnf.lstsq import wls
from modeler.pmnf.points import extrap_lines
from modeler.pmnf.single import ranked_single
from modeler.pmnf.structures import extrap_structures

#: parameter counts the bound enumerates every form for (beyond: only with `exponents`)
MAX_PARAMS = 2
#: forms whose posterior weight is below this share are left out of the decisions
_NEGLIGIBLE = 1e-12
#: the coefficient priors' edges are softened by a normal tail of this width in log space, so that the
#: Laplace approximation (taken at the unconstrained fit) stays smooth at the edges
_EDGE = 0.05
#: log weight of a sign the generator never draws (a coefficient below zero)
_WRONG_SIGN = -50.0


@dataclass(frozen=True)
class Posterior:
    """Per call path: the predictions at the target of the forms that carry weight, their weights
    (summing to 1) and the standard deviation of each prediction from its coefficients' uncertainty."""

    pred: list[np.ndarray]
    weight: list[np.ndarray]
    sd: list[np.ndarray]


def _forms(
    n_params: int, options: list[np.ndarray] | None = None
) -> tuple[np.ndarray, list[tuple[tuple[int, ...], tuple, tuple[int, ...]]]]:
    """(log prior (M,), forms as (active parameters, structure, hypothesis per active parameter)).
    `options`: per parameter, the hypotheses that forms with 2 or more parameters use (all: None);
    each form keeps the prior it has among all forms."""
    prior, forms = [], []
    for k in range(1, n_params + 1):
        subsets = list(itertools.combinations(range(n_params), k))
        structures = extrap_structures(k)
        lp = -np.log(n_params) - np.log(len(subsets)) - np.log(len(structures)) - k * np.log(N_HYPOTHESES)
        for active in subsets:
            hyp_sets = [range(N_HYPOTHESES) if k == 1 or options is None else options[a] for a in active]
            for st in structures:
                for hyps in itertools.product(*hyp_sets):
                    prior.append(lp)
                    forms.append((active, st, hyps))
    return np.array(prior), forms


def _layout(bases: list[np.ndarray], n_params: int, options: list[np.ndarray] | None):
    """(log prior (M,), design (M, 1 + J, columns), number of terms (M,)) of the forms."""
    log_prior, forms = _forms(n_params, options)
    M, J = len(forms), max(len(st) for _, st, _ in forms)
    cols = bases[0].shape[1]
    design = np.zeros((M, 1 + J, cols))
    design[:, 0] = 1.0
    n_terms = np.zeros(M, dtype=int)
    for m, (active, st, hyps) in enumerate(forms):
        n_terms[m] = len(st)
        for j, term in enumerate(st):
            col = np.ones(cols)
            for i in term:
                col = col * bases[active[i]][hyps[i]]
            design[m, 1 + j] = col
    return log_prior, design, n_terms


def _soft_range(logx: np.ndarray, lo: float, hi: float) -> np.ndarray:
    d = np.maximum(np.log(lo) - logx, 0.0) + np.maximum(logx - np.log(hi), 0.0)
    return -0.5 * (d / _EDGE) ** 2


def posterior(
    points: np.ndarray, target: np.ndarray, means: np.ndarray, noise: float, reps: int, exponents: int | None = None
) -> Posterior:
    """The posterior over the generator's forms for every call path; `means` (S, n) are the means of
    each point's `reps` repetitions with uniform multiplicative noise of +-`noise`. `exponents`: build
    the forms of several parameters from this many best exponents per parameter (needed beyond
    `MAX_PARAMS` parameters)."""
    S, n = means.shape
    P = points.shape[1]
    if P < 1 or (P > MAX_PARAMS and not exponents):
        raise ValueError(f"the Bayes bound enumerates forms for 1 to {MAX_PARAMS} parameters, not {P} "
                         "(pass exponents= to limit the forms of several parameters)")
    if noise <= 0:
        raise ValueError("the Bayes bound needs noise above 0 (noise-free data have one exact form)")
    top = points.max(axis=0)
    # columns: the n measured points, the target, and the largest measured point (for the shares)
    cols = np.concatenate([points, target.reshape(1, P), top.reshape(1, P)])
    bases = [basis(cols[:, p]) for p in range(P)]
    ranked = None
    if exponents:
        ranked = [ranked_single(line.x, means @ line.weights.T, exponents).order for line in extrap_lines(points)]
    shared = None if ranked else _layout(bases, P, None)
    s2 = noise**2 / 3.0 / reps  # relative variance of the mean of `reps` uniform draws
    log_c, log_s = np.log(CONSTANT_RANGE), np.log(SHARE_RANGE)
    out = Posterior([], [], [])
    for s in range(S):
        log_prior, design, n_terms = shared or _layout(bases, P, [r[s] for r in ranked])
        M, J = design.shape[0], design.shape[1] - 1
        used = np.arange(J)[None, :] < n_terms[:, None]  # (M, J): which term slots a form has
        unit = np.where(used, design[:, 1:, n + 1], 1.0)  # each term's value at the largest measured point
        at = design[:, :, n]
        X = np.swapaxes(design[:, :, :n], -1, -2)
        y = means[s]
        w = 1.0 / y**2
        res = wls(X, np.broadcast_to(y, (M, n)), np.broadcast_to(w, (M, n)), cov=True)
        coef, inv = res.coef, res.xtwx_inv
        rss = (w * (y - res.fitted) ** 2).sum(-1)
        with np.errstate(all="ignore"):
            _, logdet_inv = np.linalg.slogdet(inv)  # padding slots carry 1 on the diagonal: no effect
            c = coef[:, 0]
            beta = coef[:, 1:]
            share = beta * unit / c[:, None]
            lc = np.log(np.abs(c))
            log_coef_prior = (
                -lc - np.log(log_c[1] - log_c[0]) + _soft_range(lc, *CONSTANT_RANGE) + np.where(c > 0, 0.0, _WRONG_SIGN)
            )
            per_term = (
                -np.log(np.abs(beta)) - np.log(log_s[1] - log_s[0])
                + _soft_range(np.log(np.abs(share)), *SHARE_RANGE) + np.where(share > 0, 0.0, _WRONG_SIGN)
            )
            log_coef_prior = log_coef_prior + np.where(used, per_term, 0.0).sum(-1)
            lw = -0.5 * rss / s2 + 0.5 * (1 + n_terms) * np.log(2 * np.pi * s2) + 0.5 * logdet_inv
            lw = lw + log_coef_prior + log_prior
            pred = np.einsum("mk,mk->m", at, coef)
            var = s2 * np.einsum("mk,mkl,ml->m", at, inv, at)
        lw = np.where(np.isfinite(lw) & np.isfinite(pred) & np.isfinite(var), lw, -np.inf)
        wt = np.exp(lw - lw.max())
        wt /= wt.sum()
        keep = wt > _NEGLIGIBLE
        out.pred.append(pred[keep])
        out.weight.append(wt[keep] / wt[keep].sum())
        out.sd.append(np.sqrt(np.maximum(var[keep], 0.0)))
    return out


def mean_choice(post: Posterior) -> np.ndarray:
    """Per call path, the prediction with the least expected relative error: minimizing
    sum_m w_m |x - f_m| / f_m over x gives the median of the f_m weighted by w_m / f_m."""
    out = []
    for f, w in zip(post.pred, post.weight):
        order = np.argsort(f)
        cum = np.cumsum((w / np.abs(f))[order])
        out.append(f[order][np.searchsorted(cum, cum[-1] / 2)])
    return np.array(out)


def within_choice(post: Posterior, t: float, candidates: int = 200) -> np.ndarray:
    """Per call path, the prediction (among the `candidates` heaviest forms') with the greatest
    posterior probability that its relative error is at most `t`, each form's prediction taken as
    normal with its coefficients' uncertainty."""
    from scipy.special import ndtr

    out = []
    for f, w, sd in zip(post.pred, post.weight, post.sd):
        x = f[np.argsort(-w)[:candidates]]
        sd = np.maximum(sd, 1e-300)
        # |x - f| <= t f  <=>  x / (1 + t) <= f <= x / (1 - t)  (for f > 0, t < 1)
        lo, hi = x[:, None] / (1 + t), x[:, None] / (1 - t)
        prob = ((ndtr((hi - f[None]) / sd[None]) - ndtr((lo - f[None]) / sd[None])) * w[None]).sum(-1)
        out.append(x[np.argmax(prob)])
    return np.array(out)
