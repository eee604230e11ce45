"""Review 69: `modeler report` and `modeler export --extrap`.

F1 the report's growth label of a falling model read as a growing one; F2 a failed write left a cut
file in place of the previous one; F3 a region named `a->b` merged with the call path `a->b`; F4 the
heat map's held parameters were neither named nor measured; F5 prose without (or with one)
parameter; F6 markdown did not escape `&`.
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import math
import os
import re
import stat
from pathlib import Path

import pytest

from modeler import cli, mdtext

from .modeler_synthetic_runs import write_rank_file
from .test_timeline import write_rank as write_traced_rank


def _extrap(path: Path, grid: dict[str, list[float]], series: dict[str, object]) -> Path:
    """Extra-P JSON Lines over the product of `grid`, three repetitions (±1%) per point."""
    import itertools

    names = list(grid)
    with open(path, "w", encoding="utf-8") as f:
        for values in itertools.product(*(grid[n] for n in names)):
            params = dict(zip(names, values))
            for callpath, fn in series.items():
                v = fn(**params)
                f.write(json.dumps({"params": params, "callpath": callpath, "metric": "time",
                                    "value": [v * 0.99, v, v * 1.01]}) + "\n")
    return path


# --- F1: a falling model's growth label -------------------------------------------------------

def _falling(tmp_path: Path) -> Path:
    return _extrap(tmp_path / "neg.jsonl", {"n": [2, 4, 8, 16, 32]},
                   {"main": lambda n: 1.2 - 0.1 * math.log2(n), "main->grow": lambda n: 0.0001 * n})


def _fit_growth(path: Path, callpath: str, capsys) -> str:
    assert cli.main(["fit", str(path), "--min-share", "0", "-q"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if re.match(rf"\s*\d+!?\s+{re.escape(callpath)}\s", ln))
    return re.split(r"\s{2,}", line.strip())[3]


def test_the_report_words_a_falling_model_as_fit_does(tmp_path, capsys):
    path = _falling(tmp_path)
    fit_growth = _fit_growth(path, "main", capsys)
    assert fit_growth == "falling (log^1)"
    md = tmp_path / "r.md"
    assert cli.main(["report", str(path), "--format", "markdown", "--min-share", "0", "-o", str(md), "-q"]) == 0
    row = next(ln for ln in md.read_text(encoding="utf-8").splitlines() if ln.startswith("|") and "| `main` |" in ln)
    assert row.split(" | ")[2] == fit_growth, row  # was `log2(n)^(1)`, the label of a log n rise
    html = tmp_path / "r.html"
    assert cli.main(["report", str(path), "--min-share", "0", "-o", str(html), "-q"]) == 0
    pills = re.findall(r'<span class="growth[^"]*">([^<]*)</span>', html.read_text(encoding="utf-8"))
    assert "falling (log^1)" in pills and "log2(n)^(1)" not in pills
    assert "deg 1" in pills  # the growing one, as fit words it too


# --- F2: whole or not at all ------------------------------------------------------------------

class _FullDisk:
    """A file whose first write stores half of its text and then fails as a full disk does."""

    def __init__(self, f) -> None:
        self._f = f

    def write(self, text: str) -> int:
        self._f.write(text[: len(text) // 2])
        self._f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        self._f.close()
        return False

    def __getattr__(self, name):
        return getattr(self._f, name)


@pytest.fixture
def full_disk(monkeypatch, tmp_path):
    """Every file opened for writing under tmp_path/out fails half-way through its first write."""
    folder = str(tmp_path / "out")
    real = io.open

    def under(file) -> bool:
        where = os.readlink(f"/proc/self/fd/{file}") if isinstance(file, int) else os.path.abspath(file)
        return where.startswith(folder + os.sep)

    def opener(file, mode="r", *args, **kwargs):
        f = real(file, mode, *args, **kwargs)
        return _FullDisk(f) if "w" in mode and under(file) else f

    monkeypatch.setattr(io, "open", opener)
    monkeypatch.setattr(builtins, "open", opener)
    return tmp_path / "out"


def _inputs(tmp_path: Path) -> dict[str, Path]:
    runs = tmp_path / "traced"
    write_traced_rank(runs, 0)
    write_traced_rank(runs, 1)
    return {"jsonl": _falling(tmp_path), "runs": runs}


@pytest.mark.parametrize("command, name", [
    (lambda i, out: ["fit", str(i["jsonl"]), "-o", str(out), "-q"], "fit.txt"),
    (lambda i, out: ["fit", str(i["jsonl"]), "--format", "csv", "-o", str(out), "-q"], "fit.csv"),
    (lambda i, out: ["report", str(i["jsonl"]), "-o", str(out), "-q"], "r.html"),
    (lambda i, out: ["report", str(i["jsonl"]), "--format", "markdown", "-o", str(out), "-q"], "r.md"),
    (lambda i, out: ["export", str(i["jsonl"]), "--extrap", str(out), "-q"], "x.jsonl"),
    (lambda i, out: ["timeline", str(i["runs"]), "-o", str(out)], "trace.json"),
], ids=["fit", "fit-csv", "report", "report-md", "export", "timeline"])
@pytest.mark.parametrize("old", ["OLD\n", None], ids=["over-a-file", "new-file"])
def test_a_failed_write_keeps_the_previous_file_and_leaves_no_cut_one(tmp_path, full_disk, capsys, command, name, old):
    inputs = _inputs(tmp_path)
    full_disk.mkdir()
    out = full_disk / name
    if old is not None:  # written below the patched open
        fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, old.encode())
        os.close(fd)
    assert out.exists() == (old is not None)
    capsys.readouterr()
    assert cli.main(command(inputs, out)) == cli.EXIT_ERROR
    assert "No space left on device" in capsys.readouterr().err
    if old is None:
        assert not out.exists()  # no cut file that `modeler fit` would read as valid input
    else:
        assert out.read_text() == old  # was the first half of the new output
    assert sorted(os.listdir(full_disk)) == ([name] if old is not None else [])  # no temporary file left


def test_a_written_file_keeps_the_old_ones_permissions_and_a_device_is_written_in_place(tmp_path, capsys):
    """Not from the review: the new way of writing must not lose what `open(path, "w")` kept."""
    path = _falling(tmp_path)
    out = tmp_path / "out" / "fit.txt"
    out.parent.mkdir()
    out.write_text("OLD\n")
    os.chmod(out, 0o640)
    assert cli.main(["fit", str(path), "-o", str(out), "-q"]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and "callpath" in out.read_text()
    link = tmp_path / "out" / "link.txt"
    link.symlink_to(out)
    assert cli.main(["fit", str(path), "--format", "csv", "-o", str(link), "-q"]) == 0
    assert link.is_symlink() and out.read_text().startswith("rank,")  # replaced where the link leads
    assert cli.main(["export", str(path), "--extrap", os.devnull, "-q"]) == 0
    assert Path(os.devnull).is_char_device()
    assert sorted(os.listdir(out.parent)) == ["fit.txt", "link.txt"]


# --- F3: a region name holding the separator --------------------------------------------------

def _arrow_runs(root: Path) -> Path:
    """`main` calls manual region `a->b` (0.01 s * n) and `a`, which calls `b` (0.003 s * n^2)."""
    regions = [(0, "function", "main", "main.py", 1), (1, "manual", "a->b", "<manual>", 0),
               (2, "function", "a", "m.py", 3), (3, "function", "b", "m.py", 4)]
    for i, n in enumerate((1, 2, 4, 8, 16)):
        for rep in range(2):
            f = 1 + 0.01 * rep
            t1, t2, t3 = int(1e7 * n * f), int(2e7 * f), int(3e6 * n * n * f)
            write_rank_file(root / f"run{i}-{rep}", run_id=f"run{i}-{rep}", params={"n": n}, repetition=rep,
                            regions=regions,
                            profile={(0,): (1, t1 + t2 + t3 + 10**6, 10**6), (0, 1): (1, t1, t1),
                                     (0, 2): (1, t2 + t3, t2), (0, 2, 3): (1, t3, t3)})
    return root


def test_a_region_named_with_the_separator_stays_apart_from_the_call_path_it_spells(tmp_path, capsys):
    runs = _arrow_runs(tmp_path / "arrow")
    assert cli.main(["fit", str(runs), "--format", "json", "--min-share", "0", "-q"]) == 0
    models = {m["callpath"]: m for m in json.loads(capsys.readouterr().out)["models"] if m["metric"] == "time"}
    assert set(models) == {"main", "main->a", "main->a->b", "main->a-\\>b"}
    # each its own: b grows as n^2, the manual region as n (merged, they were 0.006 + 0.0072 * n^(7/4))
    assert models["main->a->b"]["growth"]["exponent"] == 2
    assert models["main->a-\\>b"]["growth"]["exponent"] == 1
    assert cli.main(["export", str(runs), "--extrap", "-", "--metric", "time", "-q"]) == 0
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert {r["callpath"] for r in lines} == set(models)
    at16 = {r["callpath"]: r["value"][0] for r in lines if r["params"]["n"] == 16}
    assert at16["main->a->b"] == pytest.approx(3e-3 * 256) and at16["main->a-\\>b"] == pytest.approx(0.16)


def test_region_labels_never_hold_the_separator_and_stay_one_to_one():
    from types import SimpleNamespace

    from modeler.aggregate import RegionNames

    names = ["a->b", "a-\\>b", "a-\\\\>b", "a-->b", "->", "x", "a-b>c", "main"]
    rf = SimpleNamespace(run=SimpleNamespace(regions={i: SimpleNamespace(name=n, file="m.py") for i, n in enumerate(names)}),
                         spawned=False)
    labels = RegionNames([SimpleNamespace(files=[rf])])
    steps = [labels.label(rf, i) for i in range(len(names))]
    assert len(set(steps)) == len(names) and not any("->" in s for s in steps), steps
    assert steps[:2] == ["a-\\>b", "a-\\\\>b"]
    assert steps[-3:] == ["x", "a-b>c", "main"]  # names without the separator are left as they are
    assert labels.callpath(rf, [7, 0]) == "main->a-\\>b"


# --- F4: the heat map's held parameters -------------------------------------------------------

@pytest.fixture(scope="module")
def three(tmp_path_factory) -> Path:
    values = [1, 2, 4, 8, 16]
    return _extrap(tmp_path_factory.mktemp("three") / "three.jsonl", {"x": values, "y": values, "z": values},
                   {"main": lambda x, y, z: 1e-3 * x * y + 1e-3 * z})


def _heat_svg(html: str) -> str:
    return next(svg for svg in re.findall(r"<svg.*?</svg>", html, re.S) if "model over x x y" in svg)


@pytest.mark.parametrize("hold, held", [(None, "z=16"), ("z=4", "z=4"), ("z=3", "z=16")])
def test_the_heat_map_names_where_it_holds_the_others_and_falls_back_as_the_lines_do(three, tmp_path, hold, held):
    out = tmp_path / "r.html"
    assert cli.main(["report", str(three), "--top", "1", "-o", str(out), "-q"]
                    + ([] if hold is None else ["--hold", hold])) == 0
    heat = _heat_svg(out.read_text(encoding="utf-8"))
    assert f"model over x x y ({held}) (outlined: measured)" in heat
    # z=3 was never measured: the map is drawn where z was (as the line charts are), its cells measured
    # (the target is the largest measured point: every cell of the 5 x 5 map was measured)
    assert heat.count('stroke="#000"') == 25 and "(not measured)" not in heat


# --- F5: no parameter, one parameter -----------------------------------------------------------

def _one_config(root: Path, values=(16,)) -> Path:
    for i, n in enumerate(values):
        for rep in range(2):
            t = int(1e8 * n * (1 + 0.01 * rep))
            write_rank_file(root / f"run{i}-{rep}", run_id=f"run{i}-{rep}", params={"n": n}, repetition=rep,
                            regions=[(0, "function", "main", "main.py", 1)], profile={(0,): (1, t, t)})
    return root


def test_prose_without_parameters_leaves_the_target_out(tmp_path):
    runs = _one_config(tmp_path / "one")
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    assert cli.main(["report", str(runs), "-o", str(html), "-q"]) == 0
    assert cli.main(["report", str(runs), "--format", "markdown", "-o", str(md), "-q"]) == 0
    page = re.sub(r"\s+", " ", html.read_text(encoding="utf-8"))
    text = md.read_text(encoding="utf-8")
    assert "target n/a" in page and "target n/a" in text
    for empty in ("predicted run time at <", "predicted at <", "predicted at :", "at the target .", "at the target <"):
        assert empty not in page, empty
    assert "predicted run time" in page  # the card is there, without a point
    assert "prediction at )" not in text and "Predicted run time at :" not in text
    assert "Predicted run time (mean over ranks): **" in text and "then the prediction)" in text


def test_one_parameter_says_nothing_of_parameters_held(tmp_path):
    runs = _one_config(tmp_path / "one", (1, 2, 4, 8, 16))
    html = tmp_path / "r.html"
    assert cli.main(["report", str(runs), "-o", str(html), "-q"]) == 0
    page = html.read_text(encoding="utf-8")
    assert "against n" in page and "Parameters not on the x axis" not in page


# --- F6: `&` in markdown -------------------------------------------------------------------------

def test_markdown_escapes_the_ampersand_so_that_entities_show_as_written(tmp_path):
    assert mdtext.text('q"\'&amp; &lt;x&gt;') == 'q"\'\\&amp; \\&lt;x\\&gt;'
    path = tmp_path / "pname.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for q in (2, 4, 8, 16, 32):
            f.write(json.dumps({"params": {"q&amp;": q}, "callpath": "main", "metric": "time",
                                "value": [q * 0.99, q, q * 1.01]}) + "\n")
    md = tmp_path / "r.md"
    assert cli.main(["report", str(path), "--format", "markdown", "-o", str(md), "-q"]) == 0
    text = md.read_text(encoding="utf-8")
    assert "target q\\&amp;=32" in text and "q&amp;=32" not in text.replace("q\\&amp;=32", "")
