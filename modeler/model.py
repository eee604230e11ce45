"""Performance models in PMNF: a constant plus a sum of terms, each a product of x^i * log2(x)^j.

These are plain values shared by the fitting engine, the outputs and the report; nothing here fits.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from .predict_points import checked_points


@functools.lru_cache(maxsize=4096)
def format_exponent(e: float) -> str:
    """`2`, `3/2`, `0.37`: a small fraction when the exponent is one, else a decimal. Cached: a few
    dozen exponents recur in every model's formula, and Fraction costs 14 µs a call."""
    f = Fraction(e).limit_denominator(12)
    if abs(float(f) - e) < 1e-9:
        return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"
    return f"{e:.4g}"


@dataclass(frozen=True)
class Factor:
    """x^exponent * log2(x)^log_exponent for one parameter x."""

    parameter: str
    exponent: float = 0.0
    log_exponent: int = 0

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        out = np.ones_like(x)
        if self.exponent:
            out = out * np.power(x, self.exponent)
        if self.log_exponent:
            out = out * np.power(np.log2(x), self.log_exponent)
        return out

    def formula(self) -> str:
        parts = []
        if self.exponent:
            parts.append(f"{self.parameter}^({format_exponent(self.exponent)})")
        if self.log_exponent:
            parts.append(f"log2({self.parameter})^({self.log_exponent})")
        return " * ".join(parts)

    def to_json(self) -> dict:
        return {"parameter": self.parameter, "exponent": float(self.exponent), "log_exponent": int(self.log_exponent)}


@dataclass(frozen=True)
class Term:
    coefficient: float
    factors: tuple[Factor, ...]

    def evaluate(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        out = np.asarray(self.coefficient, dtype=float)
        for f in self.factors:
            out = out * f.evaluate(columns[f.parameter])
        return out

    def shape(self) -> tuple[tuple[str, float, int], ...]:
        """The term without its coefficient: what "recovering the model form" compares."""
        return tuple(sorted((f.parameter, float(f.exponent), int(f.log_exponent)) for f in self.factors))

    def to_json(self) -> dict:
        return {"coefficient": float(self.coefficient), "factors": [f.to_json() for f in self.factors]}


@dataclass(frozen=True)
class Model:
    """constant + sum(terms), over `parameters` (the order of point coordinates)."""

    parameters: tuple[str, ...]
    constant: float
    terms: tuple[Term, ...] = ()

    def evaluate(self, points: np.ndarray | Mapping[str, Sequence[float]]) -> np.ndarray:
        """Values at points given as an (n, n_parameters) array or as a mapping name -> values."""
        columns, n = self._columns(points)
        out = np.full(n, float(self.constant))
        for t in self.terms:
            out = out + t.evaluate(columns)
        return out

    def design(self, points: np.ndarray | Mapping[str, Sequence[float]]) -> np.ndarray:
        """(n, 1 + len(terms)): 1, then each term's value without its coefficient, at the points."""
        columns, n = self._columns(points)
        cols = [np.ones(n)] + [np.broadcast_to(Term(1.0, t.factors).evaluate(columns), (n,)) for t in self.terms]
        return np.stack(cols, axis=-1)

    def _columns(self, points: np.ndarray | Mapping[str, Sequence[float]]) -> tuple[dict[str, np.ndarray], int]:
        if isinstance(points, Mapping):
            columns = {p: np.asarray(points[p], dtype=float) for p in self.parameters if p in points}
            return columns, (len(next(iter(columns.values()))) if columns else 1)
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        return {p: pts[:, i] for i, p in enumerate(self.parameters)}, pts.shape[0]

    def shape(self) -> frozenset:
        return frozenset(t.shape() for t in self.terms)

    def growth(self) -> tuple[float, float]:
        """Asymptotic growth as (sum of exponents, sum of log exponents) of the fastest-growing term."""
        best = (0.0, 0.0)
        for t in self.terms:
            g = (sum(f.exponent for f in t.factors), float(sum(f.log_exponent for f in t.factors)))
            best = max(best, g)
        return best

    def formula(self, digits: int | None = 6) -> str:
        """The model as text, its coefficients to `digits` significant digits; `None`: each the
        shortest text that reads back as the same float (JSON and CSV, whose `model` is then the
        model that `terms` and `prediction` are of; review 121 LOW-4: 6 digits there, 6.9e-6 apart)."""
        def text(v: float) -> str:
            return repr(float(v)) if digits is None else f"{v:.{digits}g}"

        # a model split over ranks (modeler.strong_scaling) often has no constant left: not "0 + ..."
        parts = [] if self.constant == 0 and self.terms else [text(self.constant)]
        for t in self.terms:
            coef = text(t.coefficient)
            body = " * ".join(f.formula() for f in t.factors if f.formula())
            parts.append(f"{coef} * {body}" if body else coef)
        return " + ".join(parts).replace("+ -", "- ")

    def __str__(self) -> str:
        return self.formula()

    def to_json(self) -> dict:
        return {
            "model": self.formula(digits=None),
            "constant": float(self.constant),
            "terms": [t.to_json() for t in self.terms],
        }


@dataclass(frozen=True, eq=False)
class Alternative:
    """A form that explains a series about as well as the chosen one: its weight (the
    alternatives of a model sum to 1), the fitted model and the covariance of its coefficients
    (constant first, then the terms', in the model's order)."""

    weight: float
    model: Model
    cov: np.ndarray


@dataclass(frozen=True)
class FittedModel:
    """A model chosen for one series, with its fit quality.

    `interval` is (low, high) multipliers of a prediction from the repetition spread, or None.
    `alternatives` are the forms in play with their weights (the chosen model among them), from
    which `prediction_range` draws; empty where the engine gives none (`compat="extrap"`, too
    few points). `miss` says where the model misses its own measurements (`modeler.misfit`).
    """

    callpath: str
    metric: str
    model: Model
    smape: float
    rss: float
    ar2: float
    cv_smape: float | None
    points: int
    interval: tuple[float, float] | None = None
    warnings: tuple[str, ...] = field(default=())
    alternatives: tuple[Alternative, ...] = field(default=(), compare=False)
    #: how the model misses its own measurements (`modeler.misfit`: more than 2x from every
    #: repetition at one of its points), or None
    miss: str | None = None
    #: (passes, the model fitted without the runs of those repetition passes) for each pass (or
    #: group of consecutive passes), where the runs name their passes and differ (`modeler.passes`);
    #: `prediction_range` holds their predictions
    pass_models: tuple[tuple[tuple[int, ...], Model], ...] = field(default=(), compare=False)
    #: how its values differ between the two measured values of a parameter that has no term
    #: (`modeler.levels.LevelEffect`), beyond their noise; empty where they do not
    levels: tuple = field(default=(), compare=False)
    #: ((parameter, level), the model fitted on that level's points alone) for the `levels` whose
    #: dependence the model does not follow (`LevelEffect.modeled_at` None): `prediction_range` holds
    #: their predictions
    level_models: tuple[tuple[tuple[str, float], Model], ...] = field(default=(), compare=False)

    def predict(self, points: np.ndarray | Mapping[str, Sequence[float]]) -> np.ndarray:
        """The model's values at `points`, given and checked as `PMNFModeler.predict` takes them."""
        return self.model.evaluate(self._checked(points))

    def _checked(self, points: np.ndarray | Mapping[str, Sequence[float]], alternatives: bool = False,
                 passes: bool = False) -> np.ndarray:
        """`points` checked (`checked_points`) against this model, and against the forms in play
        (`alternatives`) and the `pass_models` (`passes`) where the figures asked for draw on them."""
        forms = [(f"the form in play {a.model.formula(4)} of {self.callpath} [{self.metric}]", a.model)
                 for a in (self.alternatives if alternatives else ())]
        forms += [(f"the model of {self.callpath} [{self.metric}] without pass(es) {', '.join(map(str, k))}", m)
                  for k, m in (self.pass_models if passes else ())]
        forms += [(f"the model of {self.callpath} [{self.metric}] at {p}={v:g} alone", m)
                  for (p, v), m in (self.level_models if passes else ())]
        return checked_points(points, self.model.parameters, [self], forms)

    def prediction_range(
        self, points: np.ndarray | Mapping[str, Sequence[float]], level: float = 0.8
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(low, high) at the points: the central `level` of the predictions of the alternative
        forms with their coefficients' uncertainty (see `modeler.uncertainty`), stretched to hold
        this model's own prediction and those of its `pass_models`; None without alternatives."""
        from .passes import hull
        from .uncertainty import mixture_range, with_prediction

        if not self.alternatives:
            return None
        points = self._checked(points, alternatives=True, passes=True)
        with np.errstate(all="ignore"):
            own = self.model.evaluate(points)
            lo, hi = with_prediction(*mixture_range(self.alternatives, points, level), own)
            lo, hi = hull(lo, hi, self.pass_values(points), own)
            return hull(lo, hi, self.level_values(points), own)

    def level_values(self, points: np.ndarray | Mapping[str, Sequence[float]]) -> np.ndarray:
        """The `level_models`' predictions at points taken as they are, shape (levels, n_points)."""
        if not self.level_models:
            return np.empty((0, 0))
        with np.errstate(all="ignore"):
            return np.array([np.asarray(m.evaluate(points), dtype=float).reshape(-1) for _, m in self.level_models])

    def pass_predictions(self, points: np.ndarray | Mapping[str, Sequence[float]]) -> np.ndarray:
        """The `pass_models`' predictions at the points, shape (passes, n_points)."""
        points = self._checked(points, passes=True)
        return self.pass_values(points)

    def pass_values(self, points: np.ndarray | Mapping[str, Sequence[float]]) -> np.ndarray:
        """`pass_predictions` at points taken as they are (NaN where a model is not defined), for
        the modeler's own use."""
        if not self.pass_models:
            return np.empty((0, 0))
        with np.errstate(all="ignore"):
            return np.array([np.asarray(m.evaluate(points), dtype=float).reshape(-1) for _, m in self.pass_models])

    def to_json(self) -> dict:
        d = {"callpath": self.callpath, "metric": self.metric}
        d.update(self.model.to_json())
        d.update(
            smape=float(self.smape),
            rss=float(self.rss),
            ar2=float(self.ar2),
            cv_smape=None if self.cv_smape is None else float(self.cv_smape),
            points=int(self.points),
            interval=None if self.interval is None else [float(v) for v in self.interval],
            warnings=list(self.warnings),
            miss=self.miss,
            levels=[e.to_json() for e in self.levels],
            alternatives=[{"weight": float(a.weight), "model": a.model.formula(digits=None)} for a in self.alternatives],
        )
        return d


def first_of_each_key(models: Iterable[FittedModel]) -> Iterator[FittedModel]:
    """The first of `models` of each (call path, metric): the one whose row is ranked."""
    seen: set[tuple[str, str]] = set()
    for fm in models:
        if (key := (fm.callpath, fm.metric)) not in seen:
            seen.add(key)
            yield fm
