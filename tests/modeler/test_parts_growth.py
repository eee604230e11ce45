"""Review 62 F3: a call path whose time model grows faster than every one of its parts (a sum
cannot) is ranked by its fastest part's growth, marked, and named in a warning."""

from __future__ import annotations

from modeler.model import Factor, FittedModel, Model, Term
from modeler.outputs import render
from modeler.ranking import rank_models


def _fm(cp, metric, constant, *terms):
    model = Model(("b", "w"), constant, tuple(Term(c, tuple(Factor(p, e) for p, e in fs)) for c, fs in terms))
    return FittedModel(cp, metric, model, smape=5.0, rss=0.1, ar2=0.9, cv_smape=None, points=25)


def _tree():
    # the training loop's model came out deg 2.92 (b^(5/3) * w^(5/4)) over a child of deg 2.5 that is
    # nearly all of it, and `main` deg 2.75 over both; the innermost region grows as deg 2.5 too
    return [
        _fm("main", "time", 1.3, (3e-6, (("b", 2.0), ("w", 0.75)))),
        _fm("main", "exclusive_time", 0.01),
        _fm("main->fit", "time", 0.2, (1e-5, (("b", 5 / 3), ("w", 1.25)))),
        _fm("main->fit", "exclusive_time", 0.01),
        _fm("main->fit->step", "time", 0.1, (2e-4, (("b", 1.0), ("w", 1.5)))),
        _fm("main->init", "time", 1.3),
    ]


def test_a_whole_growing_faster_than_all_its_parts_is_ranked_by_its_fastest_part():
    ranking = rank_models(_tree(), ("b", "w"), {"b": 256.0, "w": 96.0})
    rows = {(r.fitted.callpath, r.fitted.metric): r for r in ranking.rows}
    assert rows[("main->fit", "time")].growth == (5 / 3 + 1.25, 0.0)
    assert rows[("main->fit", "time")].parts_growth == (2.5, 0.0)
    # main's parts: its own time, init (constant) and fit, whose figure is its parts' (deepest first)
    assert rows[("main", "time")].parts_growth == (2.5, 0.0)
    assert rows[("main->fit->step", "time")].parts_growth is None  # no parts modeled
    order = [r.fitted.callpath for r in ranking.rows if r.fitted.metric == "time"]
    # all three grow as deg 2.5 now, the larger prediction first as for any tie (it was fit, main, step:
    # the innermost region last, which grows as fast as any)
    assert order[:3] == ["main->fit->step", "main->fit", "main"]
    said = [w for w in ranking.warnings if "grow faster than every one of their parts" in w]
    assert len(said) == 1 and "main->fit (deg 2.92, parts deg 2.5)" in said[0]
    table = render(ranking, "table")
    assert "deg 2.5 (parts)" in table
    assert rows[("main->fit", "time")].to_json()["growth_from_parts"] == {"exponent": 2.5, "log_exponent": 0.0}


def test_without_its_exclusive_time_a_whole_keeps_its_growth():
    # the rest may be its own work, which no part models
    tree = [fm for fm in _tree() if fm.metric != "exclusive_time"]
    ranking = rank_models(tree, ("b", "w"), {"b": 256.0, "w": 96.0})
    assert all(r.parts_growth is None for r in ranking.rows)
    assert not [w for w in ranking.warnings if "grow faster" in w]
