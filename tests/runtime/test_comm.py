"""torch.distributed operations and DDP's gradient all-reduce become communication records."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run

REPO = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parent / "data" / "comm_app.py"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_collectives_and_ddp_are_recorded(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_") and k not in ("RANK", "WORLD_SIZE")}
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, str(APP), str(tmp_path / "store")], env=env, capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "user hook calls: ['my-state']" in p.stdout  # a hook registered after ours still runs
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    ops: dict[str, dict] = {}
    for c in run.comms:
        o = ops.setdefault(c["op"], {"calls": 0, "bytes": 0, "time_ns": 0, "paths": set()})
        o["calls"] += c["calls"]
        o["bytes"] += c["bytes"]
        o["time_ns"] += c["time_ns"]
        o["paths"].add(run.callpath_name(tuple(c["callpath"])))
    assert ops["all_reduce"]["calls"] == 4 and ops["all_reduce"]["bytes"] == 4 * 1024
    assert ops["broadcast"]["calls"] == 2 and ops["barrier"]["calls"] == 2
    assert "sync->torch.distributed.all_reduce" in ops["all_reduce"]["paths"]
    assert ops["ddp_allreduce"]["calls"] >= 2 and ops["ddp_allreduce"]["bytes"] >= 2 * (16 * 4 + 4) * 4
    assert all(c["group_size"] == 1 for c in run.comms)
    assert all(o["time_ns"] > 0 for o in ops.values())
    assert all(s["comm_ns"] > 0 for s in run.steps)
    # The comm regions are in the call-path profile too.
    assert any(run.callpath_name(k) == "sync->torch.distributed.broadcast" for k in run.profile)


DDP_HOOK_SCRIPT = r'''
import torch, torch.distributed
from runtime import recorder
from runtime.comm import _HookState, _ddp_hook

rec = recorder.start()
state = _HookState(None, rec.new_region("comm", "DistributedDataParallel.allreduce"), rec)
state.group_size = 2
futures = []

def user_hook(user_state, bucket):
    futures.append(torch.futures.Future())
    return futures[-1]

class Bucket:
    def buffer(self):
        return torch.zeros(8)

state.user_hook = user_hook
ok = _ddp_hook(state, Bucket())
assert ok is futures[0], "the hook's future is handed on, not chained"
ok.set_result(torch.ones(8))
assert [k[0] for k in rec.comm] == ["ddp_allreduce"], rec.comm
bad = _ddp_hook(state, Bucket())
bad.set_exception(RuntimeError("Connection closed by peer"))
try:
    bad.wait()
except RuntimeError as e:
    print("ERROR:" + str(e).splitlines()[0])
'''


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_the_ddp_hook_times_the_all_reduce_without_wrapping_its_error(tmp_path):
    """Review 20: a peer's death reached the program as "Got the following error when running the
    callback: Got the following error when running the callback: ..." naming runtime/comm.py: our
    hook chained a second future onto PyTorch's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEPROBE_")}
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"))
    p = subprocess.run([sys.executable, "-c", DDP_HOOK_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "ERROR:Connection closed by peer" in p.stdout, p.stdout
