"""Review 45: without exclusive times (Extra-P inputs) a parent that does its own work was marked
doubtful, blamed a child and got the report's caveat, and an overflowing ratio read "infx"; `--top`
kept warnings about the models it cut; `--compat extrap` crashed on a parameter value 0."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from modeler import cli
from modeler.model import Factor, FittedModel, Model, Term
from modeler.parts import PartsCheck, times
from modeler.parts_growth import contradiction
from modeler.ranking import rank_models

WIDTH = (32, 64, 128, 256, 512)
NOISE = (0.3, -0.2, 0.1, -0.3, 0.2)


def _write(path, rows):
    """Extra-P JSON Lines: rows of (params, call path, metric, value), three repetitions each."""
    with open(path, "w") as f:
        for params, cp, metric, v in rows:
            f.write(json.dumps({"params": params, "callpath": cp, "metric": metric,
                                "value": [v, v * 1.01, v * 0.99]}) + "\n")
    return path


def _fit_json(path, *args: str) -> dict:
    out = path.with_suffix(".out.json")
    assert cli.main(["fit", str(path), "--format", "json", "-o", str(out), "-q", *args]) == 0
    return json.loads(out.read_text())


def _run_time_line(path, at: str) -> str:
    out = path.with_suffix(".md")
    assert cli.main(["report", str(path), "--at", at, "--format", "markdown", "-o", str(out), "-q"]) == 0
    return next(ln for ln in out.read_text().splitlines() if ln.startswith("Predicted run time"))


# -- finding 1: without an exclusive time, a whole above its parts may be its own work ---------------

def test_without_an_exclusive_time_a_whole_above_its_parts_is_no_contradiction():
    assert contradiction(10.0, 1.0, "mean", with_exclusive=False) is None
    assert "10x less" in contradiction(10.0, 1.0, "mean")  # with it (the default), as before
    # below its parts is impossible for an inclusive time, with or without
    assert "10x more" in contradiction(1.0, 10.0, "mean", with_exclusive=False)
    assert "no time at all" in contradiction(-1.0, 10.0, "mean", with_exclusive=False)


def _own_work(tmp_path):
    """`main` = 20 + 0.5 * batch, its one child under 1% of it: consistent data (review 45's ownwork)."""
    rows = []
    for ranks in (1, 2, 4, 8, 16):
        for batch in (16, 32, 64, 128, 256):
            wobble = 1 + 0.01 * math.sin(ranks + 3 * batch)
            rows += [({"ranks": ranks, "batch": batch}, "main", "time", (20 + 0.5 * batch) * wobble),
                     ({"ranks": ranks, "batch": batch}, "main->io", "time", (0.2 + 0.001 * ranks) * wobble)]
    return _write(tmp_path / "ownwork.jsonl", rows)


def test_a_parent_doing_its_own_work_is_not_doubtful_without_exclusive_times(tmp_path, capsys):
    path = _own_work(tmp_path)
    models = {m["callpath"]: m for m in _fit_json(path, "--min-share", "0")["models"]}
    assert models["main"]["prediction_from_parts"] < models["main"]["prediction"] / 100
    assert models["main"]["doubtful"] is None, models["main"]["doubtful"]
    assert models["main"]["share"]["at_target_trusted"] is True
    assert models["main->io"]["doubtful"] is None
    assert cli.main(["fit", str(path), "--min-share", "0", "-q"]) == 0
    assert "1!" not in capsys.readouterr().out


def test_a_child_of_a_parent_doing_its_own_work_is_not_blamed(tmp_path):
    """Review 45's parentbig: `main->tiny` fits a little worse than `main`, 1e7 times below it."""
    rows = []
    for n in (1, 2, 4, 8, 16):
        rows += [({"n": n}, "main", "time", 100 * n ** 3),
                 ({"n": n}, "main->tiny", "time", 0.001 * n + 1e-5 * (n % 3))]
    out = _fit_json(_write(tmp_path / "parentbig.jsonl", rows), "--min-share", "0")
    models = {m["callpath"]: m for m in out["models"]}
    assert models["main->tiny"]["smape"] > models["main"]["smape"]  # the part a contradiction would blame
    assert models["main"]["doubtful"] is None and models["main->tiny"]["doubtful"] is None, models


def _above(tmp_path, exclusive: bool):
    rows = []
    for i, w in enumerate(WIDTH):
        rows += [({"width": w}, "main", "time", 10 + 1e-4 * w * w), ({"width": w}, "main->train", "time", 5 + NOISE[i])]
        if exclusive:  # its own time is known, and small: the whole is far above its parts
            rows.append(({"width": w}, "main", "exclusive_time", 0.1 + 0.01 * NOISE[i]))
    return _write(tmp_path / f"above{'_x' if exclusive else ''}.jsonl", rows)


def test_the_run_time_caveat_follows_the_same_rule(tmp_path):
    line = _run_time_line(_above(tmp_path, exclusive=False), "width=4096")
    assert "Caveat" not in line, line
    # with an exclusive time, a run far above its parts is still said, as from our own runs
    line = _run_time_line(_above(tmp_path, exclusive=True), "width=4096")
    assert "Caveat: its parts' models add up to 5.1 (3.3e+02x): one of them extrapolates badly" in line, line
    main = next(m for m in _fit_json(_above(tmp_path, exclusive=True), "--at", "width=4096")["models"]
                if m["callpath"] == "main")
    assert main["doubtful"] == "its parts' models add up to 3.3e+02x less at the target"


def test_an_overflowing_ratio_is_said_as_a_bound_not_infx(tmp_path):
    assert times(math.inf) == "over 1.8e+308x" and times(0.0) == "under 2.2e-308x" and times(680.0) == "6.8e+02x"
    assert contradiction(1e300, 1e-300) == "its parts' models add up to over 1.8e+308x less at the target"
    # the other way round, the ratio underflowed to 0 and 1 / ratio divided by it
    assert contradiction(1e-300, 1e300) == "its parts' models add up to over 1.8e+308x more at the target"
    check = PartsCheck("main", 1e300, 1e-300, 1, True)
    assert "(over 1.8e+308x)" in check.message("n=16")
    rows = []
    for n in (1, 2, 4, 8, 16):
        rows += [({"n": n}, "main", "time", 1e300 * n ** 3), ({"n": n}, "main", "exclusive_time", 1e-300 * (2 + n % 3)),
                 ({"n": n}, "main->tiny", "time", 1e-300 * n)]
    path = _write(tmp_path / "huge.jsonl", rows)
    out = _fit_json(path, "--min-share", "0")
    text = json.dumps(out)
    assert "infx" not in text and "over 1.8e+308x" in text
    line = _run_time_line(path, "n=16")
    assert "infx" not in line and "(over 1.8e+308x)" in line, line


# -- finding 6: --top speaks of the models it keeps ---------------------------------------------------

def _fitted(cp: str, metric: str, exponent: float, smape: float, notes: tuple[str, ...]) -> FittedModel:
    model = Model(("p",), 1.0, (Term(1.0, (Factor("p", exponent),)),))
    return FittedModel(cp, metric, model, smape, 1.0, 0.5 if smape > 50 else 0.99, None, 5, warnings=notes)


def test_top_keeps_only_the_warnings_of_the_models_it_keeps():
    note = "fewer than 5 values of parameter p (4)"
    models = [_fitted("main", "visits", 3.0, 1.0, (note,)), _fitted("a", "visits", 2.0, 80.0, (note,)),
              _fitted("b", "visits", 1.0, 1.0, (note,))]
    ranking = rank_models(models, ("p",), {"p": 64.0}, warnings=["given by the data"], model_notes=True)
    assert f"{note} (3 models)" in ranking.warnings
    assert any("poorly" in w and "a (visits)" in w for w in ranking.warnings)
    top = ranking.top(1)
    assert [r.fitted.callpath for r in top.rows] == ["main"]
    assert top.warnings == ("given by the data", f"{note} (1 model)"), top.warnings
    assert ranking.top(3).warnings == ranking.warnings  # nothing cut, nothing changed


def test_fit_top_counts_the_models_shown(tmp_path):
    """Review 45's uni.jsonl: three models, three values of batch; `--top 1` said `(3 models)`."""
    rows = []
    for ranks in (1, 2, 4, 8, 16):
        for batch in (16, 32, 64):
            rows += [({"ranks": ranks, "batch": batch}, cp, "time", k * (10 + ranks * batch))
                     for cp, k in (("main", 1.0), ("main->a", 0.5), ("main->b", 0.4))]
    out = _fit_json(_write(tmp_path / "uni.jsonl", rows), "--min-share", "0", "--top", "1")
    assert len(out["models"]) == 1
    assert out["warnings"] == ["fewer than 5 values of parameter batch (3) (1 model)"], out["warnings"]


# -- finding 7: a parameter value 0 under --compat extrap ---------------------------------------------

def _zero(tmp_path):
    """Review 45's zero.jsonl: n = 0, 1, 2, 4, 8, 16; `main` = 1 + log2(n + 1) / 2, a child at 0."""
    rows = []
    for n in (0, 1, 2, 4, 8, 16):
        v = 1 + 0.5 * math.log2(n + 1)
        rows += [({"n": n}, "main", "time", v), ({"n": n}, "main->z", "time", 0.0)]
    with open(tmp_path / "zero.jsonl", "w") as f:
        for params, cp, metric, v in rows:
            f.write(json.dumps({"params": params, "callpath": cp, "metric": metric, "value": [v, v * 1.01]}) + "\n")
    return tmp_path / "zero.jsonl"


def test_compat_extrap_models_a_parameter_value_0_as_extrap_does(tmp_path):
    # Extra-P 4.2.5 (`extrap --json zero.jsonl`, .venv-extrap) warns that a value below one rules out
    # log terms and prints "1.0372457406249866 + 0.5264844475798209 * n^(1/2)", RSS 7.91E-02,
    # adjusted R^2 9.64E-01, and "0.0" for main->z
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # log2(0) warned, then "SVD did not converge"
        out = _fit_json(_zero(tmp_path), "--compat", "extrap", "--min-share", "0")
    models = {m["callpath"]: m for m in out["models"]}
    main = models["main"]
    assert main["constant"] == pytest.approx(1.0372457406249866, rel=1e-9)
    (term,) = main["terms"]
    assert term["coefficient"] == pytest.approx(0.5264844475798209, rel=1e-9)
    assert term["factors"] == [{"parameter": "n", "exponent": 0.5, "log_exponent": 0}]
    assert main["rss"] == pytest.approx(7.91e-2, rel=1e-2) and main["ar2"] == pytest.approx(0.964, abs=1e-3)
    assert models["main->z"]["constant"] == 0 and models["main->z"]["terms"] == []


def test_compat_extrap_with_a_value_0_on_a_grid_as_extrap_does(tmp_path):
    rows = []
    for p in (1, 2, 4, 8, 16):
        for n in (0, 1, 2, 4, 8, 16):
            v = 2 + 0.3 * p * math.log2(p) + 0.5 * n ** 0.5 + 0.1 * p * n
            noise = 1 + 0.01 * math.sin(7 * p + 3 * n)
            rows.append({"params": {"p": p, "n": n}, "callpath": "main", "metric": "time",
                         "value": [v * noise, v / noise]})
    path = tmp_path / "zero2.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (main,) = _fit_json(path, "--compat", "extrap", "--min-share", "0")["models"]
    # Extra-P 4.2.5: 2.5262184043451046 + 0.5767361150313828 * p^(5/4) + 0.05699424909486082 * p^(5/4) * n^(1)
    assert main["constant"] == pytest.approx(2.5262184043451046, rel=1e-9)
    got = {tuple((f["parameter"], f["exponent"], f["log_exponent"]) for f in t["factors"]): t["coefficient"]
           for t in main["terms"]}
    assert got == {(("p", 1.25, 0),): pytest.approx(0.5767361150313828, rel=1e-9),
                   (("p", 1.25, 0), ("n", 1.0, 0)): pytest.approx(0.05699424909486082, rel=1e-9)}


def test_the_default_mode_models_a_value_0_without_a_warning(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _fit_json(_zero(tmp_path), "--min-share", "0")
    main = next(m for m in out["models"] if m["callpath"] == "main")
    assert main["terms"][0]["factors"] == [{"parameter": "n", "exponent": 0.5, "log_exponent": 0}]
    assert out["warnings"] == []
