"""Review 104 H1 (and H2, M2, M3): a model within a few percent of every point that parts from the
values' growth at the end of the sweep (a sum of terms fitted as one) predicts far off beyond it,
and nothing said so. `modeler.end_slope` compares the measured and the modeled local exponents
between the two largest values of each parameter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modeler import cli
from modeler.dataset import Dataset, Series
from modeler.end_slope import end_slope_note
from modeler.estimator import PMNFModeler

N = (512, 1024, 2048, 4096, 8192)


def _series(name, f, xs=N, noise=0.01, reps=5, seed=0):
    rng = np.random.default_rng(seed)
    return Series(name, "time", [[x] for x in xs], [[f(x) * (1 + noise * rng.standard_normal()) for _ in range(reps)]
                                                     for x in xs])


def _fit(*series, params=("n",)):
    return PMNFModeler().fit(Dataset(params, list(series))).models_


def test_a_sum_of_two_growing_terms_is_said_to_steepen_beyond_the_model():
    (m,) = _fit(_series("attention", lambda n: 1e-6 * n**2 + 1e-3 * n))
    notes = [w for w in m.warnings if "grow as" in w]
    assert len(notes) == 1, m.warnings
    assert notes[0].startswith("attention [time]: between n=4096 and n=8192 the values grow as n^1.8")
    assert "steepens" in notes[0] and "likely low" in notes[0]
    # and it is so: the model predicts low at 16x the largest n
    assert m.predict([[16 * 8192]])[0] < 0.8 * (1e-6 * (16 * 8192) ** 2 + 1e-3 * 16 * 8192)


def test_a_step_inside_the_sweep_is_said_to_ease_off():
    (m,) = _fit(_series("step", lambda p: 10.0 if p <= 8 else 25.0, xs=(1, 2, 4, 8, 16, 32, 64)), params=("p",))
    notes = [w for w in m.warnings if "grow as" in w]
    assert len(notes) == 1 and "eases off" in notes[0] and "likely high" in notes[0], m.warnings


@pytest.mark.parametrize("noise", [0.0, 0.02, 0.1])
def test_one_term_functions_are_never_said_to_part(noise):
    rng = np.random.default_rng(7)
    forms = [(0.5, 0), (1, 0), (2, 0), (0, 1), (1, 1), (1 / 3, 0), (3, 0), (0, 2)]
    series = []
    for k in range(24):
        i, j = forms[k % len(forms)]
        c, a = rng.uniform(0.1, 10), rng.uniform(0.1, 10)
        series.append(_series(f"c{k}", lambda x, i=i, j=j, c=c, a=a: c + a * x**i * math.log2(x) ** j,
                              xs=(4, 8, 16, 32, 64), noise=noise, seed=k))
    assert not [w for m in _fit(*series, params=("x",)) for w in m.warnings if "grow as" in w]


def test_with_one_run_a_point_the_residuals_set_the_bar():
    """No spread to go by: the model's own residuals stand for the noise (they hold the misfit too),
    so exact values measured once are not said to part where the same values measured twice are."""
    s = _series("one", lambda n: 1e-6 * n**2 + 1e-3 * n, noise=0.0, reps=1)
    (m,) = _fit(s)
    values = np.array([r[0] for r in s.repetitions])
    assert end_slope_note(("n",), s.points, values, np.zeros(5), np.ones(5), m.model) is None
    assert "steepens" in end_slope_note(("n",), s.points, values, np.zeros(5), np.full(5, 2), m.model)


def test_along_each_parameter_of_a_grid_on_its_top_line():
    xs, ys = (1, 2, 4, 8, 16), (10, 20, 30, 40, 50)
    pts = [[x, y] for x in xs for y in ys]
    f = lambda x, y: y * (x**2 + 1.0 * x)  # noqa: E731 - the sum is in x
    rng = np.random.default_rng(1)
    s = Series("g", "time", pts, [[f(x, y) * (1 + 0.005 * rng.standard_normal()) for _ in range(5)] for x, y in pts])
    (m,) = _fit(s, params=("x", "y"))
    notes = [w for w in m.warnings if "grow as" in w]
    assert m.model.growth()[0] < 2.9, m.model.formula()  # the fit took the sum for one term of x
    assert len(notes) == 1 and notes[0].startswith("g [time]: between x=8 and x=16 (y=50) the values grow as x^1.9"), m.warnings


def test_the_cli_says_it_and_compat_extrap_does_not(tmp_path, capsys):
    path = tmp_path / "attention.txt"
    rng = np.random.default_rng(0)
    lines = ["PARAMETER n", "POINTS " + " ".join(map(str, N)), "REGION attention", "METRIC time"]
    for n in N:
        v = 1e-6 * n**2 + 1e-3 * n
        lines.append("DATA " + " ".join(f"{v * (1 + 0.01 * rng.standard_normal()):.6g}" for _ in range(5)))
    path.write_text("\n".join(lines) + "\n")
    assert cli.main(["fit", str(path), "--at", "n=131072"]) == cli.EXIT_OK
    err = capsys.readouterr().err
    assert "attention [time]: between n=4096 and n=8192 the values grow as" in err and "steepens" in err
    assert cli.main(["fit", str(path), "--compat", "extrap"]) == cli.EXIT_OK
    assert "grow as" not in capsys.readouterr().err


def test_the_rates_benchmark_runs_and_says_nothing_of_one_term_functions():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "end_slope_rates.py"
    p = subprocess.run([sys.executable, str(script), "--series", "12"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 10
    assert all(" said   0/12" in line for line in lines if line.startswith("one "))
    sums = [line for line in lines if line.startswith("sum ")]
    assert any(" said   0/12" not in line for line in sums)
    for line in sums:  # every note said of a sum has the error's direction right
        said = line.split("said")[1].split("/")[0].strip()
        assert f"direction right {said}/{said}" in line, line
