"""An unknown launcher option like one of its own, or one of the modeler's, names the one meant
(review 62 F7: `--repetitions 3` failed with a bare `unrecognized arguments: --repetitions`)."""

from __future__ import annotations

import pytest

from runtime import launch_args


@pytest.mark.parametrize("argv, hint", [
    (["--repetitions", "3", "train.py"], "--repetitions: did you mean --repeat N"),
    (["--sweeps", "n=1,2", "train.py"], "--sweeps: did you mean --sweep?"),
    (["--repeats=3", "train.py"], "--repeats: did you mean --repeat N"),
])
def test_an_option_like_a_known_one_names_it(argv, hint, capsys):
    with pytest.raises(SystemExit) as e:
        launch_args.parse(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err and hint in err


def test_an_unlike_option_gets_argparse_s_message_alone(capsys):
    with pytest.raises(SystemExit):
        launch_args.parse(["--bogus", "train.py"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --bogus" in err and "did you mean" not in err
