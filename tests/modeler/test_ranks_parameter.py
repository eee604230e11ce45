"""`--ranks-parameter NAME` (`modeler.ranks_name`, review 104 M3): a ring allreduce a*(p-1)/p in an
Extra-P file whose rank count is `p` came out as `log2(p)`, 127% high at 16x, where the same
values under `ranks` were fitted within 1% as `c - W/ranks`."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from modeler.dataset import RANKS_PARAMETER
from modeler.errors import InputError
from modeler.readers import ReadOptions, read_inputs

REPO = Path(__file__).resolve().parents[2]
PS = (1, 2, 4, 8, 16, 32, 64)
TRUTH = {
    "ring": lambda p: 0.05 + 8.0 * (p - 1) / p,  # a ring allreduce (and a latency): rises to a plateau
    "amdahl": lambda p: 10 + 100 / p,
    "comm": lambda p: 0.3 * p,
}


def _write(path: Path, name: str) -> Path:
    rng = np.random.default_rng(7)
    lines = [f"PARAMETER {name}", "POINTS " + " ".join(map(str, PS))]
    for region, f in TRUTH.items():
        lines += [f"REGION {region}", "METRIC time"]
        for p in PS:
            lines.append("DATA " + " ".join(f"{f(p) * (1 + 0.01 * rng.standard_normal()):.6g}"
                                            for _ in range(5)))
    path.write_text("\n".join(lines) + "\n")
    return path


def _renamed(text: str) -> str:
    return re.sub(r"\bp\b", "ranks", text)


def _fit(*args):
    r = subprocess.run([sys.executable, "-m", "modeler", "fit", *map(str, args)], capture_output=True, text=True,
                       cwd=REPO, timeout=300)
    return r


def test_named_rank_count_fits_as_ranks_does(tmp_path):
    as_p = _fit(_write(tmp_path / "p.txt", "p"), "--ranks-parameter", "p", "--at", "p=1024", "--min-share", "0",
                "--format", "json")
    as_ranks = _fit(_write(tmp_path / "ranks.txt", "ranks"), "--at", "ranks=1024", "--min-share", "0",
                    "--format", "json")
    assert as_p.returncode == 0 and as_ranks.returncode == 0, as_p.stderr + as_ranks.stderr
    a, b = json.loads(as_p.stdout), json.loads(as_ranks.stdout)
    models_a = {m["callpath"]: m for m in a["models"]}
    models_b = {m["callpath"]: m for m in b["models"]}
    # every model, prediction and warning is the same as under the name `ranks` (the sweep
    # self-check refits with the same rank count too)
    for cp, m in models_b.items():
        assert models_a[cp]["model"].replace("p^", "ranks^").replace("(p)", "(ranks)") == m["model"], cp
        assert models_a[cp]["prediction"] == pytest.approx(m["prediction"], rel=1e-9)
    assert [_renamed(w) for w in a["warnings"]] == b["warnings"]
    # and the plateau is found: within 5% of the truth at 16x the largest p
    assert models_a["ring"]["prediction"] == pytest.approx(TRUTH["ring"](1024), rel=0.05)


def test_without_the_option_a_ranks_like_name_gets_a_note(tmp_path):
    f = _write(tmp_path / "p.txt", "p")
    r = _fit(f, "--at", "p=1024", "--min-share", "0", "--format", "json")
    assert r.returncode == 0, r.stderr
    ring = next(m for m in json.loads(r.stdout)["models"] if m["callpath"] == "ring")
    assert "p^(-1)" not in ring["model"]  # the plain search alone: no plateau form
    assert "--ranks-parameter p" in r.stderr
    # not under --compat extrap, which fits as Extra-P does, whatever the name
    r = _fit(f, "--compat", "extrap", "--min-share", "0")
    assert r.returncode == 0 and "--ranks-parameter" not in r.stderr, r.stderr
    # nor for a name that counts nothing of the kind
    r = _fit(_write(tmp_path / "n.txt", "n"), "--min-share", "0")
    assert r.returncode == 0 and "--ranks-parameter" not in r.stderr, r.stderr


def test_unknown_or_held_rank_count_is_an_error_naming_the_option(tmp_path):
    f = _write(tmp_path / "p.txt", "p")
    r = _fit(f, "--ranks-parameter", "q")
    assert r.returncode != 0 and "--ranks-parameter q: no parameter 'q' in the inputs; they have p" in r.stderr
    r = _fit(f, "--ranks-parameter", "p", "--where", "p=4")
    assert r.returncode != 0 and "--ranks-parameter p" in r.stderr and "one value" in r.stderr


def test_report_takes_the_option(tmp_path):
    f = _write(tmp_path / "p.txt", "p")
    out = tmp_path / "r.md"
    r = subprocess.run([sys.executable, "-m", "modeler", "report", str(f), "--ranks-parameter", "p", "--format",
                        "markdown", "-o", str(out)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "p^(-1)" in out.read_text() and "--ranks-parameter" not in out.read_text()


def test_read_inputs_sets_it_and_selections_keep_it(tmp_path):
    f = _write(tmp_path / "p.txt", "p")
    assert read_inputs([f]).dataset.ranks_parameter == RANKS_PARAMETER
    ds = read_inputs([f], ReadOptions(ranks_parameter="p")).dataset
    assert ds.ranks_parameter == "p"
    assert ds.select(metrics=["time"]).ranks_parameter == "p"
    assert ds.like(ds.series[:1]).ranks_parameter == "p"
    with pytest.raises(InputError, match="a parameter name is needed"):
        read_inputs([f], ReadOptions(ranks_parameter=""))
