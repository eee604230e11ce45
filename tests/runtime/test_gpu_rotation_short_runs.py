"""A short run's GPU samples go to the regions its steps visit (seen on an H100: a 10-step run of the
sample gave GPU samples to 2 of its 20 visited regions, the turns going to functions defined in
imported modules that no step calls, in region-id order)."""
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]

UNUSED = "".join(f"def unused_{i}(x):\n    return x + {i}\n\n\n" for i in range(30))
SETUP = "".join(f"def setup_{i}(x):\n    return x + {i}\n\n\n" for i in range(8))
PROGRAM = UNUSED + SETUP + '''\
import time


def forward(x):
    return x * 2


def loss(x):
    return x - 1


def backward(x):
    return x + 3


def train(steps):
    for step in range(steps):  # scaleprobe: step
        loss(forward(step))
        backward(step)
        time.sleep(0.3)


if __name__ == "__main__":
    for f in [setup_0, setup_1, setup_2, setup_3, setup_4, setup_5, setup_6, setup_7]:
        f(1)  # visited before the loop, with lower region ids than the step's functions
    train(8)
'''


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_short_runs_turns_go_to_the_regions_its_steps_visit(tmp_path, pure):
    from instrumentor.cli import main as instrument

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text(PROGRAM)
    assert instrument([str(tmp_path / "src"), "-o", str(tmp_path / "out"), "-q"]) == 0
    env = clean_env()
    # no periodic flush in the run's 2.4 s: only the one the rotation asks for after the first step
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "runs"), SCALEPROBE_QUIET="1",
               SCALEPROBE_GPU="fake", SCALEPROBE_FLUSH_INTERVAL="60", SCALEPROBE_PURE=pure)
    p = subprocess.run([sys.executable, str(tmp_path / "out" / "main.py")], env=env, capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    [f] = find_run_files(tmp_path / "runs")
    run = read_run(f)
    sampled = {run.regions[r].name for r in run.gpu_regions}
    # 8 steps: the first 3 or so turns before the flush a second in, then the regions visited in a
    # step (not the set-up functions visited before the loop, though their ids come first)
    assert {"forward", "loss", "backward"} <= sampled, sampled
