"""Review 67 F5: the collectives of pickled objects (all_gather_object, broadcast_object_list,
gather_object, scatter_object_list) left no comm record: c10d runs them through its own
module-level all_gather/broadcast/gather/scatter, which are not wrapped. Each is now a call of its
own, with the bytes of the pickled objects this rank sends (or, where it only receives, receives).
Also torch 2.13's all_gather_single/reduce_scatter_single, which were not wrapped either."""
import importlib.util
import json

import pytest

from .test_comm_review33 import comm_ops, run_ranks

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")

OBJECTS = '''
import pickle

def size(*objs):
    return sum(len(pickle.dumps(o)) for o in objs)

def work():
    if __sp_on__: __sp_enter__(0)
    try:
        mine = {"rank": rank, "pad": "x" * (100 * (rank + 1))}
        objs = [None] * world
        dist.all_gather_object(objs, mine)
        assert [o["rank"] for o in objs] == [0, 1], objs
        sent = [{"a": 1}, "b" * 50]
        lst = list(sent) if rank == 0 else [None, None]
        dist.broadcast_object_list(lst, src=0)
        assert lst == sent, lst
        out = [None] * world if rank == 0 else None
        dist.gather_object(mine, out, dst=0)
        assert rank == 1 or [o["rank"] for o in out] == [0, 1], out
        scattered = ["s0", "s1" * 40]
        got = [None]
        dist.scatter_object_list(got, scattered if rank == 0 else None, src=0)
        assert got == [scattered[rank]], got
        want = {
            "all_gather_object": size(mine),
            "broadcast_object_list": size(*sent),
            "gather_object": size(mine),
            # the source sends them all; the other rank receives its own, padded to the largest
            "scatter_object_list": size(*scattered) if rank == 0 else max(size(o) for o in scattered),
        }
        if hasattr(dist, "all_gather_single"):  # torch 2.13's names for the *_tensor forms
            g = torch.zeros(8)
            dist.all_gather_single(g, torch.ones(4) * rank)
            assert g.tolist() == [0.0] * 4 + [1.0] * 4, g
            r = torch.zeros(2)
            dist.reduce_scatter_single(r, torch.ones(4))
            assert r.tolist() == [2.0, 2.0], r
            want.update(all_gather_single=16, reduce_scatter_single=16)
        print("want", json.dumps(want), flush=True)
    finally:
        if __sp_on__: __sp_exit__(0)

import json
'''


@pytest.mark.slow
def test_object_collectives_and_the_single_forms_are_recorded(tmp_path):
    outs, runs = run_ranks(tmp_path, OBJECTS)
    for out, run in zip(outs, runs):
        want = json.loads(next(line for line in out.splitlines() if line.startswith("want "))[5:])
        ops = comm_ops(run)
        # before: none of them was there
        assert {op: o["bytes"] for op, o in ops.items() if op in want} == want, ops
        assert all(ops[op]["calls"] == 1 and ops[op]["time_ns"] > 0 for op in want), ops
        # the all_gather/broadcast/gather/scatter they make inside are part of them
        assert set(ops) == set(want), ops
        assert {run.callpath_name(tuple(c["callpath"])) for c in run.comms} == {
            f"work->torch.distributed.{op}" for op in want}
        assert all(c["group_size"] == 2 for c in run.comms)
