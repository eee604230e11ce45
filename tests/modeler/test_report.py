"""The report's findings and their HTML / markdown rendering, on a synthetic sweep with known times."""

from __future__ import annotations

import math
import re

import pytest

from modeler.errors import InputError
from modeler.report.assemble import ReportOptions, build_report, parse_assignments
from modeler import mdtext
from modeler.report.render import render_html, render_markdown
from .test_report_synth import ODD_NAME, STEPS, hand_models, load_sweep, write_sweep


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = write_sweep(tmp_path_factory.mktemp("report") / "runs")
    groups, dataset = load_sweep(root)
    return groups, dataset, hand_models(dataset)


@pytest.fixture(scope="module")
def report(sweep):
    groups, dataset, models = sweep
    return build_report(groups, dataset, models, ReportOptions(target={"ranks": 64, "batch": 128}))


def leaf(callpath: str) -> str:
    return callpath.rsplit("->", 1)[-1]


def test_ranking_puts_the_worst_growth_first(report):
    order = [leaf(r.callpath) for r in report.ranking]
    assert report.ranking[0].growth_key == (2.0, 0.0)
    assert order.index("load_batch") < order.index("Model.forward") < order.index(ODD_NAME)
    assert order.index("all_reduce") < order.index(ODD_NAME)
    # the headline names the deepest region with the worst growth, not `main`, which inherits it
    assert leaf(report.headline().callpath) == "load_batch"
    wait = next(r for r in report.ranking if leaf(r.callpath) == "load_batch")
    assert wait.predicted == pytest.approx(STEPS * (0.0005 + 1e-5 * 64 * 128))
    # x growth: prediction at the target over the prediction at the largest measured point (6, 128)
    assert wait.factor == pytest.approx((0.0005 + 1e-5 * 64 * 128) / (0.0005 + 1e-5 * 6 * 128))


def test_predicted_run_time_and_cost_at_the_target(report):
    main = next(r for r in report.ranking if r.callpath == "main")
    assert report.predicted_total == pytest.approx(main.predicted)  # `main` is the only top-level region
    assert report.predicted_cost == pytest.approx(main.predicted * 64)
    assert "a cost of **" in render_markdown(report)


def test_design_counts_completed_and_failed_runs(report):
    design = dict(report.design)
    assert design["runs completed"] == "50 of 51"
    assert design["parameter ranks"] == "1, 2, 3, 4, 6"
    assert design["parameter batch"] == "8, 16, 32, 64, 128"
    assert design["repetitions per configuration"] == "2"
    assert [run for run, _ in report.failed] == ["p2-n8-broken"]
    assert "rank1" in report.failed[0][1]
    env = dict(report.environment)
    assert env["torch"] == "2.13.0" and env["host"] == "testhost"


def test_imbalance_names_the_slow_rank(report):
    assert report.imbalance_run == "p6-n128-r0"
    top = report.imbalance[0]
    assert leaf(top["callpath"]) == "Model.forward"
    assert top["slowest"] == 5
    # the last of 6 ranks is 30% slower: max / mean - 1 = 1.3 / (1 + 0.3 / 6) - 1
    assert top["imbalance"] == pytest.approx(1.3 / 1.05 - 1, rel=1e-3)
    assert report.slowest_ranks[0][0] == 5
    balanced = next(r for r in report.imbalance if leaf(r["callpath"]) == "all_reduce")
    assert balanced["imbalance"] == pytest.approx(0.0, abs=1e-9) and balanced["lost"] >= 0


def test_step_split_matches_the_written_step_records(report):
    row = next(r for r in report.training_table if r["ranks"] == 4 and r["batch"] == 32)
    assert row["data_wait"] == pytest.approx(0.0005 + 1e-5 * 4 * 32, rel=0.02)
    assert row["comm"] == pytest.approx(0.002 * math.log2(4), rel=0.02)
    assert row["compute"] == pytest.approx(row["mean_step"] - row["data_wait"] - row["comm"])
    assert row["steps"] == STEPS and row["runs"] == 2
    assert len(report.training_table) == 25  # the broken run is not a configuration of its own


def test_scaling_table_follows_its_definitions(report, sweep):
    groups = sweep[0]
    assert report.scaling_axis == "ranks" and report.scaling_held == {"batch": 128.0}
    rows = {r["ranks"]: r for r in report.scaling_table}
    assert sorted(rows) == [1, 2, 3, 4, 6]
    t = {p: sorted(g.time_ns() * 1e-9 for g in groups if g.ok and g.params == {"ranks": p, "batch": 128.0})
         for p in rows}
    for p, row in rows.items():
        median = sum(t[p]) / len(t[p])  # two repetitions: the median is their mean
        assert row["time"] == pytest.approx(median)
        assert row["weak_eff"] == pytest.approx(rows[1]["time"] / median)
        assert row["strong_eff"] == pytest.approx(row["weak_eff"] / p)
        assert row["cost"] == pytest.approx(median * p)


def test_call_tree_nests_and_keeps_exclusive_time(report):
    assert report.tree_run == "p6-n128-r0" and report.tree_rank == 0
    (main,) = report.tree
    assert main.name == "main" and main.share == pytest.approx(1.0)
    epoch = main.children[0].children[0]
    assert epoch.name == "train_epoch"
    assert [c.name for c in epoch.children] == ["Model.forward", "load_batch", "all_reduce"]
    assert epoch.excl_s + sum(c.incl_s for c in epoch.children) == pytest.approx(epoch.incl_s, rel=1e-6)
    assert report.tree_lines()[0].startswith("main  ")
    assert report.tree_lines()[3].startswith("      Model.forward")
    rows = report.tree_rows()
    assert [r["node"].name for r in rows][:4] == ["main", "train", "train_epoch", "Model.forward"]
    assert rows[3]["depth"] == 3 and rows[3]["ancestors"] == "0 1 2" and not rows[3]["children"]
    assert rows[2]["children"]


def test_html_is_one_self_contained_file(report):
    html = render_html(report)
    assert html.startswith("<!DOCTYPE html>")
    # nothing fetched: no external scripts, styles, images or fonts
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)=""", html)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)
    assert "@import" not in html and "url(" not in html
    n_regions = len(report.regions)
    # per region: one chart per parameter and a heat map
    assert html.count("<svg") >= n_regions * 3
    for v in report.regions:
        assert f'id="{v.row.anchor}"' in html


def test_html_escapes_region_names(report):
    html = render_html(report)
    assert ODD_NAME not in html and "<lambda>" not in html
    assert "Odd.&lt;lambda&gt;&amp;" in html


def test_markdown_carries_the_same_ranking(report):
    md = render_markdown(report)
    section = md[md.index("## Scaling ranking"):md.index("## Training")]
    ranked = [line.split("|")[2].strip() for line in section.splitlines() if re.match(r"\| \d+ \| ", line)]
    expected = [mdtext.code(r.callpath) for r in report.ranking]
    assert ranked == expected
    assert "Run `p6-n128-r0` (ranks=6, batch=128, repetition 0). Slowest ranks: rank 5" in md  # review 80 LOW-3: and its point
    assert "p2-n8-broken" in md
    assert "| 4 | 32 |" in md  # the training table has one row per configuration


def test_top_limits_the_detailed_regions_not_the_ranking(sweep):
    groups, dataset, models = sweep
    r = build_report(groups, dataset, models, ReportOptions(top=2))
    assert len(r.regions) == 2 and len(r.ranking) == len(models)
    # without --at the target is the largest measured point
    assert r.target == {"ranks": 6.0, "batch": 128.0}
    assert r.ranking[0].factor == pytest.approx(1.0)


def test_chosen_run_and_rank_are_shown(sweep):
    groups, dataset, models = sweep
    r = build_report(groups, dataset, models, ReportOptions(run_id="p3-n16-r1", rank=2))
    assert r.imbalance_run == r.tree_run == "p3-n16-r1" and r.tree_rank == 2
    assert r.imbalance[0]["slowest"] == 2


@pytest.mark.parametrize(
    "options, fragment",
    [
        (ReportOptions(metric="bytes"), "--metric"),
        (ReportOptions(target={"nodes": 4}), "--at: unknown parameter(s) nodes"),
        (ReportOptions(hold={"size": 1}), "--hold: unknown parameter(s) size"),
        (ReportOptions(run_id="nope"), "--run: no run 'nope'"),
        (ReportOptions(run_id="p2-n8-r0", rank=7), "--rank: run p2-n8-r0 has no rank 7"),
        (ReportOptions(top=0), "--top"),
    ],
)
def test_bad_options_are_named(sweep, options, fragment):
    groups, dataset, models = sweep
    with pytest.raises(InputError, match=re.escape(fragment)):
        build_report(groups, dataset, models, options)


def test_parse_assignments():
    assert parse_assignments("ranks=4, batch=64", "--hold") == {"ranks": 4.0, "batch": 64.0}
    assert parse_assignments(None, "--hold") == {}
    with pytest.raises(InputError, match="--hold: 'ranks:4' is not NAME=VALUE"):
        parse_assignments("ranks:4", "--hold")
    with pytest.raises(InputError, match="--hold"):
        parse_assignments("ranks=four", "--hold")


def test_runs_without_steps_or_ranks_still_render(tmp_path):
    """A single-rank sweep without training loops: the training and rank views say why they are empty."""
    from modeler.dataset import Dataset, Series
    from modeler.model import Factor, FittedModel, Model, Term
    import numpy as np

    ds = Dataset(("n",), [Series("main", "time", np.array([[1.0], [2.0], [4.0], [8.0], [16.0]]),
                                 tuple(np.array([0.1 * v]) for v in (1, 2, 4, 8, 16)), "s")])
    fm = FittedModel("main", "time", Model(("n",), 0.0, (Term(0.1, (Factor("n", 1.0),)),)), 0.0, 0.0, 1.0, None, 5)
    r = build_report([], ds, [fm])
    html = render_html(r)
    assert "No step or epoch records" in html and "No completed run" in html
    assert dict(r.design) == {"parameter n": "1, 2, 4, 8, 16", "call paths measured": "1"}
    assert r.ranking[0].growth == "deg 1"  # worded as `modeler fit` words it (review 69 F1)
    md = render_markdown(r)
    assert "No step or epoch records" in md


def test_a_warning_every_model_has_is_said_once(sweep):
    from dataclasses import replace

    groups, dataset, models = sweep
    noisy = [replace(m, warnings=("only 2 values of ranks",) + (("cut off",) if i == 0 else ()))
             for i, m in enumerate(models)]
    r = build_report(groups, dataset, noisy)
    assert "every model: only 2 values of ranks" in r.warnings
    assert sorted(w for row in r.ranking for w in row.warnings) == ["cut off"]
    html = render_html(r)
    assert html.count("only 2 values of ranks") == 1


def test_a_held_value_that_was_not_measured_falls_back_to_a_measured_line(sweep):
    groups, dataset, models = sweep
    r = build_report(groups, dataset, models, ReportOptions(hold={"batch": 33.0, "ranks": 4.0}, top=1))
    charts = [str(c) for c in r.regions[0].charts]
    assert "against ranks (batch=128)" in charts[0]  # batch=33 was never run: the longest line instead
    assert "against batch (ranks=4)" in charts[1]


def test_ranks_left_out_by_rank_selection_do_not_count(sweep):
    """With SCALEPROBE_RANKS=1-3 rank 0 writes a file with an empty profile: not slow, not fast, absent."""
    from dataclasses import replace

    groups, dataset, models = sweep
    g = next(g for g in groups if g.run_id == "p4-n32-r0")
    unprofiled = replace(g, ranks=[replace(g.ranks[0], profile={})] + g.ranks[1:])
    others = [x for x in groups if x.run_id != g.run_id]
    r = build_report(others + [unprofiled], dataset, models, ReportOptions(run_id="p4-n32-r0"))
    forward = next(row for row in r.imbalance if leaf(row["callpath"]) == "Model.forward")
    assert len(forward["times"]) == 3 and forward["slowest"] == 3
    assert forward["imbalance"] == pytest.approx(1.3 / ((1 + 1 + 1.3) / 3) - 1, rel=1e-3)
    assert r.tree_rank == 1  # the first rank that was profiled


def test_a_time_model_far_from_its_parts_is_a_report_warning():
    """The report says when a parent's time model and its exclusive time plus children disagree."""
    from modeler.dataset import Dataset, Series
    from modeler.model import Factor, FittedModel, Model, Term
    import numpy as np

    x = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    ds = Dataset(("n",), [Series(cp, "time", x, tuple(np.array([v]) for v in (1, 2, 4, 8, 16)), "s")
                          for cp in ("main", "main->a")])

    def fm(cp, metric, c, e):
        return FittedModel(cp, metric, Model(("n",), 0.0, (Term(c, (Factor("n", e),)),)), 0.0, 0.0, 1.0, None, 5)

    # at n=64: main predicts 64^2 / 16 = 256, its parts 0.1 * 64 + 64 = 70.4
    models = [fm("main", "time", 1 / 16, 2.0), fm("main->a", "time", 1.0, 1.0)]
    excl = [fm("main", "exclusive_time", 0.1, 1.0)]
    r = build_report([], ds, models, ReportOptions(target={"n": 64}), companions=excl)
    assert any(w.startswith("main: its time model predicts 256 at n=64") and "70.4" in w for w in r.warnings)
    assert any("extrapolates badly" in w for w in render_markdown(r).splitlines())
    assert not any("extrapolates badly" in w for w in build_report([], ds, models, ReportOptions(target={"n": 64})).warnings)


def test_the_overview_card_shows_strong_and_weak_scaling_efficiency(report):
    """Review 15: the card showed the strong-scaling efficiency only (6%), meaningless for a sweep
    that keeps the work per rank (its weak-scaling efficiency was 25%, in the table only)."""
    last = report.scaling_table[-1]
    html = render_html(report)
    assert f'{last["strong_eff"] * 100:.0f}% &middot; {last["weak_eff"] * 100:.0f}%</div>' in html
    assert f"parallel efficiency at {last['ranks']:g} ranks: strong scaling" in html
