"""torch.distributed operations and DDP's gradient all-reduce become communication records."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runfile import find_run_files, read_run
from tests.envclean import clean_env

REPO = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parent / "data" / "comm_app.py"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_collectives_and_ddp_are_recorded(tmp_path):
    env = clean_env()
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
import threading, time
import runtime.comm as comm
slow = comm.record
def record(*args, **kwargs):  # a recording that takes a while, as under load
    time.sleep(0.3)
    slow(*args, **kwargs)
comm.record = record
handed = _ddp_hook(state, Bucket())
# what DDP does with the hook's future: the reducer waits for it in another thread, then goes on
threading.Timer(0.1, lambda: futures[0].set_result(torch.ones(8))).start()
assert handed.wait().tolist() == [1.0] * 8
print("SEEN", [sorted(k[0] for k in rec.comm)])
'''


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_the_ddp_hook_records_the_bucket_before_ddp_goes_on(tmp_path):
    """Review 22: with a done callback on PyTorch's future (to spare the error a second wrapping),
    the step could end before the bucket was recorded: 2 to 12 of 400 steps had no all-reduce."""
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"))
    p = subprocess.run([sys.executable, "-c", DDP_HOOK_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "SEEN [['ddp_allreduce']]" in p.stdout, p.stdout


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_traced_collectives_are_trace_events(tmp_path):
    """Review 93 MED-1's follow-up: with SCALEPROBE_TRACE=1 the torch.distributed calls that the
    runtime wraps went to the backend directly, and a timeline lacked them."""
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), OMP_NUM_THREADS="1", SCALEPROBE_TRACE="1")
    p = subprocess.run([sys.executable, str(APP), str(tmp_path / "store")], env=env, capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    names = {rid: reg.name for rid, reg in run.regions.items()}
    traced = [names[e[0]] for e in run.events]
    assert traced.count("torch.distributed.all_reduce") == 4 and traced.count("torch.distributed.broadcast") == 2
    # every event of a wrapped call lies inside its caller's
    by_rid = {}
    for rid, t0, t1, _tid in run.events:
        by_rid.setdefault(names[rid], []).append((t0, t1))
    assert all(t0 <= t1 for spans in by_rid.values() for t0, t1 in spans)


MANUAL_ONLY_APP = r'''
import sys
import torch
import torch.distributed as dist
from runtime.manual import region

dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}", rank=0, world_size=1)
with region("sync"):
    dist.all_reduce(torch.ones(256))
    dist.barrier()
'''


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_a_program_of_manual_regions_alone_records_its_collectives(tmp_path):
    """Review 94 LOW-7: without an instrumented module or an epoch/step loop, torch.distributed was
    never wrapped: no communication records."""
    (tmp_path / "app.py").write_text(MANUAL_ONLY_APP)
    env = clean_env()
    env.update(PYTHONPATH=str(REPO), SCALEPROBE_OUT=str(tmp_path / "out"), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "app.py", str(tmp_path / "store")], env=env, capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    [f] = find_run_files(tmp_path / "out")
    run = read_run(f)
    ops = {c["op"]: c for c in run.comms}
    assert ops["all_reduce"]["calls"] == 1 and ops["all_reduce"]["bytes"] == 1024 and ops["barrier"]["calls"] == 1
    assert run.callpath_name(tuple(ops["all_reduce"]["callpath"])) == "sync->torch.distributed.all_reduce"
