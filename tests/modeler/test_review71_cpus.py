"""Review 71 F2: `modeler fit` warns of runs whose ranks on one host outnumbered the CPUs they could
use there (header `cpus_usable`, `cpu_affinity`)."""

from __future__ import annotations

from modeler.readers.runs import load_runs
from tests.modeler.modeler_synthetic_runs import write_rank_file

PROFILE = {(0,): (1, 10**9, 10**9)}


def _run(root, run_id, ranks, headers):
    for rank in range(ranks):
        write_rank_file(root / run_id, run_id=run_id, params={"ranks": ranks}, rank=rank, world_size=ranks,
                        regions=[(0, "function", "main", "main.py", 1)], profile=PROFILE, header=headers(rank))


def _warnings(root):
    return [w for w in load_runs([root]).warnings if "CPUs" in w]


def test_ranks_sharing_fewer_cpus_on_one_host_are_warned_of(tmp_path):
    _run(tmp_path, "a", 1, lambda r: {"cpus_usable": 2, "cpu_affinity": "0-1"})
    _run(tmp_path, "b", 2, lambda r: {"cpus_usable": 2, "cpu_affinity": "0-1"})
    _run(tmp_path, "c", 8, lambda r: {"cpus_usable": 2, "cpu_affinity": "0-1"})
    [warning] = _warnings(tmp_path)
    assert "1 run(s) had more ranks on one host than CPUs" in warning
    assert "run c: 8 ranks on testhost, 2 usable CPUs" in warning


def test_only_the_count_is_enough(tmp_path):
    _run(tmp_path, "a", 1, lambda r: {"cpus_usable": 1})
    _run(tmp_path, "b", 4, lambda r: {"cpus_usable": 2, "cpu_affinity": None})
    [warning] = _warnings(tmp_path)
    assert "run b: 4 ranks on testhost, 2 usable CPUs" in warning


def test_ranks_bound_to_cores_of_their_own_or_on_several_hosts_are_not(tmp_path):
    # srun/mpirun binding: each rank has one core, none shared
    _run(tmp_path, "a", 4, lambda r: {"cpus_usable": 1, "cpu_affinity": str(r)})
    # 4 ranks on 2 hosts of 2 CPUs each
    _run(tmp_path, "b", 4, lambda r: {"cpus_usable": 2, "cpu_affinity": "0-1", "host": f"node{r // 2}"})
    # an older runtime's files: nothing to tell
    _run(tmp_path, "c", 2, lambda r: {})
    assert _warnings(tmp_path) == []
