"""The sample DDP application, instrumented, ends with the same loss as the original on 2 ranks (under
torchrun). One rank: tests/test_pipeline_e2e.py, test_instrumented_runs_compute_what_the_original_program_computes."""
import importlib.util
import re
import sys

import pytest

from instr_helpers import REPO, instrument_cli, run

SAMPLE = REPO / "testdata" / "sample_code"
ARGS = ["main.py", "--epochs", "1", "--steps-per-epoch", "2", "--num-samples", "128"]


def final_loss(cwd, ranks, env):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", *ARGS]
    result = run(cmd, cwd=cwd, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = re.findall(r"^final_loss=(\S+)$", result.stdout, re.MULTILINE)
    assert losses, result.stdout[-2000:]
    return losses


@pytest.fixture(scope="module")
def instrumented(tmp_path_factory):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the sample application needs torch, which is not installed")
    out = tmp_path_factory.mktemp("sample") / "out"
    built = instrument_cli(str(SAMPLE), "-o", str(out))
    assert built.returncode == 0, built.stdout + built.stderr
    assert "step 1" in built.stdout and "epoch 1" in built.stdout
    return out


@pytest.mark.slow
def test_instrumented_sample_gives_the_same_final_loss(instrumented, tmp_path):
    ranks = 2
    runs = tmp_path / "runs"
    original = final_loss(SAMPLE, ranks, {"SCALEPROBE_DISABLE": "1"})
    probed = final_loss(instrumented, ranks, {"SCALEPROBE_OUT": str(runs)})
    assert probed == original
    assert len(list(runs.glob("rank*.jsonl"))) >= ranks
