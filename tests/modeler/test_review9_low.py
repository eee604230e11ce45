"""Review 9, LOW findings: adjusted R² of an exact split model, `--at` numerals, `-o` into a new directory."""

import subprocess
import sys

import numpy as np
import pytest

from modeler.dataset import Dataset, Series
from modeler.errors import InputError
from modeler.estimator import PMNFModeler
from modeler.target_point import parse_at


def test_an_exact_split_model_is_not_reported_as_explaining_nothing():
    # 10 * ranks^(-1): the fit of values x ranks is the constant 10; the values are not constant,
    # and the model explains all of their variation (adj. R² 0 was the constant's)
    R = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    reps = tuple(np.array([10.0 / r, 10.0 / r]) for r in R[:, 0])
    flat = tuple(np.array([3.0, 3.0]) for _ in R[:, 0])
    est = PMNFModeler().fit(Dataset(("ranks",), [Series("main", "time", R, reps), Series("flat", "time", R, flat)]))
    by = {fm.callpath: fm for fm in est.models_}
    assert by["main"].model.formula() == "10 * ranks^(-1)"
    assert by["main"].ar2 == 1.0
    assert by["flat"].ar2 == 0.0  # a constant still explains nothing


@pytest.mark.parametrize("value", ["1_000", "\u0661\u0666", "nan", "0x10", "1e3x"])
def test_at_takes_numbers_as_users_write_them_only(value):
    with pytest.raises(InputError, match="is not a number"):
        parse_at(f"ranks={value}", ("ranks",), {"ranks": 16.0})
    assert parse_at("ranks=1e3", ("ranks",), {"ranks": 16.0}) == {"ranks": 1000.0}
    assert parse_at("ranks=.5", ("ranks",), {"ranks": 16.0}) == {"ranks": 0.5}


def test_fit_and_export_write_into_a_directory_they_create(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text("".join(f'{{"params": {{"n": {n}}}, "callpath": "main", "metric": "time", "value": [{n}]}}\n'
                         for n in (1, 2, 4, 8, 16)))
    for argv, out in ((["fit", str(f), "-q", "-o"], tmp_path / "a" / "b" / "fit.txt"),
                      (["export", str(f), "-q", "--extrap"], tmp_path / "c" / "d" / "x.jsonl")):
        proc = subprocess.run([sys.executable, "-m", "modeler", *argv, str(out)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_size > 0
