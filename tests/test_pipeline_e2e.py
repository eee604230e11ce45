"""The whole chain on the sample application, each command in its own subprocess, as a user runs it:
instrument -> launch a sweep (ranks x batch, with repetitions) -> modeler fit -> modeler report.

The pipeline runs once per module (about 12 runs, 18 rank processes: most of the cost is importing
torch in each). Timings are noisy on a shared machine, so the assertions rest on what is
deterministic: which runs, files, parameters, regions and visits exist, that times are positive,
and that the instrumented program computes exactly what the original does. The demo script's own
input checks are fast tests at the end.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.envclean import clean_env

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "testdata" / "sample_code"

RANKS = (1, 2)
BATCHES = (4, 8, 16)
REPEAT = 2
EPOCHS, STEPS = 1, 2
PROGRAM_ARGS = [
    "--model", "mlp", "--width", "2", "--batch-size", "{batch}", "--epochs", str(EPOCHS),
    "--steps-per-epoch", str(STEPS), "--num-samples", "64", "--eval-samples", "16", "--threads", "1",
]

DEMO = ROOT / "scripts" / "demo.sh"


def _run(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    # The runtime reads SCALEPROBE_* (and torch.distributed RANK/WORLD_SIZE): a test run under a
    # launcher must not leak them into the runs it starts.
    env = clean_env(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args[:3])} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the sample application needs torch, which is not installed")
    work = tmp_path_factory.mktemp("pipeline")
    build, runs = work / "build", work / "runs"
    results = f"{work}/results/r{{ranks}}-b{{batch}}-k{{repetition}}.json"  # rank 0 writes its final loss
    _run(["-m", "instrumentor.cli", str(SAMPLE), "-o", str(build)], cwd=work, timeout=120)
    sweep = ["--sweep", "ranks=" + ",".join(map(str, RANKS)), "--sweep", "batch=" + ",".join(map(str, BATCHES))]
    launch = _run(
        ["-m", "runtime.launch", *sweep, "--repeat", str(REPEAT), "--timeout", "120", "--grace", "3",
         "--out", str(runs), "--experiment", "e2e", "--", str(build / "main.py"), *PROGRAM_ARGS,
         "--result-json", results],
        cwd=work, timeout=900,
    )
    # --min-share 0: the tiny MLP's training is under 1% of a run that importing torch dominates,
    # and every region's model is checked below
    fit = _run(["-m", "modeler", "fit", str(runs / "e2e"), "--format", "json", "--min-share", "0",
                "-o", str(work / "fit.json")], cwd=work, timeout=120)
    report = _run(["-m", "modeler", "report", str(runs / "e2e"), "-o", str(work / "report.html")], cwd=work, timeout=120)
    return {
        "work": work, "build": build, "runs": runs / "e2e", "launch": launch, "fit": fit, "report": report,
        "models": json.loads((work / "fit.json").read_text()),
    }


@pytest.mark.slow
def test_instrumented_build_has_the_sample_regions(pipeline):
    manifest = json.loads((pipeline["build"] / ".scaleprobe" / "manifest.json").read_text())
    kinds = {r["name"]: r["kind"] for r in manifest["regions"]}
    assert kinds["Trainer.train_step"] == "method"
    assert "step" in kinds.values() and "epoch" in kinds.values()
    assert "__sp_enter__" in (pipeline["build"] / "train.py").read_text()
    assert "__sp_" not in (SAMPLE / "train.py").read_text()  # the source tree is never written


@pytest.mark.slow
def test_every_point_of_the_sweep_ran_with_its_ranks(pipeline):
    from runtime.runfile import find_run_files, read_run

    dirs = sorted(d for d in pipeline["runs"].iterdir() if d.is_dir())
    assert len(dirs) == len(RANKS) * len(BATCHES) * REPEAT
    seen = set()
    for d in dirs:
        record = json.loads((d / "launch.json").read_text())
        assert record["status"] == "ok", record
        files = find_run_files(d)
        ranks = record["params"]["ranks"]
        assert len(files) == ranks, f"{d}: {files}"
        for f in files:
            run = read_run(f)
            assert run.problems == [], run.problems
            assert run.end is not None and run.end["status"] == "ok"
            assert run.header["params"] == record["params"] and run.header["world_size"] == ranks
            # every rank ran every step of every epoch, each with a positive duration
            assert len(run.steps) == EPOCHS * STEPS and len(run.epochs) == EPOCHS
            assert all(s["duration_ns"] > 0 for s in run.steps)
        seen.add((ranks, record["params"]["batch"], record["repetition"]))
    assert seen == {(r, b, k) for r in RANKS for b in BATCHES for k in range(REPEAT)}
    assert "0 failed" in pipeline["launch"].stderr


@pytest.mark.slow
def test_instrumented_runs_compute_what_the_original_program_computes(pipeline):
    """Probes must not change the program: the original sample, run plainly, ends with the same loss
    as the instrumented one under the launcher, and every repetition of a point agrees."""
    results = {p.stem: json.loads(p.read_text()) for p in (pipeline["work"] / "results").glob("*.json")}
    assert len(results) == len(RANKS) * len(BATCHES) * REPEAT
    for r in RANKS:
        for b in BATCHES:
            losses = {results[f"r{r}-b{b}-k{k}"]["final_loss"] for k in range(REPEAT)}
            assert len(losses) == 1, (r, b, losses)
            assert results[f"r{r}-b{b}-k0"]["world_size"] == r
    args = [a.replace("{batch}", "4") for a in PROGRAM_ARGS]
    plain = _run([str(SAMPLE / "main.py"), *args], cwd=pipeline["work"], timeout=120)
    assert f"final_loss={results['r1-b4-k0']['final_loss']!r}" in plain.stdout


@pytest.mark.slow
def test_fit_models_the_real_regions_over_the_swept_parameters(pipeline):
    out = pipeline["models"]
    assert sorted(out["parameters"]) == ["batch", "ranks"]
    by_path = {m["callpath"]: m for m in out["models"] if m["metric"] == "time"}
    leaves = {p.rsplit("->", 1)[-1] for p in by_path}
    for region in ("main", "Trainer.fit", "Trainer.train_epoch", "Trainer.train_step", "MLP.forward"):
        assert region in leaves, f"no model for {region}; have {sorted(leaves)}"
    step = next(m for p, m in by_path.items() if p.endswith("->Trainer.train_step"))
    main = by_path["main"]
    for m in (step, main):
        assert m["points"] == len(RANKS) * len(BATCHES)
        assert m["prediction"] > 0 and m["prediction_interval"][1] >= m["prediction"]
        for t in m["terms"]:
            assert {f["parameter"] for f in t["factors"]} <= {"batch", "ranks"}
    assert step["prediction"] < main["prediction"]  # a step is a part of the whole program


@pytest.mark.slow
def test_report_is_one_self_contained_page_naming_the_regions(pipeline):
    path = pipeline["work"] / "report.html"
    html = path.read_text()
    assert html.lstrip().lower().startswith("<!doctype html")
    assert "Trainer.train_step" in html
    # no external resource: the page works offline and when mailed around
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert str(path) in pipeline["report"].stderr + pipeline["report"].stdout


@pytest.mark.slow
def test_scaling_metrics_exist_because_ranks_was_swept(pipeline):
    """ranks varies over the sweep, so the modeler derives speedup, efficiency and imbalance from the
    same runs: a seam between the launcher's `ranks` parameter and the modeler's derived metrics."""
    fit = _run(["-m", "modeler", "fit", str(pipeline["runs"]), "--metric", "all", "--callpath", "*->Trainer.train_step",
                "--format", "json", "-q"], cwd=pipeline["work"], timeout=120)
    models = json.loads(fit.stdout)["models"]
    metrics = {m["metric"] for m in models}
    assert {"time", "speedup", "parallel_efficiency", "imbalance", "visits"} <= metrics, metrics
    visits = next(m for m in models if m["metric"] == "visits")
    assert visits["terms"] == [] and visits["constant"] == pytest.approx(EPOCHS * STEPS)  # one call per step


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["/nonexistent/python"], {}, "python interpreter '/nonexistent/python' not found"),
        ([sys.executable, "--bogus"], {}, "unknown option '--bogus'"),
        ([sys.executable], {"DEMO_BATCH": "4,x"}, "DEMO_BATCH must be comma-separated positive integers, got '4,x'"),
        ([sys.executable], {"DEMO_REPEAT": "0"}, "DEMO_REPEAT must be a positive integer"),
        ([sys.executable], {"DEMO_TIMEOUT": "1m"}, "DEMO_TIMEOUT must be a number of seconds"),
    ],
)
def test_demo_script_refuses_bad_input_before_doing_anything(tmp_path, args, env, message):
    """`make demo`'s script checks its input before it instruments or runs anything (it never gets
    to demo/), and says what is wrong."""
    proc = subprocess.run(["bash", str(DEMO), *args], cwd=tmp_path, env=clean_env(**env),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert message in proc.stderr and proc.stderr.startswith("demo: ")
    assert "1/4" not in proc.stderr  # stopped before the first step


@pytest.mark.parametrize(
    "env, samples",
    [({}, 3 * 256), ({"DEMO_BATCH": "2,4", "DEMO_AT": "batch=16,width=8"}, 3 * 16),
     ({"DEMO_BATCH": "2,40", "DEMO_AT": "width=8,batch=16"}, 3 * 40)],
)
def test_demo_gives_every_run_and_the_target_the_same_steps(tmp_path, env, samples):
    """Review 73: the demo's 512 samples made 2 steps per epoch at its target (batch=256) and 3 at
    every measured point, so its prediction was compared with a run doing a third less work. The
    script is run from a copy of the repository's layout with an interpreter that only logs what it
    is asked, so nothing is instrumented or run."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "demo.sh").write_text(DEMO.read_text())
    log = tmp_path / "calls.txt"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {log}\n")
    fake.chmod(0o755)
    proc = subprocess.run(["bash", str(root / "scripts" / "demo.sh"), str(fake)], cwd=tmp_path,
                          env=clean_env(**env), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    launch = next(line for line in log.read_text().splitlines() if line.startswith("-m runtime.launch"))
    program = launch.split(" -- ", 1)[1].split()
    assert program[program.index("--steps-per-epoch") + 1] == "3"
    assert int(program[program.index("--num-samples") + 1]) == samples
