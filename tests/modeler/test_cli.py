"""`modeler` command line: registry, errors to exit codes, `fit` and `export` end to end."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import modeler
from modeler import cli
from modeler_synthetic_runs import write_rank_file, write_sweep

MS = 10**6

ROOT = Path(__file__).resolve().parents[2]


def quadratic_sweep(root: Path) -> Path:
    # time of main->train: 0.002 * ranks^2 + 0.01 * batch, noise-free
    write_sweep(root, {"ranks": [1, 2, 3, 4, 5], "batch": [8, 16, 32, 64, 128]},
                ranks_of=lambda p: 1, time_s=lambda p, r, rep: 0.002 * p["ranks"] ** 2 + 0.01 * p["batch"])
    return root


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert modeler.__version__ in capsys.readouterr().out


def test_help_lists_every_registered_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out


@pytest.mark.parametrize("argv", [[], ["nosuchcommand"], ["fit"], ["fit", "x", "--format", "yaml"]])
def test_usage_errors_exit_2(argv, capsys):
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "usage:" in err
    if not argv:  # review 40: "the following arguments are required: COMMAND, args"
        assert "give a COMMAND: fit, export, report, timeline" in err and "args" not in err


def test_broken_command_module_is_reported_not_skipped(capsys):
    registry = {"fit": cli.COMMANDS["fit"], "broken": cli.Command("modeler.no_such_module_xyz", "nothing")}
    assert cli.main(["broken"], registry=registry) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "'broken'" in err and "modeler.no_such_module_xyz" in err and "ModuleNotFoundError" in err


def test_command_module_without_run_is_an_error(monkeypatch, capsys):
    fake = types.ModuleType("modeler_fake_cmd")
    fake.configure = lambda parser: None
    monkeypatch.setitem(sys.modules, "modeler_fake_cmd", fake)
    registry = {"fake": cli.Command("modeler_fake_cmd", "fake")}
    assert cli.main(["fake"], registry=registry) == cli.EXIT_ERROR
    assert "does not define run()" in capsys.readouterr().err


def test_plugin_command_gets_its_own_options(monkeypatch, capsys):
    fake = types.ModuleType("modeler_fake_cmd2")
    fake.configure = lambda parser: parser.add_argument("--n", type=int, required=True)
    fake.run = lambda args: args.n
    monkeypatch.setitem(sys.modules, "modeler_fake_cmd2", fake)
    registry = {"fake": cli.Command("modeler_fake_cmd2", "fake")}
    assert cli.main(["fake", "--n", "7"], registry=registry) == 7


def test_every_registered_command_imports():
    for name in cli.COMMANDS:
        module = cli.load_command(name)
        assert callable(module.configure) and callable(module.run)


def test_missing_input_is_an_error_naming_it(tmp_path, capsys):
    assert cli.main(["fit", str(tmp_path / "nope")]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("modeler: error:") and "nope" in err


def test_fit_json_ranks_worst_scaling_first(tmp_path, capsys):
    runs = quadratic_sweep(tmp_path / "runs")
    assert cli.main(["fit", str(runs), "--format", "json", "--compat", "extrap", "--at", "ranks=64,batch=256"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parameters"] == ["ranks", "batch"]
    assert doc["at"] == {"ranks": 64.0, "batch": 256.0}
    assert {m["metric"] for m in doc["models"]} == {"time"}
    first = doc["models"][0]
    # the quadratic call paths lead; main->train is known exactly
    train = [m for m in doc["models"] if m["callpath"] == "main->train"][0]
    assert first["growth"]["exponent"] == 2
    assert train["prediction"] == pytest.approx(0.002 * 64**2 + 0.01 * 256, rel=1e-3)
    assert train["smape"] < 1e-3 and train["unit"] == "s"
    for m in doc["models"]:
        assert {"callpath", "metric", "model", "constant", "terms", "smape", "rss", "ar2", "points"} <= set(m)


def test_fit_selects_metrics_and_callpaths_and_writes_files(tmp_path, capsys):
    runs = quadratic_sweep(tmp_path / "runs")
    out = tmp_path / "models.csv"
    code = cli.main(["fit", str(runs), "--compat", "extrap", "--metric", "visits,step_time", "--callpath", "*train_epoch",
                     "--format", "csv", "-o", str(out), "-q"])
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert {(r["callpath"], r["metric"]) for r in rows} == {
        ("main->train->train_epoch", "visits"), ("main->train->train_epoch", "step_time")}
    assert capsys.readouterr().err == ""
    md = tmp_path / "models.md"
    assert cli.main(["fit", str(runs), "--compat", "extrap", "--format", "markdown", "-o", str(md), "--top", "2"]) == 0
    assert len([l for l in md.read_text().splitlines() if l.startswith("| ")]) == 1 + 2


def test_fit_two_repetitions_with_one_noisy_point(tmp_path, capsys):
    # seen on real runs (`--repeat 2` on a busy machine): one point's repetitions far apart
    def t(p: dict, rank: int, rep: int) -> float:
        base = 0.01 * p["n"]
        return base * 8 if (p["n"] == 4 and rep == 1) else base * (1 + 0.01 * rep)

    write_sweep(tmp_path / "runs", {"n": [4, 8, 12, 16, 20]}, repetitions=2, time_s=t)
    assert cli.main(["fit", str(tmp_path / "runs"), "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(m["constant"] is not None for m in doc["models"])


def test_fit_repetitions_option_chooses_the_value_per_point(tmp_path, capsys):
    # repetition r takes (1 + r/10) times the base time: min follows rep 0, max rep 2, median rep 1
    write_sweep(tmp_path / "runs", {"n": [4, 8, 12, 16, 20]}, repetitions=3,
                time_s=lambda p, rank, rep: 0.01 * p["n"] * (1 + rep / 10))
    got = {}
    for how in ("min", "median", "max"):
        assert cli.main(["fit", str(tmp_path / "runs"), "--format", "json", "--repetitions", how, "--at", "n=40",
                         "--callpath", "main->train", "--metric", "time", "-q"]) == 0
        (m,) = json.loads(capsys.readouterr().out)["models"]
        got[how] = m["prediction"]
    assert got["min"] == pytest.approx(0.40, rel=1e-3)
    assert got["median"] == pytest.approx(0.44, rel=1e-3)
    assert got["max"] == pytest.approx(0.48, rel=1e-3)
    assert cli.main(["fit", str(tmp_path / "runs"), "--repetitions", "mode"]) == 2
    assert "--repetitions" in capsys.readouterr().err


def test_fit_input_format_forces_the_reader(tmp_path, capsys):
    runs = quadratic_sweep(tmp_path / "runs")
    extrap = tmp_path / "e.jsonl"
    extrap.write_text("".join(json.dumps({"params": {"ranks": r}, "callpath": "k", "metric": "time", "value": 2.0 * r}) + "\n"
                              for r in (1, 2, 4, 8, 16)))
    # forced to read our run files as Extra-P JSON Lines: every one is skipped, named, nothing fitted
    assert cli.main(["fit", str(runs), "--input-format", "extrap-jsonl"]) == cli.EXIT_ERROR
    assert "no usable measurements" in capsys.readouterr().err
    assert cli.main(["fit", str(extrap), "--input-format", "extrap-jsonl", "--format", "json", "-q"]) == 0
    assert [m["callpath"] for m in json.loads(capsys.readouterr().out)["models"]] == ["k"]
    assert cli.main(["fit", str(extrap), "--input-format", "runs"]) == cli.EXIT_ERROR
    assert str(extrap) in capsys.readouterr().err


def test_fit_warns_about_series_below_min_points_and_fits_the_rest(tmp_path, capsys):
    # main->load_batch was measured at 2 of the 5 points: below --min-points 3, left out by name
    for n in (4, 8, 12, 16, 20):
        prof = {(0,): (1, n * MS, MS)}
        if n in (4, 8):
            prof[(0, 4)] = (1, MS, MS)
        write_rank_file(tmp_path / "runs" / f"r{n}", run_id=f"r{n}", params={"n": n}, profile=prof)
    assert cli.main(["fit", str(tmp_path / "runs"), "--metric", "time", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert [m["callpath"] for m in json.loads(captured.out)["models"]] == ["main"]
    assert "1 series left out: measured at fewer than 3 points (--min-points): main->load_batch [time] (2)" in captured.err


@pytest.mark.parametrize(
    "extra, message",
    [(["--metric", "bogus"], "--metric: bogus not measured; available:"), (["--at", "gpus=8"], "--at: unknown parameter"),
     (["--callpath", "nothing*"], "--callpath"), (["--top", "0"], "--top"), (["--min-points", "99"], "--min-points")],
)
def test_bad_options_are_errors_naming_the_option(tmp_path, capsys, extra, message):
    runs = quadratic_sweep(tmp_path / "runs")
    assert cli.main(["fit", str(runs), "--compat", "extrap", *extra]) == cli.EXIT_ERROR
    assert message in capsys.readouterr().err


def test_skipped_file_gives_partial_exit_code_and_names_it(tmp_path, capsys):
    runs = quadratic_sweep(tmp_path / "runs")
    junk = tmp_path / "junk.jsonl"
    junk.write_text("{not json\n")
    assert cli.main(["fit", str(runs), str(junk), "--compat", "extrap"]) == cli.EXIT_PARTIAL
    captured = capsys.readouterr()
    assert "main->train" in captured.out
    assert f"{junk}: skipped" in captured.err


@pytest.mark.parametrize("command", [["fit", "--compat", "extrap"], ["export", "--extrap", "-"]])
def test_quiet_still_names_the_skipped_files(tmp_path, capsys, command):
    # -q once left only the exit code 3, with nothing on stderr to say which file it was about
    runs = quadratic_sweep(tmp_path / "runs")
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    assert cli.main([*command, str(runs), str(junk), "-q"]) == cli.EXIT_PARTIAL
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"modeler: {junk}: skipped: not a scaleprobe run file nor an Extra-P input"]


def test_export_command(tmp_path, capsys):
    runs = quadratic_sweep(tmp_path / "runs")
    out = tmp_path / "x.jsonl"
    assert cli.main(["export", "--extrap", str(out), str(runs), "--metric", "time"]) == 0
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(lines) == 25 * 4 and {l["metric"] for l in lines} == {"time"}
    assert f"wrote 100 lines (4 series at 25 points) to {out}" in capsys.readouterr().err
    # without --metric every metric goes out
    assert cli.main(["export", "--extrap", str(out), str(runs), "-q"]) == 0
    metrics = {json.loads(l)["metric"] for l in out.read_text().splitlines()}
    assert {"time", "visits", "exclusive_time", "step_time", "epoch_time", "data_wait"} <= metrics


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "modeler", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_python_dash_m_end_to_end(tmp_path):
    runs = quadratic_sweep(tmp_path / "runs")
    done = _run(["fit", "runs", "--format", "json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["models"] and doc["parameters"] == ["ranks", "batch"]
    table = _run(["fit", str(runs), "--at", "ranks=32"], cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "sorted by asymptotic growth" in table.stdout and "ranks=32, batch=128" in table.stdout
    bad = _run(["fit", "missing-dir"], cwd=tmp_path)
    assert bad.returncode == 1 and "modeler: error: missing-dir" in bad.stderr and "Traceback" not in bad.stderr


def test_fit_warns_when_a_time_model_goes_below_zero_at_the_target(tmp_path, capsys):
    # 10 - 2 log2(p), measured at p = 1..16 (all >= 2): at p=1024 the model says -10
    path = tmp_path / "falls.jsonl"
    path.write_text("".join(json.dumps({"params": {"p": p}, "callpath": "main->falls", "metric": "time",
                                        "value": [10 - 2 * np.log2(p)] * 2}) + "\n" for p in (1, 2, 4, 8, 16)))
    assert cli.main(["fit", str(path), "--at", "p=1024", "--format", "json"]) == 0
    captured = capsys.readouterr()
    (model,) = json.loads(captured.out)["models"]
    assert model["prediction"] == pytest.approx(-10.0, rel=1e-6)
    assert "1 model predicts a value below zero at p=1024" in captured.err
    assert "main->falls (time) -10" in captured.err
    assert cli.main(["fit", str(path), "--at", "p=16", "--format", "json"]) == 0
    assert "below zero" not in capsys.readouterr().err
