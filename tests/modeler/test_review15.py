"""Review 15 (a src-layout package, as a new user): the report's headline run time says what makes
it doubtful, next to it; DDP's all-reduce has a time (tests/modeler/test_readers_runs.py)."""

from __future__ import annotations

import json
from pathlib import Path

from modeler import cli

WIDTH = (32, 64, 128, 256, 512)


def _write(path: Path, values) -> Path:
    lines = []
    for params, cp, v in values:
        lines.append({"params": params, "callpath": cp, "metric": "time", "value": [v, v * 1.01, v * 0.99]})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _report(tmp_path: Path, src: Path, at: str) -> str:
    out = tmp_path / "r.md"
    assert cli.main(["report", str(src), "--at", at, "--format", "markdown", "-o", str(out), "-q"]) == 0
    return next(ln for ln in out.read_text().splitlines() if ln.startswith("Predicted run time"))


def test_a_parameter_held_constant_and_a_prediction_below_what_was_measured_are_said(tmp_path):
    """Two values of ranks: the model pools them into a constant, which predicted 4 s at ranks=8
    where 8.3 s had been measured at ranks=2; the card said nothing."""
    values = []
    for w in WIDTH:
        for ranks, t in ((1, 5 - 0.004 * w), (2, 3 + 0.01 * w)):
            values += [({"ranks": ranks, "width": w}, "main", t), ({"ranks": ranks, "width": w}, "main->train", t - 0.1)]
    line = _report(tmp_path, _write(tmp_path / "in.jsonl", values), "ranks=8,width=2048")
    assert "width=2048" in line  # not 2.05e+03
    assert ("Caveat: ranks has 2 measured value(s) (1, 2): the model holds it constant, so this prediction "
            "does not follow ranks=8.") in line
    # Extra-P values carry no unit: no "s" (review 43)
    assert "Caveat: below the 8.12 already measured at ranks=2, width=512." in line
    # a target at the measured ranks moves nothing the model ignores
    line = _report(tmp_path, tmp_path / "in.jsonl", "ranks=2,width=2048")
    assert "Caveat" not in line


def test_a_run_time_its_parts_contradict_is_said(tmp_path):
    values = []
    for i, w in enumerate(WIDTH):
        values += [({"width": w}, "main", 10 + (0.3, -0.2, 0.1, -0.3, 0.2)[i]),
                   ({"width": w}, "main->train", 1e-4 * w * w)]
    line = _report(tmp_path, _write(tmp_path / "in.jsonl", values), "width=4096")
    # a whole below its parts: the run time is its parts' (review 25), and the model's figure is said
    assert "**1678** (`main`, the longest top-level region, from its parts' models)" in line
    assert "Caveat: its own time model predicts 10" in line
    # a whole far above its parts: its own figure, and the parts' said
    values = []
    for i, w in enumerate(WIDTH):
        values += [({"width": w}, "main", 10 + 1e-4 * w * w), ({"width": w}, "main->train", 5 + (0.3, -0.2, 0.1, -0.3, 0.2)[i])]
    line = _report(tmp_path, _write(tmp_path / "above.jsonl", values), "width=4096")
    # without an exclusive time (Extra-P inputs) a whole above its parts may be its own work: no caveat
    # (review 45; with an exclusive time it is said: tests/modeler/test_review45.py)
    assert "Caveat" not in line
    assert "from its parts' models" not in line
    consistent = [({"width": w}, cp, 10 + 1e-4 * w * w - (0.5 if cp == "main->train" else 0))
                  for w in WIDTH for cp in ("main", "main->train")]
    assert "Caveat" not in _report(tmp_path, _write(tmp_path / "ok.jsonl", consistent), "width=4096")


def test_a_region_inside_the_run_predicted_above_it_is_said(tmp_path):
    """Review 20: the run time (main, 23 s, a start-up constant) lay below its training loop two levels
    down (2 min: main's model had no term in seq, main->run agreed with main, the loop did not)."""
    values = []
    for w in WIDTH:
        loop = 2e-5 * w * w
        values += [({"width": w}, "main", 20 + loop), ({"width": w}, "main->run", 20 + loop),
                   ({"width": w}, "main->run->loop", loop)]
    src = _write(tmp_path / "in.jsonl", values)
    assert "Caveat" not in _report(tmp_path, src, "width=1024")
    flat = [(p, cp, 20.0 + 0.05 * (i % 2) if cp != "main->run->loop" else v) for i, (p, cp, v) in enumerate(values)]
    line = _report(tmp_path, _write(tmp_path / "flat.jsonl", flat), "width=4096")
    # review 25: the loop's growth, clearly above the run and the function between, is the run's time
    assert "**336** (`main`, the longest top-level region, from its parts' models)" in line, line
    assert "Caveat: its own time model predicts 20" in line


def _fitted(metric: str, smape: float, ar2: float, constant: float = 1.0):
    from modeler.model import FittedModel, Model

    return FittedModel("main->loop", metric, Model(("ranks",), constant, ()), smape, 0.0, ar2, None, 12)


def test_a_poor_smape_from_true_zeros_is_no_poor_fit_when_the_model_follows_the_values():
    """step_comm_time is exactly 0 at ranks=1: each such point counts 200% in SMAPE, and a model
    with adjusted R² 0.977 was named as fitting poorly."""
    from modeler.rank_warnings import poor_fit_warning
    from modeler.ranking import RankedModel

    zeros = RankedModel(_fitted("step_comm_time", 56.3, 0.977), (1.0, 0.0), 0.2, None, None)
    noise = RankedModel(_fitted("time", 56.3, 0.2), (0.0, 0.0), 0.2, None, None)
    assert poor_fit_warning([zeros]) is None
    warning = poor_fit_warning([zeros, noise])
    assert warning is not None and warning.startswith("1 model fits the measurements poorly")
    assert "main->loop (time) 56%" in warning and "step_comm_time" not in warning


def test_a_part_of_a_step_predicted_above_the_step_is_said(tmp_path):
    values = []
    for ranks in (1, 2, 4, 8, 16):
        p = {"ranks": ranks}
        comm = 0.0 if ranks == 1 else 0.002 * ranks ** 1.5
        values += [(p, "main->loop", "step_time", 0.1 + 0.004 * ranks), (p, "main->loop", "step_comm_time", comm),
                   (p, "main->loop", "data_wait", 0.01)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"params": p, "callpath": cp, "metric": m, "value": [v, v]}) + "\n"
                           for p, cp, m, v in values))
    from modeler.commands.fit import fit_dataset
    from modeler.readers import load

    def warnings_at(ranks: int) -> list[str]:
        result = fit_dataset(load([src]), at=f"ranks={ranks}", min_share=0)
        return [w for w in result.warnings if "part of the step" in w]

    (w,) = warnings_at(256)
    assert w.startswith("at ranks=256 a part of the step is predicted above the whole step: main->loop: "
                        "step_comm_time ")
    assert "data_wait" not in w
    assert warnings_at(16) == []  # measured there: 0.128 s of communication in a step of 0.164 s


def _grows(callpath: str, ar2: float, coefficient: float = 1.0):
    from modeler.model import Factor, FittedModel, Model, Term

    term = Term(coefficient, (Factor("ranks", 2.0, 0),))
    return FittedModel(callpath, "time", Model(("ranks",), 0.5, (term,)), 10.0, 0.0, ar2, None, 12)


def test_rows_worse_than_a_constant_or_contradicted_by_their_parts_are_marked_doubtful():
    """A noisy 18 ms region (adj. R² -0.2, parts 52x apart) led the ranking and the overview with
    nothing to say it was not to be read as it stood."""
    from modeler.outputs.table import render_table
    from modeler.ranking import RankedModel, Ranking

    worse = RankedModel(_grows("main->noisy", -0.195), (2.0, 0.0), 0.46, None, None, from_parts=0.0089)
    apart = RankedModel(_grows("main->apart", 0.9), (2.0, 0.0), 10.0, None, None, from_parts=4.0)
    fine = RankedModel(_grows("main->fine", 0.95), (2.0, 0.0), 10.0, None, None, from_parts=6.0)
    assert worse.doubtful() == "adj. R² -0.2: worse than a constant"
    assert apart.doubtful() == "its parts' models add up to 2.5x less at the target"
    assert fine.doubtful() is None
    assert worse.to_json()["doubtful"] == worse.doubtful() and fine.to_json()["doubtful"] is None
    table = render_table(Ranking(("ranks",), {"ranks": 64.0}, (worse, apart, fine)))
    numbers = [ln.split()[0] for ln in table.splitlines()[3:6]]
    assert numbers == ["1!", "2!", "3"]
    assert "! (2 rows): a fit worse than a constant" in table


def test_the_overview_names_the_worst_growth_among_rows_that_are_not_doubtful():
    from modeler.report.findings import Report, RankingRow

    def row(cp: str, growth: float, doubtful: str | None) -> RankingRow:
        return RankingRow(cp, "", "", (growth, 0.0), 1.0, None, 0.9, 12, 1.0, 1.0, None, None, 1.0, (), "",
                          doubtful=doubtful)

    report = Report(title="t", parameters=("ranks",), metric="time", unit_format=str, target={"ranks": 8.0},
                    hold={}, ranking=[row("main->noisy", 3.0, "adj. R² -0.2: worse than a constant"),
                                      row("main", 1.0, None), row("main->train", 1.0, None)], regions=[])
    assert report.headline().callpath == "main->train"
    # review 31: where every growing row is doubtful, the worst of them, not "no region grows"
    report.ranking = [row("main->noisy", 3.0, "a doubt"), row("main->flat", 0.0, None),
                      row("main->falls", -1.0, None)]
    assert report.headline().callpath == "main->noisy"
    from modeler.report.render import render_html

    html = render_html(report)
    assert "worst growth: " in html and "(doubtful: every growing model is)" in html and "a doubt" in html
    assert "no region&#39;s model grows" not in html and "no region's model grows" not in html
    report.ranking = [row("main->flat", 0.0, None), row("main->falls", -1.0, None)]
    assert report.headline() is None


def test_a_top_level_region_whose_time_is_mostly_its_own_is_said(tmp_path):
    """`main` grew from its own code (DDP's constructor, an import in the first optimizer step) and no
    row of the time ranking said why."""
    values = []
    for ranks in (1, 2, 4, 8, 16):
        p = {"ranks": ranks}
        values += [(p, "main", "time", 2.0 + 1.5 * ranks), (p, "main", "exclusive_time", 1.0 + 1.5 * ranks),
                   (p, "main->train", "time", 1.0), (p, "main->train", "exclusive_time", 1.0)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"params": p, "callpath": cp, "metric": m, "value": [v, v]}) + "\n"
                           for p, cp, m, v in values))
    from modeler.commands.fit import fit_dataset
    from modeler.readers import load

    notes = [w for w in fit_dataset(load([src]), min_share=0).warnings if "own code" in w]
    assert notes == ["1 top-level region spends most of its time in its own code, in no instrumented child: main 96% "
                     "at ranks=16; that is calls into libraries (a DDP constructor's set-up, imports, the first call "
                     "of a compiled function): `--metric exclusive_time` models it"]
    # review 18: not when `main` is not among the models shown
    everything = load([src])
    train = everything.select(callpaths=["main->train"])
    assert not [w for w in fit_dataset(train, measured=everything, min_share=0).warnings if "own code" in w]
    # under half its own: nothing to say
    balanced = [(p, cp, m, (1.0 if (cp, m) == ("main", "exclusive_time") else v)) for p, cp, m, v in values]
    src.write_text("".join(json.dumps({"params": p, "callpath": cp, "metric": m, "value": [v, v]}) + "\n"
                           for p, cp, m, v in balanced))
    assert not [w for w in fit_dataset(load([src]), min_share=0).warnings if "own code" in w]


# review 18 ------------------------------------------------------------------------------------


def test_a_run_time_far_from_what_was_measured_at_the_target_itself_is_said(tmp_path):
    """At the default target (the largest measured values) the pooled constant said 4.03 s where
    8.2 s had been measured at that very point, with no caveat: the caveat about what was measured
    needed another caveat first."""
    values = []
    for w in WIDTH:
        for ranks, t in ((1, 5 - 0.004 * w), (2, 3 + 0.01 * w)):
            values += [({"ranks": ranks, "width": w}, "main", t), ({"ranks": ranks, "width": w}, "main->train", t - 0.1)]
    line = _report(tmp_path, _write(tmp_path / "in.jsonl", values), "ranks=2,width=512")
    assert "Caveat: 8.12 was measured at this very point." in line
    assert "has 2 measured value(s)" not in line  # the target moves no parameter off its values


def test_under_ranks_sum_the_parts_of_a_per_rank_run_time_are_not_compared(tmp_path):
    """Under --ranks sum the parts are rank-seconds: compared with the mean time per rank they gave
    a caveat of about 1/ranks on every multi-rank sweep."""
    from tests.modeler.modeler_synthetic_runs import write_sweep

    write_sweep(tmp_path / "runs", {"ranks": [1, 2, 4, 8, 16]}, time_s=lambda p, rank, rep: 1.0 + 0.1 * p["ranks"])
    out = tmp_path / "r.md"
    for ranks in ("mean", "sum"):
        assert cli.main(["report", str(tmp_path / "runs"), "--ranks", ranks, "--at", "ranks=64", "--format",
                         "markdown", "-o", str(out), "-q"]) == 0
        line = next(ln for ln in out.read_text().splitlines() if ln.startswith("Predicted run time"))
        assert "Caveat" not in line, (ranks, line)


def test_fit_says_the_warnings_of_the_models_it_shows_only(tmp_path, capsys):
    """`modeler fit` counted "(70 models)" with 20 shown, and named hidden call paths in parts warnings."""
    values = []
    for ranks in (1, 2, 4, 8):
        p = {"ranks": ranks}
        values += [(p, "main", 100.0 + ranks), (p, "main->train", 90.0 + ranks), (p, "main->tiny", 0.001),
                   (p, "main->tiny->inner", 0.0009 * ranks ** 3)]
    src = _write(tmp_path / "in.jsonl", values)
    assert cli.main(["fit", str(src), "--at", "ranks=8"]) == 0
    err = capsys.readouterr().err
    assert "fewer than 5 values of parameter ranks (4) (2 models)" in err, err
    assert "main->tiny" not in err.split("read 1 of 1")[0], err
    assert cli.main(["fit", str(src), "--at", "ranks=8", "--min-share", "0"]) == 0
    assert "fewer than 5 values of parameter ranks (4) (4 models)" in capsys.readouterr().err


def test_the_overview_table_marks_a_doubtful_row(tmp_path):
    from modeler.report.findings import RankingRow, Report
    from modeler.report.render import render_html

    def row(cp: str, doubtful: str | None) -> RankingRow:
        return RankingRow(cp, "c", "deg 1", (1.0, 0.0), 1.0, None, 0.9, 12, 1.0, 1.0, None, None, 1.0, (), "",
                          doubtful=doubtful)

    report = Report(title="t", parameters=("ranks",), metric="time", unit_format=str, target={"ranks": 8.0},
                    hold={}, ranking=[row("main->noisy", "adj. R² -0.2: worse than a constant"), row("main", None)],
                    regions=[])
    html = render_html(report)
    overview = html.split("Worst-scaling regions", 1)[1].split("</table>", 1)[0]
    assert "<b>noisy</b> !<div class=\"warn small\">doubtful: adj. R² -0.2: worse than a constant</div>" in overview


def test_a_target_is_printed_as_given():
    from modeler.ranking import RankedModel, Ranking
    from modeler.outputs.columns import target_text

    assert target_text(Ranking(("ranks",), {"ranks": 1234567.0}, ())) == "ranks=1234567"


def test_the_poorest_fitting_part_of_a_contradicted_whole_is_marked_too():
    """Review 18 F3: a loop whose parts' models added up to 2.3x less was marked, while its child,
    a constant fitted to clearly growing noisy values (SMAPE 60%), was not; the child's share at the
    target counted as trusted."""
    from modeler.model import Factor, FittedModel, Model, Term
    from modeler.ranking import rank_models

    grows = Model(("batch",), 0.003, (Term(0.0016, (Factor("batch", 0.8, 0),)),))
    whole = FittedModel("main->loop", "time", grows, 24.5, 0.0, 0.41, None, 12)
    own = FittedModel("main->loop", "exclusive_time", Model(("batch",), 0.0064), 22.9, 0.0, 0.0, None, 12)
    child = FittedModel("main->loop->it", "time", Model(("batch",), 0.0134), 59.9, 0.0, 0.0, None, 12)
    fine = FittedModel("main->ok", "time", Model(("batch",), 0.01), 30.0, 0.0, 0.0, None, 12)
    ranking = rank_models([whole, own, child, fine], ("batch",), {"batch": 64.0})
    why = {(r.fitted.callpath, r.fitted.metric): r.doubtful() for r in ranking.rows}
    assert why[("main->loop", "time")] == "its parts' models add up to 2.4x less at the target"
    assert why[("main->loop->it", "time")].startswith("a part of main->loop, whose time model its parts' contradict "
                                                      "by 2.4x at the target; its fit is the poorer (SMAPE 59.9%")
    assert why[("main->loop", "exclusive_time")] is None and why[("main->ok", "time")] is None
    # a part that fits better than the whole is not charged
    better = FittedModel("main->loop->it", "time", Model(("batch",), 0.0134), 10.0, 0.0, 0.0, None, 12)
    ranking = rank_models([whole, own, better], ("batch",), {"batch": 64.0})
    assert [r.fitted.callpath for r in ranking.rows if r.doubtful()] == ["main->loop"]


def test_a_constant_whole_below_its_parts_charges_none_of_them():
    """Review 31: the run, a constant 1.21 s (8.6 s measured at 4x), was contradicted by its parts,
    and the training function under it, the one model that was right (-23%), was marked for it as
    the poorer fit."""
    from modeler.model import Factor, FittedModel, Model, Term
    from modeler.ranking import rank_models

    grows = Model(("batch",), 0.01, (Term(0.001, (Factor("batch", 1.0, 0),)),))
    whole = FittedModel("main", "time", Model(("batch",), 1.2), 7.0, 0.0, 0.0, None, 25)
    own = FittedModel("main", "exclusive_time", Model(("batch",), 1.1), 7.5, 0.0, 0.0, None, 25)
    child = FittedModel("main->fit", "time", grows, 9.5, 0.0, 0.97, None, 25)
    ranking = rank_models([whole, own, child], ("batch",), {"batch": 4096.0})
    why = {(r.fitted.callpath, r.fitted.metric): r.doubtful() for r in ranking.rows}
    assert why[("main", "time")].startswith("its parts' models add up to")
    assert why[("main->fit", "time")] is None and why[("main", "exclusive_time")] is None
