"""What an engine returns for a group of series that share one point set."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: a factor is (parameter position, hypothesis index); a term is a tuple of factors
TermSpec = tuple[tuple[int, int], ...]


@dataclass
class GroupFit:
    """Chosen models of the series `index` (positions in the dataset), all measured at `points`.

    `X[s]` is series s's final design matrix (first column the constant, then one column per term,
    zero-padded), `coef[s]` its coefficients, `w[s]` the least-squares weights it was fitted with;
    `terms[s]` describes the columns after the constant.
    """

    index: list[int]
    points: np.ndarray
    y: np.ndarray  # (S, n) the values fitted
    X: np.ndarray  # (S, n, k)
    coef: np.ndarray  # (S, k)
    w: np.ndarray  # (S, n)
    terms: list[list[TermSpec]]
    #: per series, [(weight, terms, coefficients, covariance)] of the forms in play, the chosen one
    #: among them (`modeler.pmnf.alternatives`); None where the engine gives none
    alternatives: list[list[tuple]] | None = None
    #: (SMAPE, RSS) per series as the engine reports them where they are not the in-sample values
    #: (Extra-P's single-parameter modeler reports its leave-one-out costs); None: in-sample
    reported: tuple[np.ndarray, np.ndarray] | None = None
    #: per series, the number of predictors the adjusted R^2 counts where it is not the number of
    #: terms: Extra-P's multi-parameter hypotheses count the factors of every term (review 110
    #: MED-1: `x * y` is two); None: the terms
    predictors: np.ndarray | None = None

    def rows(self, rows: np.ndarray) -> "GroupFit":
        """The fit of some of the group's series (`rows`, indices into it)."""
        def pick(a):
            return None if a is None else [a[r] for r in rows]

        return GroupFit([self.index[r] for r in rows], self.points, self.y[rows], self.X[rows], self.coef[rows],
                        self.w[rows], pick(self.terms), pick(self.alternatives),
                        None if self.reported is None else tuple(v[rows] for v in self.reported),
                        None if self.predictors is None else self.predictors[rows])

    def scaled(self, factor: np.ndarray) -> "GroupFit":
        """The same fit for values multiplied by `factor` (S,): what fitting `y * factor` gives,
        since least squares and every choice made on relative errors are scale-free. The weights
        `w` stay as they are: they matter only up to a factor per series."""
        f = np.asarray(factor, dtype=float)
        alternatives = None
        if self.alternatives is not None:
            alternatives = [
                [(wt, terms, coef * fs, cov * fs * fs) for wt, terms, coef, cov in alts]
                for alts, fs in zip(self.alternatives, f)
            ]
        reported = None
        if self.reported is not None:
            reported = (self.reported[0], self.reported[1] * f * f)
        return GroupFit(self.index, self.points, self.y * f[:, None], self.X, self.coef * f[:, None],
                        self.w, self.terms, alternatives, reported, self.predictors)


def term_columns(bases: list[np.ndarray], hyp: np.ndarray, term: tuple[int, ...]) -> np.ndarray:
    """Values (S, n) of one product term for every series; `hyp[:, p]` is series s's hypothesis for
    parameter p and `bases[p]` the (N_HYPOTHESES, n) basis of parameter p at the points."""
    out = None
    for p in term:
        col = bases[p][hyp[:, p]]
        out = col if out is None else out * col
    return out
