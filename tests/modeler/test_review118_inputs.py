"""Review 118 (bad input, modeler side): a damaged first line does not hide a file, one input over
other parameters does not stop a batch, and negative times, cut numbers, a rank beyond the world
size and the same measurements given twice are said."""

from __future__ import annotations

import json
from pathlib import Path

from modeler import cli
from modeler.readers import read_inputs

from .modeler_synthetic_runs import write_rank_file

N = (1, 2, 4, 8, 16)


def _lines(callpath: str = "main", params: tuple[str, ...] = ("n",), scale: float = 1.0) -> list[str]:
    """Extra-P JSON Lines of `callpath`'s time, 2 * n^1 * scale, three repetitions a point."""
    return [json.dumps({"params": {p: n for p in params}, "callpath": callpath, "metric": "time",
                        "value": [round(2.0 * n * scale * (1 + 0.01 * r), 6) + 0.125 for r in range(3)]})
            for n in N]


def _text(values: list[str], ending: str = "") -> str:
    head = "PARAMETER n\nPOINTS " + " ".join(map(str, N)) + "\nREGION main\nMETRIC time\n"
    return head + "\n".join(f"DATA {v}" for v in values) + ending


def _fit(capsys, *args: str) -> tuple[int, str, list[str]]:
    rc = cli.main(["fit", *args, "--format", "json"])
    out, err = capsys.readouterr()
    return rc, out, err.splitlines()


def test_a_cut_first_line_of_an_extrap_file_in_a_folder_is_named_and_its_other_lines_read(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    cut = '{"params": {"n": 1}, "callpath": "main", "metric": "time", "val'
    (folder / "b.jsonl").write_text("\n".join([cut, *_lines()]) + "\n")
    rc, out, err = _fit(capsys, str(folder))
    assert rc == 0
    assert any(f"{folder / 'b.jsonl'}:1: not valid JSON" in line for line in err)
    (model,) = json.loads(out)["models"]
    assert model["callpath"] == "main" and model["points"] == len(N)


def test_a_text_file_whose_first_field_has_a_typo_is_named_at_that_line(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("\n".join(_lines()) + "\n")
    (folder / "b.txt").write_text(_text(["1 1 1"] * 5).replace("PARAMETER n", "PARAMETR n"))
    rc, _, err = _fit(capsys, str(folder))
    assert rc == 3  # named and skipped, not counted as "ignored: not measurements"
    assert any(f"{folder / 'b.txt'}:1: unknown field 'PARAMETR'" in line for line in err)


def test_a_damaged_jsonl_in_a_folder_is_named_and_another_tools_json_log_is_not(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("\n".join(_lines()) + "\n")
    (folder / "junk.jsonl").write_bytes(bytes(range(256)) * 4)
    (folder / "half.jsonl").write_text('{"step": 1, "loss"\n{"step": 2}\n')
    (folder / "log.jsonl").write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n')
    loaded = read_inputs([folder])
    status = {Path(f.path).name: (f.status, f.reason) for f in loaded.files}
    assert status["junk.jsonl"][0] == "skipped" and "binary content" in status["junk.jsonl"][1]
    assert status["half.jsonl"] == ("skipped", f"{folder / 'half.jsonl'}:1: not JSON (a damaged measurements file?)")
    assert status["log.jsonl"][0] == "ignored"
    rc, _, err = _fit(capsys, str(folder))
    assert rc == 3 and any("junk.jsonl" in line for line in err) and not any("log.jsonl" in line for line in err)


def test_an_input_over_other_parameters_is_skipped_and_the_others_read(tmp_path, capsys):
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(_lines(callpath=name)) + "\n")
    (tmp_path / "odd.jsonl").write_text("\n".join(_lines(params=("p",))) + "\n")
    rc, out, err = _fit(capsys, str(tmp_path))
    assert rc == 3
    assert sorted(m["callpath"] for m in json.loads(out)["models"]) == ["a", "b", "c"]
    assert any(f"{tmp_path / 'odd.jsonl'}: skipped: its parameters (p) differ from those of the other inputs (n: 3 of 4"
               in line for line in err)


def test_runs_outnumber_an_extrap_file_over_other_parameters(tmp_path, capsys):
    for n in N:
        write_rank_file(tmp_path / "runs" / f"n{n}", run_id=f"run{n}", params={"n": n}, rank=0, world_size=1,
                        repetition=0, profile={(0,): (1, 10**6 * n, 10**6 * n)})
    (tmp_path / "p.jsonl").write_text("\n".join(_lines(params=("p",))) + "\n")
    rc, out, err = _fit(capsys, str(tmp_path / "runs"), str(tmp_path / "p.jsonl"))
    assert rc == 3 and json.loads(out)["parameters"] == ["n"]
    assert any("p.jsonl: skipped: its parameters (p) differ" in line for line in err)


def test_an_even_split_of_parameters_still_stops_naming_both(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text("\n".join(_lines()) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(_lines(params=("p",))) + "\n")
    rc, _, err = _fit(capsys, str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))
    assert rc == 1 and "inputs disagree on the parameters" in err[-1] and "b.jsonl" in err[-1]


def test_negative_times_in_extrap_inputs_are_named_at_their_line(tmp_path, capsys):
    lines = _lines()
    bad = json.loads(lines[2])
    bad["value"] = [-0.5, 8.1, 8.2]
    lines[2] = json.dumps(bad)
    (tmp_path / "neg.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "neg.txt").write_text(_text(["1 1.1 1", "2 2.1 2", "-4e-3 4 4.1", "8 8 8.1", "16 16 16.1"], "\n"))
    visits = [json.dumps({"params": {"n": n}, "callpath": "main", "metric": "level", "value": -n}) for n in N]
    (tmp_path / "level.jsonl").write_text("\n".join(visits) + "\n")
    for name, line, value in (("neg.jsonl", 3, "-0.5"), ("neg.txt", 7, "-0.004")):
        _, _, err = _fit(capsys, str(tmp_path / name))
        assert any(f"{tmp_path / name}:{line}: a value of metric 'time' is negative ({value})" in w for w in err), err
    _, _, err = _fit(capsys, str(tmp_path / "level.jsonl"))
    assert not any("negative" in w for w in err)  # a metric of any other name may be negative, as in Extra-P


def test_a_last_text_value_cut_to_a_point_is_warned_of_and_a_whole_one_is_not(tmp_path, capsys):
    values = ["1 1.1 1", "2 2.1 2", "4 4.1 4", "8 8 8.1", "16 16 0."]
    (tmp_path / "cut.txt").write_text(_text(values))
    (tmp_path / "ended.txt").write_text(_text(values, "\n"))
    (tmp_path / "whole.txt").write_text(_text(values[:-1] + ["16 16 16.1"]))
    _, _, err = _fit(capsys, str(tmp_path / "cut.txt"))
    assert any(f"{tmp_path / 'cut.txt'}:9: the last line may be cut off" in w and "'0.'" in w for w in err)
    for name in ("ended.txt", "whole.txt"):
        _, _, err = _fit(capsys, str(tmp_path / name))
        assert not any("cut off" in w for w in err), name


def test_a_rank_file_whose_rank_is_beyond_its_world_size_is_named(tmp_path, capsys):
    for n in N:
        for rank in range(2):
            write_rank_file(tmp_path / f"n{n}", run_id=f"run{n}", params={"n": n}, rank=rank, world_size=2,
                            repetition=0, profile={(0,): (1, 10**6 * n, 10**6 * n)})
    (victim,) = (tmp_path / "n4").glob("rank1.*.jsonl")
    victim.write_text(victim.read_text().replace('"rank": 1,', '"rank": 5,').replace('"rank":1,', '"rank":5,'))
    loaded = read_inputs([tmp_path])
    (named,) = [f for f in loaded.files if f.path == str(victim)]
    assert named.status == "skipped" and "rank=5 is not below world_size=2" in named.reason


def test_the_same_measurements_given_twice_are_said_and_counts_alike_are_not(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text("\n".join(_lines()) + "\n")
    (tmp_path / "copy.jsonl").write_text("\n".join(_lines()) + "\n\n")  # not byte for byte
    (tmp_path / "other.jsonl").write_text("\n".join(_lines(scale=1.5)) + "\n")
    counts = [json.dumps({"params": {"n": n}, "callpath": "main", "metric": "visits", "value": [n, n]}) for n in N]
    (tmp_path / "v1.jsonl").write_text("\n".join(counts) + "\n")
    (tmp_path / "v2.jsonl").write_text("\n".join(counts) + "\n\n")
    _, _, err = _fit(capsys, str(tmp_path / "a.jsonl"), str(tmp_path / "copy.jsonl"))
    assert any("a.jsonl and " in w and "copy.jsonl hold the same values at 5 of the 5" in w for w in err), err
    for pair in (("a.jsonl", "other.jsonl"), ("v1.jsonl", "v2.jsonl")):
        _, _, err = _fit(capsys, *(str(tmp_path / p) for p in pair))
        assert not any("same values" in w for w in err), pair
