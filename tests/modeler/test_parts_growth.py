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
    # neither figure is sure to be the better one (review 108 F2: the parts' sum was as far off)
    assert said[0].endswith("compare both with a larger run")
    table = render(ranking, "table")
    assert "deg 2.5 (parts)" in table
    assert rows[("main->fit", "time")].to_json()["growth_from_parts"] == {"exponent": 2.5, "log_exponent": 0.0}


def test_without_its_exclusive_time_a_whole_keeps_its_growth():
    # the rest may be its own work, which no part models
    tree = [fm for fm in _tree() if fm.metric != "exclusive_time"]
    ranking = rank_models(tree, ("b", "w"), {"b": 256.0, "w": 96.0})
    rows = {r.fitted.callpath: r for r in ranking.rows}
    assert rows["main->fit"].parts_growth is None and rows["main->init"].parts_growth is None
    assert not [w for w in ranking.warnings if "grow faster" in w]
    # main (deg 2.75, 7.3 at the target) is below its child fit (deg 2.92, 31): a whole is at least
    # each of its parts, whatever its own work, so fit's growth ranks it (review 71 F3)
    assert rows["main"].parts_growth == (5 / 3 + 1.25, 0.0)


def _n(cp, metric, constant, *terms):
    model = Model(("n",), constant, tuple(Term(c, (Factor("n", e),)) for c, e in terms))
    return FittedModel(cp, metric, model, smape=5.0, rss=0.1, ar2=0.9, cv_smape=None, points=10)


def _underfit_chain(with_exclusive=True):
    # review 71 F3: a step whose time is n^2 + n was fitted n^1.5, and so was every caller; the n^2
    # leaf, exact, carries most of the step's time at n=6400
    tree = [
        _n("main", "time", 0.05, (1.3e-4, 1.5)),
        _n("main->step", "time", 0.05, (7.9e-5, 1.5)),
        _n("main->step->quadratic", "time", 0.0, (1.005e-6, 2.0)),
        _n("main->step->linear", "time", 0.0, (1.0e-3, 1.0)),
    ]
    if with_exclusive:
        tree += [_n("main", "exclusive_time", 0.01), _n("main->step", "exclusive_time", 0.01)]
    return tree


def test_a_whole_growing_slower_than_parts_carrying_most_of_its_time_is_ranked_by_theirs():
    ranking = rank_models(_underfit_chain(), ("n",), {"n": 6400.0})
    rows = {(r.fitted.callpath, r.fitted.metric): r for r in ranking.rows}
    assert rows[("main->step", "time")].growth == (1.5, 0.0)
    assert rows[("main->step", "time")].parts_growth == (2.0, 0.0)
    # main's only heavy part is the step, whose figure is its parts' (deepest first)
    assert rows[("main", "time")].parts_growth == (2.0, 0.0)
    assert rows[("main->step->quadratic", "time")].parts_growth is None
    order = [r.fitted.callpath for r in ranking.rows if r.fitted.metric == "time"]
    # the leaf that grows so comes before the callers it lifts, larger as they are
    assert order == ["main->step->quadratic", "main", "main->step", "main->step->linear"]
    said = [w for w in ranking.warnings if "slower than parts that carry at least 50%" in w]
    assert len(said) == 1 and "main->step (deg 1.5, parts deg 2)" in said[0] and "main (deg 1.5" in said[0]
    assert not [w for w in ranking.warnings if "faster than every one" in w]
    assert "deg 2 (parts)" in render(ranking, "table")


def test_the_slower_rule_needs_no_exclusive_time():
    # a whole is at least each of its parts whatever its own work
    ranking = rank_models(_underfit_chain(with_exclusive=False), ("n",), {"n": 6400.0})
    rows = {(r.fitted.callpath, r.fitted.metric): r for r in ranking.rows}
    assert rows[("main->step", "time")].parts_growth == (2.0, 0.0)


def test_a_fast_part_with_a_small_share_does_not_lift_its_whole():
    # the quadratic leaf is 1% of the step at the target: the step keeps its own growth
    tree = [
        _n("main", "time", 0.05, (1.0, 1.0)),
        _n("main", "exclusive_time", 0.01),
        _n("main->step", "time", 0.05, (1.0, 1.0)),
        _n("main->step", "exclusive_time", 0.0, (0.99, 1.0)),
        _n("main->step->quadratic", "time", 0.0, (0.01 / 6400, 2.0)),
    ]
    ranking = rank_models(tree, ("n",), {"n": 6400.0})
    assert all(r.parts_growth is None for r in ranking.rows)
    assert not [w for w in ranking.warnings if "slower than parts" in w]


def test_parts_that_only_together_carry_most_of_the_whole_lift_it_by_the_slower_of_them():
    # two children of deg 2.25 and 2 with 40% each: together 80%, so the sum grows at least as deg 2
    tree = [
        _n("main", "time", 0.0, (100.0 / 6400 ** 1.5, 1.5)),
        _n("main->a", "time", 0.0, (40.0 / 6400 ** 2.25, 2.25)),
        _n("main->b", "time", 0.0, (40.0 / 6400 ** 2, 2.0)),
        _n("main->c", "time", 0.0, (20.0 / 6400, 1.0)),
    ]
    mean = {r.fitted.callpath: r for r in rank_models(tree, ("n",), {"n": 6400.0}).rows}
    assert mean["main"].parts_growth == (2.0, 0.0)
    # under --ranks max the whole is only known to be at least each part: none carries half alone
    most = {r.fitted.callpath: r for r in rank_models(tree, ("n",), {"n": 6400.0}, combine="max").rows}
    assert most["main"].parts_growth is None
