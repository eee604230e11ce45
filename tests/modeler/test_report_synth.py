"""A synthetic training sweep for the report's tests, written through runtime.runfile's RunWriter.

Known per-run times (seconds, summed over the run, per rank) with ranks p and per-rank batch n:
  Model.forward   steps * 0.001 * n          (the last rank is 30% slower: imbalance)
  all_reduce      steps * 0.002 * log2(p)     (communication)
  load_batch      steps * (0.0005 + 1e-5*p*n) (data wait: the worst-scaling region)
  odd name        0.001, named with HTML metacharacters to check escaping
The tests in this file check that the fixture reads back as intended.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from modeler.dataset import Dataset
from modeler.model import Factor, FittedModel, Model, Term
from runtime.runfile import RunWriter, read_run, run_file_name

EPOCHS, STEPS_PER_EPOCH = 2, 4
STEPS = EPOCHS * STEPS_PER_EPOCH
RANKS = (1, 2, 3, 4, 6)
BATCHES = (8, 16, 32, 64, 128)
ODD_NAME = 'Odd.<lambda>&"x"'
REGIONS = (
    (0, "function", "main", "main.py", 1),
    (1, "epoch", "train", "train.py", 10),
    (2, "step", "train_epoch", "train.py", 20),
    (3, "method", "Model.forward", "model.py", 5),
    (4, "comm", "all_reduce", "<torch.distributed>", 0),
    (5, "function", "load_batch", "data.py", 7),
    (6, "function", ODD_NAME, "odd.py", 3),
)
MAIN_EXCL, TRAIN_EXCL, STEP_EXCL = 0.01, 0.001, STEPS * 0.0002
ODD = 0.001


def leaf_times(p: int, n: int, rank: int) -> dict[str, float]:
    slow = 1.3 if p > 1 and rank == p - 1 else 1.0
    return {
        "forward": STEPS * 0.001 * n * slow,
        "comm": STEPS * 0.002 * math.log2(p),
        "wait": STEPS * (0.0005 + 1e-5 * p * n),
    }


def write_rank(directory: Path, *, run_id: str, p: int, n: int, rank: int, rep: int, noise: float,
               end: bool = True) -> Path:
    lt = {k: v * noise for k, v in leaf_times(p, n, rank).items()}
    step_total = lt["forward"] + lt["comm"] + lt["wait"] + STEP_EXCL
    train_total = step_total + TRAIN_EXCL + ODD
    main_total = train_total + MAIN_EXCL
    ns = lambda s: int(round(s * 1e9))  # noqa: E731
    prof = {
        (0,): (1, main_total, MAIN_EXCL),
        (0, 1): (1, train_total, TRAIN_EXCL),
        (0, 1, 6): (1, ODD, ODD),
        (0, 1, 2): (EPOCHS, step_total, STEP_EXCL),
        (0, 1, 2, 3): (STEPS, lt["forward"], lt["forward"]),
        (0, 1, 2, 4): (STEPS, lt["comm"], lt["comm"]),
        (0, 1, 2, 5): (STEPS, lt["wait"], lt["wait"]),
    }
    recs: list[dict] = [{"type": "region", "id": i, "kind": k, "name": nm, "file": f, "line": ln}
                        for i, k, nm, f, ln in REGIONS]
    for path, (visits, incl, excl) in prof.items():
        recs.append({"type": "profile", "path": list(path), "visits": visits, "incl_ns": ns(incl),
                     "excl_ns": ns(excl), "min_ns": ns(incl / visits), "max_ns": ns(incl / visits), "sumsq_ns": 0.0})
    per_step = step_total / STEPS
    for i in range(STEPS):
        recs.append({"type": "step", "region": 2, "index": i, "duration_ns": ns(per_step),
                     "data_wait_ns": ns(lt["wait"] / STEPS), "comm_ns": ns(lt["comm"] / STEPS), "gpu_ns": None,
                     "memory": None})
    for i in range(EPOCHS):
        recs.append({"type": "epoch", "region": 1, "index": i, "duration_ns": ns(step_total / EPOCHS),
                     "data_wait_ns": None, "comm_ns": None, "gpu_ns": None, "memory": None})
    if end:
        # as the runtime writes them: the header comes before the program imports torch, so its
        # version is known only in the end record
        recs.append({"type": "end", "status": "ok", "exit_code": 0, "torch": "2.13.0"})
    header = {"run_id": run_id, "experiment": "synthetic", "params": {"ranks": p, "batch": n}, "repetition": rep,
              "rank": rank, "local_rank": rank, "world_size": p, "host": "testhost", "pid": 1000 + rank,
              "python": "3.11.0", "torch": None, "launcher": "launch"}
    path = Path(directory) / run_id / run_file_name(rank, 1000 + rank)
    with RunWriter(path) as w:
        w.write_header(header)
        w.write_records(recs)
    return path


def write_sweep(root: Path, *, repetitions: int = 2, failed: bool = True, seed: int = 7) -> Path:
    """The full 5x5 sweep with `repetitions`; with `failed`, one extra run whose rank 1 never ended."""
    rng = np.random.default_rng(seed)
    for p in RANKS:
        for n in BATCHES:
            for rep in range(repetitions):
                noise = float(1 + rng.uniform(-0.01, 0.01))
                for rank in range(p):
                    write_rank(root, run_id=f"p{p}-n{n}-r{rep}", p=p, n=n, rank=rank, rep=rep, noise=noise)
    if failed:
        for rank in range(2):
            write_rank(root, run_id="p2-n8-broken", p=2, n=8, rank=rank, rep=repetitions, noise=1.0, end=rank == 0)
    return root


def true_model(callpath: str, parameters: tuple[str, ...]) -> Model:
    """The generating function of a call path's mean-over-ranks time, without the imbalance."""
    forward = Term(STEPS * 0.001, (Factor("batch", 1.0),))
    comm = Term(STEPS * 0.002, (Factor("ranks", 0.0, 1),))
    wait = Term(STEPS * 1e-5, (Factor("ranks", 1.0), Factor("batch", 1.0)))
    leaf = callpath.rsplit("->", 1)[-1]
    if leaf == "Model.forward":
        return Model(parameters, 0.0, (forward,))
    if leaf == "all_reduce":
        return Model(parameters, 0.0, (comm,))
    if leaf == "load_batch":
        return Model(parameters, STEPS * 0.0005, (wait,))
    if leaf == ODD_NAME:
        return Model(parameters, ODD)
    const = STEPS * 0.0005 + STEP_EXCL
    if leaf == "train":
        const += TRAIN_EXCL + ODD
    if leaf == "main":
        const += TRAIN_EXCL + ODD + MAIN_EXCL
    return Model(parameters, const, (wait, forward, comm))


def hand_models(dataset: Dataset, metric: str = "time") -> list[FittedModel]:
    """FittedModels for the dataset's series of `metric`, built from the generating functions."""
    out = []
    for s in dataset.series:
        if s.metric != metric:
            continue
        m = true_model(s.callpath, dataset.parameters)
        pred = m.evaluate(s.points)
        vals = s.values("median")
        denom = np.abs(pred) + np.abs(vals)
        terms = np.divide(2 * np.abs(pred - vals), denom, out=np.zeros_like(denom), where=denom > 0)
        smape = float(np.mean(terms)) * 100
        out.append(FittedModel(s.callpath, metric, m, smape, float(np.sum((pred - vals) ** 2)), 0.99, None,
                               s.n_points))
    return out


def load_sweep(root: Path):
    """(groups, time-only dataset) through the real readers, as `modeler report` reads them."""
    from modeler.readers import read_inputs
    from modeler.readers.runs import load_runs
    from modeler.report.runs import groups_from_runset

    loaded = read_inputs([root])
    return groups_from_runset(load_runs([root])), loaded.dataset.select(metrics=["time"])


def test_sweep_reads_back_with_its_parameters_and_the_broken_run(tmp_path):
    root = write_sweep(tmp_path / "runs")
    groups, dataset = load_sweep(root)
    assert set(dataset.parameters) == {"ranks", "batch"}
    assert len(groups) == len(RANKS) * len(BATCHES) * 2 + 1
    broken = [g for g in groups if not g.ok]
    assert [g.run_id for g in broken] == ["p2-n8-broken"]
    ok = next(g for g in groups if g.run_id == "p4-n32-r0")
    assert [r.rank for r in ok.ranks] == [0, 1, 2, 3]
    names = set(ok.ranks[0].names.values())
    assert {"Model.forward", "all_reduce", "load_batch", ODD_NAME} <= names


def test_true_models_match_the_written_times(tmp_path):
    root = write_sweep(tmp_path / "runs", repetitions=1, failed=False)
    groups, dataset = load_sweep(root)
    models = {m.callpath.rsplit("->", 1)[-1]: m for m in hand_models(dataset)}
    # forward carries the imbalance (mean over ranks is not the generating function); the rest is exact
    # up to the 1% noise
    for leaf in ("all_reduce", "load_batch", ODD_NAME):
        assert models[leaf].smape < 1.5, leaf
    assert read_run(next(root.rglob("rank0.*.jsonl"))).end is not None
