"""Run files held by the modeler are packed (`runtime.runfile.PackedProfile`): the same profile in a
tenth of the memory (review 21: about 680 bytes per profile record as a dict of objects, the modeler
held every file of a sweep at once)."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from modeler.aggregate import dataset_from_runs
from modeler.readers.runs import load_runs
from runtime.runfile import PackedProfile, PackedRecords, ProfileStats, Run, profile_rows, read_run

from .modeler_synthetic_runs import write_rank_file

REGIONS = tuple((i, "function", f"f{i}", "m.py", i) for i in range(1, 402))


def _profile(n: int, scale: int = 1) -> dict[tuple[int, ...], tuple[int, int, int]]:
    """`n` call paths under `f1` (n up to 12,000), with region ids past the small integers Python
    keeps once."""
    out = {(1,): (1, 10**9 * scale, 10**6)}
    for i in range(n):
        out[(1, 300 + i % 40, 2 + i // 40)] = (i + 2, 1000 * (i + 2) * scale, 400 * (i + 2))
    return out


def test_packed_profile_gives_what_the_dict_gave():
    stats = {
        (1,): ProfileStats(3, 10**12, 5 * 10**11, 10, 4 * 10**11, 2.5e23, 1),
        (1, 2): ProfileStats(2, 7, 5, 3, 4, 25.0, 0),
        (1, 2, 3): ProfileStats(1, 2**62, 0, 0, 0, 0.0, 0),
    }
    packed = PackedProfile(dict(stats))
    assert list(packed) == list(stats)
    assert len(packed) == 3
    assert dict(packed.items()) == stats
    assert list(packed.values()) == list(stats.values())
    assert packed[(1, 2)] == stats[(1, 2)]
    assert packed.get((9,)) is None and (9,) not in packed and (1, 2) in packed
    assert isinstance(packed[(1,)].visits, int) and packed[(1, 2, 3)].incl_ns == 2**62
    assert list(packed.rows()) == [(p, s.visits, s.incl_ns, s.excl_ns) for p, s in stats.items()]
    assert list(profile_rows(packed)) == list(profile_rows(stats))
    with pytest.raises(KeyError):
        packed[(4,)]


def test_a_column_with_a_fraction_or_past_64_bits_keeps_its_values():
    # hand-made files may hold fractions; Python's integers have no upper bound
    stats = {(1,): ProfileStats(1, 1.5, 0.25, 1, 2, 3.0, 0), (2,): ProfileStats(2**64, 3, 1, 1, 2, 3.0, 0)}
    packed = PackedProfile(dict(stats))
    assert packed[(1,)].incl_ns == 1.5 and packed[(1,)].excl_ns == 0.25
    assert packed[(2,)].visits == float(2**64)


def test_packing_shares_paths_and_regions_between_files(tmp_path):
    prof = _profile(50)
    for rank in range(2):
        write_rank_file(tmp_path, run_id="r", params={"p": 1}, rank=rank, world_size=2, regions=REGIONS,
                        profile=prof)
    runset = load_runs([tmp_path])
    (run,) = runset.runs
    a, b = (f.run for f in run.files)
    assert isinstance(a.profile, PackedProfile) and isinstance(b.profile, PackedProfile)
    pa, pb = list(a.profile), list(b.profile)
    assert pa == pb and all(x is y for x, y in zip(pa, pb))
    assert all(a.regions[r] is b.regions[r] for r in a.regions)


def test_a_packed_run_gives_the_same_values(tmp_path):
    for rep in range(2):
        for p in (1, 2, 4):
            write_rank_file(tmp_path / f"{p}-{rep}", run_id=f"r{p}{rep}", params={"p": p}, repetition=rep,
                            regions=REGIONS, profile=_profile(20, p))
    packed = dataset_from_runs(load_runs([tmp_path]))
    plain = dataset_from_runs(load_runs([tmp_path]), ranks="mean")
    assert [(s.callpath, s.metric) for s in packed.series] == [(s.callpath, s.metric) for s in plain.series]
    run = read_run(next(tmp_path.rglob("*.jsonl")))
    assert isinstance(run.profile, dict)  # read_run itself keeps the dict: its callers may change it
    before = {p: (s.visits, s.incl_ns, s.excl_ns) for p, s in run.profile.items()}
    run.pack()
    assert {p: (s.visits, s.incl_ns, s.excl_ns) for p, s in run.profile.items()} == before
    series = {(s.callpath, s.metric): s for s in packed.series}
    assert series[("f1", "time")].values("median").tolist() == [1.0, 2.0, 4.0]
    assert series[("f1->f300->f2", "visits")].values("median").tolist() == [2.0, 2.0, 2.0]


def _load_held(path):
    """The runs under `path`, and the bytes of memory they keep (tracemalloc: Python's own count of
    its allocations, not a timing)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        runset = load_runs([path])
        gc.collect()
        return runset, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_the_files_held_take_a_fraction_of_what_they_took(tmp_path):
    """The memory that the files read keep (tracemalloc: Python's own count of its allocations, not
    a timing): under 200 bytes per profile record; as a dict of objects it was about 680."""
    n, files = 2000, 4
    for rank in range(files):
        write_rank_file(tmp_path, run_id="r", params={"p": 1}, rank=rank, world_size=files, regions=REGIONS,
                        profile=_profile(n))
    runset, held = _load_held(tmp_path)
    records = sum(len(f.run.profile) for r in runset.runs for f in r.files)
    assert records == files * (n + 1)
    assert held / records < 200, f"{held / records:.0f} bytes per profile record held"


def test_pack_is_idempotent_and_keeps_a_packed_profile():
    run = Run(path=None)  # type: ignore[arg-type]
    run.profile = {(1,): ProfileStats(1, 2, 3, 2, 2, 4.0, 0)}
    run.pack({})
    first = run.profile
    run.pack({})
    assert run.profile is first and first[(1,)].incl_ns == 2


def test_the_memory_benchmark_runs(tmp_path):
    """benchmarks/modeler_memory.py stays runnable (its figures are reported, never asserted)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "modeler_memory.py"
    p = subprocess.run([sys.executable, str(script), "--paths", "30", "--ranks", "1", "--keep", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    row = p.stdout.strip().splitlines()[-1].split()
    assert row[0] == "30" and row[2] == str(25 * 31), p.stdout
    assert len(list(tmp_path.rglob("*.jsonl"))) == 25


STEPS = [
    {"region": 2, "index": 0, "duration_ns": 5, "data_wait_ns": None, "comm_ns": 3, "gpu_ns": None,
     "memory": {"rss_peak_bytes": 2**40, "cuda_peak_bytes": None}, "active": True},
    {"region": 2, "index": 1, "duration_ns": 2**63 - 1, "data_wait_ns": 7, "comm_ns": None, "gpu_ns": None,
     "memory": None, "active": False, "step": 101},
    {"region": 2, "index": 2, "duration_ns": 1.5, "data_wait_ns": 2**64, "comm_ns": 0, "gpu_ns": None,
     "memory": {}, "start": "2026-11-22", "ratio": 0.25},
]


def test_packed_records_give_the_records_back():
    packed = PackedRecords(STEPS)
    assert len(packed) == 3
    assert list(packed) == STEPS  # missing fields stay missing, None stays None, {} stays {}
    assert packed[1] == STEPS[1] and packed[-1] == STEPS[-1] and packed[0:2] == STEPS[0:2]
    assert type(packed[0]["duration_ns"]) is int and packed[0]["active"] is True
    assert packed[2]["data_wait_ns"] == 2**64  # past 64 bits: kept as it was read
    assert "step" not in packed[0] and packed[1]["step"] == 101
    with pytest.raises(IndexError):
        packed[3]
    assert list(PackedRecords([])) == []


def test_a_packed_run_keeps_its_steps(tmp_path):
    steps = [{"region": 2, "duration_ns": 1000 + i, "data_wait_ns": i, "comm_ns": None, "gpu_ns": None,
              "memory": {"rss_peak_bytes": 10 * i}} for i in range(5)]
    path = write_rank_file(tmp_path, run_id="r", params={"p": 1}, steps=steps,
                           profile={(0,): (1, 10**6, 10), (0, 1): (1, 10**5, 10), (0, 1, 2): (5, 9000, 9000)})
    run = read_run(path)
    before = list(run.steps), list(run.epochs)
    run.pack()
    assert isinstance(run.steps, PackedRecords) and (list(run.steps), list(run.epochs)) == before


def test_step_records_held_take_a_fraction_of_what_they_took(tmp_path):
    """Held by the modeler, a step record took about 590 bytes as a dict; packed, under 150."""
    n = 5000
    steps = [{"region": 2, "duration_ns": 123_456_789 + i, "data_wait_ns": 234_567 + i, "comm_ns": 0,
              "gpu_ns": None, "memory": {"rss_peak_bytes": 123_456_789 + i}, "active": True} for i in range(n)]
    write_rank_file(tmp_path, run_id="r", params={"p": 1}, steps=steps, profile={(0,): (1, 10**9, 10)})
    runset, held = _load_held(tmp_path)
    assert len(runset.runs[0].files[0].run.steps) == n
    assert held / n < 150, f"{held / n:.0f} bytes per step record held"


def test_the_read_speed_benchmark_runs():
    """benchmarks/read_speed.py stays runnable (its ratio is reported, never asserted)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "read_speed.py"
    p = subprocess.run([sys.executable, str(script), "--paths", "30", "--ranks", "1", "--rounds", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    # 25 files of a header, 31 regions, 31 profile records and an end record
    assert p.stdout.startswith("25 files, ") and f"{25 * 64} lines" in p.stdout, p.stdout
    assert "ratio load_runs / parse only:" in p.stdout
