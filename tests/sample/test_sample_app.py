"""End-to-end runs of the sample DDP application (testdata/sample_code) in subprocesses.

Every run is tiny (width 4, batch 8, 64 samples): the cost is mostly importing torch.
"""
from __future__ import annotations

import importlib.util
import json
import math
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.envclean import clean_env

APP = Path(__file__).resolve().parents[2] / "testdata" / "sample_code"
MAIN = APP / "main.py"
TIMEOUT_S = 120
# Runs every rank's whole shard: 64 / world size / 8 steps per epoch.
WHOLE_SHARD = ["--epochs", "2", "--batch-size", "8", "--width", "4", "--num-samples", "64", "--eval-samples", "32"]
TINY = [*WHOLE_SHARD, "--steps-per-epoch", "2"]
_FINAL = re.compile(r"^final_loss=(.+)$")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the sample application needs torch")


@dataclass
class AppRun:
    returncode: int
    stdout: str
    stderr: str
    result: dict[str, Any] | None

    @property
    def final_loss(self) -> float:
        lines = self.stdout.strip().splitlines()
        assert lines, f"no output; stderr:\n{self.stderr}"
        match = _FINAL.match(lines[-1])
        assert match, f"last stdout line is not final_loss=...: {lines[-1]!r}"
        return float(match.group(1))


def run_app(workdir: Path, *args: str, launcher: list[str] | None = None) -> AppRun:
    workdir.mkdir(parents=True, exist_ok=True)
    result_path = workdir / "result.json"
    cmd = [sys.executable, *(launcher or []), str(MAIN), *args, "--result-json", str(result_path)]
    proc = subprocess.run(cmd, cwd=workdir, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stderr[-3000:]}"
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    return AppRun(proc.returncode, proc.stdout, proc.stderr, result)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> AppRun:
    return run_app(tmp_path_factory.mktemp("baseline"), *TINY, "--seed", "0")


def test_single_process_reports_its_run(baseline: AppRun) -> None:
    result = baseline.result
    assert result is not None
    assert result["final_loss"] == baseline.final_loss
    assert result["world_size"] == 1
    assert result["steps_done"] == result["global_step"] == 2 * 2
    assert result["epochs_done"] == 2 and result["start_epoch"] == 0
    assert len(result["train_losses"]) == 2 and result["train_losses"][-1] == result["final_loss"]
    assert 0.0 <= result["accuracy"] <= 1.0
    assert math.isfinite(result["eval_loss"])
    assert result["train_s"] > 0 and result["wall_s"] >= result["train_s"]
    assert result["config"]["model"] == "cnn" and result["config"]["width"] == 4
    assert baseline.stdout.count("final_loss=") == 1


def test_same_arguments_give_identical_loss(baseline: AppRun, tmp_path: Path) -> None:
    again = run_app(tmp_path, *TINY, "--seed", "0")
    assert again.final_loss == baseline.final_loss


def test_other_seed_gives_other_loss(baseline: AppRun, tmp_path: Path) -> None:
    other = run_app(tmp_path, *TINY, "--seed", "1")
    assert other.final_loss != baseline.final_loss


def test_dataloader_worker_process_gives_same_loss(baseline: AppRun, tmp_path: Path) -> None:
    # Samples depend only on (seed, split, epoch, index), never on which process generates them.
    with_worker = run_app(tmp_path, *TINY, "--seed", "0", "--workers", "1")
    assert with_worker.result["config"]["workers"] == 1
    assert with_worker.final_loss == baseline.final_loss


def test_mlp_trains(tmp_path: Path) -> None:
    run = run_app(tmp_path, "--model", "mlp", "--epochs", "3", "--batch-size", "16", "--width", "4",
                  "--num-samples", "256", "--eval-samples", "32")
    assert run.result["config"]["model"] == "mlp"
    assert run.result["steps_done"] == 3 * 256 // 16
    losses = run.result["train_losses"]
    assert losses[-1] < losses[0], losses


def test_checkpoint_resume_matches_uninterrupted_run(baseline: AppRun, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    first = run_app(tmp_path / "first", *TINY, "--seed", "0", "--epochs", "1", "--checkpoint-dir", str(ckpt))
    assert (ckpt / "last.pt").is_file()
    assert first.result["epochs_done"] == 1
    resumed = run_app(tmp_path / "resumed", *TINY, "--seed", "0", "--checkpoint-dir", str(ckpt), "--resume")
    assert resumed.result["start_epoch"] == 1
    assert resumed.result["steps_done"] == 2 and resumed.result["global_step"] == 4
    assert resumed.final_loss == baseline.final_loss


@pytest.fixture(scope="module")
def torchrun_two_ranks(tmp_path_factory: pytest.TempPathFactory) -> AppRun:
    return run_app(tmp_path_factory.mktemp("torchrun"), *WHOLE_SHARD,
                   launcher=["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"])


@pytest.mark.slow
def test_torchrun_two_ranks_split_the_data(torchrun_two_ranks: AppRun) -> None:
    result = torchrun_two_ranks.result
    assert result["world_size"] == 2
    assert result["steps_done"] == 2 * (64 // 2 // 8)
    assert torchrun_two_ranks.stdout.count("final_loss=") == 1
    assert result["final_loss"] == torchrun_two_ranks.final_loss


def launch_by_environment(workdir: Path, args: list[str], world_size: int) -> list[AppRun]:
    """Start the ranks as a launcher other than torchrun would: only the environment variables."""
    port = str(free_port())
    procs = []
    for rank in range(world_size):
        rank_dir = workdir / f"rank{rank}"
        rank_dir.mkdir(parents=True)
        env = clean_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        cmd = [sys.executable, str(MAIN), *args, "--result-json", str(rank_dir / "result.json")]
        procs.append(subprocess.Popen(cmd, cwd=rank_dir, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    runs = []
    try:
        for rank, proc in enumerate(procs):
            out, err = proc.communicate(timeout=TIMEOUT_S)
            result_path = workdir / f"rank{rank}" / "result.json"
            result = json.loads(result_path.read_text()) if result_path.exists() else None
            runs.append(AppRun(proc.returncode, out, err, result))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return runs


@pytest.mark.slow
def test_other_launcher_environment_gives_same_run(torchrun_two_ranks: AppRun, tmp_path: Path) -> None:
    for attempt in range(3):
        runs = launch_by_environment(tmp_path / f"attempt{attempt}", WHOLE_SHARD, world_size=2)
        # The port was free when chosen; another process may have taken it since.
        if not any("address already in use" in run.stderr.lower() for run in runs):
            break
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    rank0, rank1 = runs
    assert rank1.stdout == "" and rank1.result is None
    assert rank0.result["world_size"] == 2
    assert rank0.final_loss == torchrun_two_ranks.final_loss
