"""Review 123 LOW-8: the modeler's usage errors give the hint the launcher gives: an option like
one of ours or the launcher's is named, and `--at a=1 b=2` is told to join its pairs with ','."""

from __future__ import annotations

import json

import pytest

from modeler import cli


@pytest.fixture
def runs(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps({"params": {"p": n}, "callpath": "main", "metric": "time", "value": [n, n]}) + "\n"
                         for n in (1, 2, 4, 8, 16)))
    return str(f)


@pytest.mark.parametrize("args, hint", [
    (["--repeat", "3"], "--repeat: did you mean --repetitions (how the runs are combined; the launcher's --repeat "
                        "makes them)?"),
    (["--mertic", "time"], "--mertic: did you mean --metric?"),
    (["--at", "p=16", "q=2"], "q=2: --at and --where take their NAME=VALUE pairs in one argument, separated by ',' "
                              "(--at ranks=1024,batch=256)"),
    (["--sweep", "p=1,2"], "--sweep: did you mean --where or --at (the launcher's --sweep makes the runs)?"),
])
def test_an_unknown_argument_gets_a_hint(runs, capsys, args, hint):
    assert cli.main(["fit", runs, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("modeler fit: error: unrecognized arguments: ") and err.endswith("; " + hint), err
    assert err.count("did you mean") + err.count("in one argument") == 1  # the option's value is not a pair


def test_the_report_command_gets_the_hints_too(runs, capsys):
    assert cli.main(["report", runs, "--tpo", "3"]) == 2
    assert capsys.readouterr().err.strip().endswith("--tpo: did you mean --top?")


def test_an_argument_like_nothing_gets_argparses_message_alone(runs, capsys):
    assert cli.main(["fit", runs, "--zzzzzz"]) == 2
    assert capsys.readouterr().err.strip().endswith("error: unrecognized arguments: --zzzzzz")
