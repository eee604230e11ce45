"""Our modeler against Extra-P 4.2.5, side by side, on synthetic data with known functions.

    .venv/bin/python benchmarks/modeler_vs_extrap.py                 # default: a few minutes
    .venv/bin/python benchmarks/modeler_vs_extrap.py --paths 200 --timing-paths 1000

For 1, 2 and 3 parameters (5 values each on a grid, 5 repetitions) and noise of 0, 2, 5 and 10%
(uniform, multiplicative), both tools model the same Extra-P JSON Lines file. Printed per setting:
the share of call paths whose true form was recovered (ours, Extra-P, and the oracle ceiling that
knows each function's structure), the median and 90th-percentile relative error at 4x the largest
value of every parameter (with 1 and 2 parameters also the Bayes bound, `_bayes`: what a modeler
that knew how the functions are drawn could reach), and wall times. Then one end-to-end timing (both as fresh processes:
start, read, model, print JSON) on `--timing-paths` call paths with 2 parameters.
Extra-P runs from .venv-extrap (`make extrap-venv`); without it only our columns are filled.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _bayes  # noqa: E402
from _synthetic import known_form, make_case, oracle, target_point, write_jsonl  # noqa: E402

from modeler.model import Factor, Model, Term  # noqa: E402

EXTRAP_PYTHON = ROOT / ".venv-extrap" / "bin" / "python"

# Runs inside Extra-P's venv: read a JSON Lines file, model it with the default modeler, print JSON.
EXTRAP_DRIVER = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
from extrap.fileio.file_reader.jsonlines_file_reader import read_jsonlines_file
from extrap.modelers.model_generator import ModelGenerator
from extrap.entities.functions import MultiParameterFunction
def factor(ct, name):
    f = {"parameter": name, "exponent": 0.0, "log_exponent": 0}
    for st in ct.simple_terms:
        if st.term_type == "polynomial": f["exponent"] = float(st.exponent)
        else: f["log_exponent"] = int(st.exponent)
    return f
exp = read_jsonlines_file(sys.argv[1])
mg = ModelGenerator(exp); mg.model_all()
names = [p.name for p in exp.parameters]
out = []
for (cp, met), model in mg.models.items():
    f = model.hypothesis.function
    if isinstance(f, MultiParameterFunction):
        terms = [{"coefficient": float(t.coefficient), "factors": [factor(ct, names[i]) for i, ct in t.parameter_term_pairs]} for t in f]
    else:
        terms = [{"coefficient": float(ct.coefficient), "factors": [factor(ct, names[0])]} for ct in f.compound_terms]
    out.append({"callpath": cp.name, "constant": float(f.constant_coefficient), "terms": terms})
print(json.dumps({"parameters": names, "models": out}))
"""

# Runs in a fresh process of our venv: the same job, end to end.
OURS_DRIVER = r"""
import json, sys
import numpy as np
from modeler.readers.extrap import read_extrap_jsonl
from modeler.estimator import PMNFModeler
est = PMNFModeler().fit(read_extrap_jsonl(sys.argv[1]))
out = [m.to_json() for m in est.models_]
if len(sys.argv) > 2:
    from modeler.uncertainty import mixture_ranges, with_prediction
    at = dict(zip(est.parameters_, (float(v) for v in sys.argv[2].split(","))))
    pred = np.array([m.predict({k: [v] for k, v in at.items()})[0] for m in est.models_])
    lo, hi = with_prediction(*mixture_ranges([m.alternatives for m in est.models_], at), pred)
    for d, a, b in zip(out, lo, hi):
        d["range_at_target"] = None if np.isnan(a) else [float(a), float(b)]
print(json.dumps({"parameters": list(est.parameters_), "models": out}))
"""


def model_from_json(params: tuple[str, ...], d: dict) -> Model:
    terms = tuple(
        Term(
            t["coefficient"],
            tuple(Factor(f["parameter"], f["exponent"], f["log_exponent"]) for f in t["factors"]),
        )
        for t in d["terms"]
    )
    return Model(params, d["constant"], terms)


def extrap_version() -> str:
    """Extra-P's version in its venv (from the installed distribution's metadata folder), or "unknown"."""
    venv = EXTRAP_PYTHON.parent.parent
    found = sorted(venv.glob("lib/python*/site-packages/extrap-*.dist-info"))
    return found[-1].name[len("extrap-"):-len(".dist-info")] if found else "unknown"


def cache_key(name: str, path: Path) -> str:
    """The --extrap-cache file name of Extra-P's result on `path`: the setting's name, a hash of the
    data written for Extra-P (generated data that changed is not compared with stale models) and
    Extra-P's version."""
    import hashlib

    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return f"{name}_data-{digest}_extrap-{extrap_version()}"


def run_extrap(
    path: Path, params: tuple[str, ...], timeout: float, cache: Path | None = None, key: str = ""
) -> tuple[dict[str, Model], float, bool] | None:
    """Extra-P's models of the file, its wall time, and whether both came from the cache: with
    `cache`, they are reused from (or saved to) `cache/<cache_key(key, path)>.json`, so that
    exploring our side does not pay Extra-P's minutes every time. A cached wall time is from
    another run: no same-run ratio may be taken from it."""
    cached = cache / f"{cache_key(key, path)}.json" if cache is not None else None
    if cached is not None and cached.exists():
        d = json.loads(cached.read_text())
        return {m["callpath"]: model_from_json(params, m) for m in d["out"]["models"]}, d["wall"], True
    if not EXTRAP_PYTHON.exists():
        return None
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(EXTRAP_PYTHON), "-c", EXTRAP_DRIVER, str(path)], capture_output=True, text=True, timeout=timeout
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"Extra-P failed on {path}:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout)
    if cached is not None:
        cache.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps({"out": out, "wall": wall, "extrap_version": extrap_version()}))
    return {m["callpath"]: model_from_json(params, m) for m in out["models"]}, wall, False


def run_ours(
    path: Path, params: tuple[str, ...], timeout: float, at: np.ndarray | None = None
) -> tuple[dict[str, Model], float, dict[str, list[float] | None]]:
    """Our models, wall time, and per call path the 80% prediction range at `at` (when given)."""
    argv = [sys.executable, "-c", OURS_DRIVER, str(path)]
    if at is not None:
        argv.append(",".join(repr(float(v)) for v in at[0]))
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"our modeler failed on {path}:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout)
    ranges = {m["callpath"]: m.get("range_at_target") for m in out["models"]}
    return {m["callpath"]: model_from_json(params, m) for m in out["models"]}, wall, ranges


def rel_errors(models: list[Model], truth: list[Model], at: np.ndarray) -> np.ndarray:
    return np.array([abs(m.evaluate(at)[0] - t.evaluate(at)[0]) / abs(t.evaluate(at)[0]) for m, t in zip(models, truth)])


def fmt_pct(v: float | None) -> str:
    return "   n/a" if v is None else f"{100 * v:6.2f}"


def setting(
    n_params: int, noise: float, n_paths: int, seeds: list[int], tmp: Path, timeout: float, cache: Path | None = None,
    bayes_exponents: int = 0,
) -> dict:
    """One row of the table; with several seeds, their call paths are pooled (times are summed).
    `bayes_exponents`: with more parameters than the Bayes bound enumerates, compute it from this
    many best exponents per parameter (0: not at all)."""
    row: dict = {"params": n_params, "noise": noise, "paths": 0, "ours_rec": 0, "oracle_rec": 0, "ours_s": 0.0,
                 "covered": 0, "widths": []}
    errs: dict[str, list[np.ndarray]] = {"ours_err": [], "oracle_err": [], "floor_err": [], "extrap_err": []}
    with_bayes = noise > 0 and (n_params <= _bayes.MAX_PARAMS or bayes_exponents > 0)
    pruned = bayes_exponents if n_params > _bayes.MAX_PARAMS else None
    row["bayes"] = [] if with_bayes else None  # (posterior, true values at the target) per seed
    extrap_rec, extrap_s, extrap_cached = 0, 0.0, False
    for seed in seeds:
        funcs, pts, values = make_case(seed + n_params, n_params, n_paths, noise)
        path = tmp / f"synthetic_{n_params}p_{int(noise * 100)}pct_s{seed}.jsonl"
        write_jsonl(path, n_params, pts, values)
        params = funcs[0].model.parameters
        truth = [f.model for f in funcs]
        at = target_point(n_params)

        ours, ours_s, ranges = run_ours(path, params, timeout, at)
        ours_models = [ours[f"main->f{i}"] for i in range(n_paths)]
        for i, t in enumerate(truth):
            r = ranges.get(f"main->f{i}")
            true = float(t.evaluate(at)[0])
            row["covered"] += r is not None and r[0] <= true <= r[1]
            row["widths"].append(np.inf if r is None else (r[1] - r[0]) / abs(true))
        means = values.mean(axis=2)
        orc = [oracle(f, pts, means[i]) for i, f in enumerate(funcs)]
        floor = [known_form(f, pts, means[i]) for i, f in enumerate(funcs)]
        if with_bayes:
            post = _bayes.posterior(pts, at[0], means, noise, values.shape[2], exponents=pruned)
            true_at = np.array([float(t.evaluate(at)[0]) for t in truth])
            row["bayes"].append((post, true_at))
            errs.setdefault("bayes_err", []).append(np.abs(_bayes.mean_choice(post) - true_at) / np.abs(true_at))
        row["paths"] += n_paths
        row["ours_rec"] += sum(m.shape() == t.shape() for m, t in zip(ours_models, truth))
        row["oracle_rec"] += sum(m.shape() == t.shape() for m, t in zip(orc, truth))
        row["ours_s"] += ours_s
        errs["ours_err"].append(rel_errors(ours_models, truth, at))
        errs["oracle_err"].append(rel_errors(orc, truth, at))
        errs["floor_err"].append(rel_errors(floor, truth, at))
        ex = run_extrap(path, params, timeout, cache, f"{n_params}p_{noise:g}_{n_paths}_{seed + n_params}")
        if ex is None:
            extrap_rec = None
            continue
        ex_models = [ex[0][f"main->f{i}"] for i in range(n_paths)]
        extrap_rec += sum(m.shape() == t.shape() for m, t in zip(ex_models, truth))
        errs["extrap_err"].append(rel_errors(ex_models, truth, at))
        extrap_s += ex[1]
        extrap_cached |= ex[2]
    row.update({k: np.concatenate(v) if v else None for k, v in errs.items()})
    row.setdefault("bayes_err", None)
    row["extrap_rec"] = extrap_rec
    row["extrap_s"] = extrap_s if extrap_rec is not None else None
    row["extrap_cached"] = extrap_cached and extrap_rec is not None
    if extrap_rec is None:
        row["extrap_err"] = None
    return row


def print_table(rows: list[dict]) -> None:
    print()
    print("recovered forms: call paths whose true form (terms and exponents) came back;")
    print("error: relative error at 4x the largest value of every parameter (percent), median and 90th percentile;")
    print("  oracle: knows each function's structure, picks the best-fitting exponents;")
    print("  floor: knows the exact form, fits only the coefficients (the noise alone leaves this error);")
    print("  Bayes: knows how the functions are drawn and the noise level, predicts with the least expected")
    print("    relative error (benchmarks/_bayes.py; noisy settings, 1 and 2 parameters; 3 with --bayes-exponents);")
    print("time: seconds of wall time, each tool in a fresh process (start, imports, read, model, print JSON);")
    print("  ratio: Extra-P's time over ours, both measured in this run")
    head = (
        f"{'P':>2} {'noise':>5} {'paths':>5} | {'rec ours':>8} {'Extra-P':>7} {'oracle':>6} | "
        f"{'med ours':>8} {'Extra-P':>7} {'oracle':>6} {'Bayes':>6} {'floor':>6} | "
        f"{'p90 ours':>8} {'Extra-P':>7} {'oracle':>6} {'Bayes':>6} {'floor':>6} | "
        f"{'t ours':>6} {'Extra-P':>7} {'ratio':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        e, b = r["extrap_err"], r["bayes_err"]
        med = [np.median(r["ours_err"]), None if e is None else np.median(e), np.median(r["oracle_err"]),
               None if b is None else np.median(b), np.median(r["floor_err"])]
        p90 = [np.percentile(r["ours_err"], 90), None if e is None else np.percentile(e, 90),
               np.percentile(r["oracle_err"], 90), None if b is None else np.percentile(b, 90),
               np.percentile(r["floor_err"], 90)]
        print(
            f"{r['params']:>2} {100 * r['noise']:>4.0f}% {r['paths']:>5} | {r['ours_rec']:>8} "
            f"{'n/a' if r['extrap_rec'] is None else r['extrap_rec']:>7} {r['oracle_rec']:>6} | "
            f"{_errors(med)} | {_errors(p90)} | "
            f"{r['ours_s']:>6.2f} {_extrap_time(r):>7} {_time_ratio(r):>6}"
        )
    if any(r.get("extrap_cached") for r in rows):
        print("* Extra-P's time read from --extrap-cache (measured in another run): no ratio is taken from it;"
              " run without --extrap-cache for same-run times")


def _extrap_time(r: dict) -> str:
    if r["extrap_s"] is None:
        return "n/a"
    return format(r["extrap_s"], ".2f") + ("*" if r.get("extrap_cached") else "")


def _time_ratio(r: dict) -> str:
    """Extra-P's time over ours, only where both were measured in this run."""
    if r["extrap_s"] is None or r.get("extrap_cached"):
        return "-" if r["extrap_s"] is not None else "n/a"
    return format(r["extrap_s"] / r["ours_s"], ".0f") + "x"


def _errors(v: list[float | None]) -> str:
    """ours, Extra-P, oracle, Bayes, floor: in the table's column widths."""
    return " ".join(f"{fmt_pct(x):>{w}}" for x, w in zip(v, (8, 7, 6, 6, 6)))


def print_ranges(rows: list[dict]) -> None:
    print("\nprediction range (ours, 80%: the forms in play and their coefficients' uncertainty) at the target:")
    print("  share of call paths whose true value lies inside it, and its median width relative to the true value")
    for r in rows:
        print(f"  {r['params']}p {100 * r['noise']:>3.0f}%: covers {r['covered'] / r['paths']:6.1%}, "
              f"median width {100 * float(np.median(r['widths'])):6.2f}%")


def _error_target(
    name: str, ours: float, extrap: float, oracle: float, floor: float, bayes: tuple[float, float] | None = None
) -> str:
    """'yes', or 'NO' with why when the target lies below what knowing the structure or the form gives.
    `bayes`: (share of call paths whose error the Bayes rule for this criterion leaves above the
    target, share the criterion allows): when the first is larger, no modeler can expect to meet it."""
    if ours <= 0.5 * extrap:
        return f"{name} <= half: yes"
    why = ""
    if 0.5 * extrap < floor:
        why = " (below the floor: unreachable)"
    elif bayes is not None and bayes[0] > bayes[1]:
        why = f" (even the Bayes rule for it leaves {bayes[0]:.1%} of the errors above, {bayes[1]:.0%} allowed)"
    elif 0.5 * extrap < oracle:
        why = " (below the oracle)"
    return f"{name} <= half: NO{why}"


def bayes_exceedance(row: dict, t: float) -> float:
    """Share of the setting's call paths whose error at the target exceeds `t` when each is predicted
    by the Bayes rule that maximizes the probability of an error of at most `t`."""
    over = [np.abs(_bayes.within_choice(post, t) - true) > t * np.abs(true) for post, true in row["bayes"]]
    return float(np.concatenate(over).mean())


def check_targets(rows: list[dict]) -> None:
    print("\ntargets (noisy: errors at most half of Extra-P's, forms >= 90% of the oracle's; noise-free: all forms):")
    for r in rows:
        tag = f"{r['params']}p {100 * r['noise']:.0f}%"
        if r["noise"] == 0:
            ok = r["ours_rec"] == r["paths"]
            print(f"  {tag}: all forms recovered: {'yes' if ok else 'NO'} ({r['ours_rec']}/{r['paths']})")
            continue
        rec_ok = r["ours_rec"] >= 0.9 * r["oracle_rec"]
        msg = f"  {tag}: forms {r['ours_rec']} vs 0.9 x oracle {0.9 * r['oracle_rec']:.0f}: {'yes' if rec_ok else 'NO'}"
        if r["extrap_err"] is not None:
            for name, stat, allowed in (("median", np.median, 0.5), ("p90", lambda a: np.percentile(a, 90), 0.1)):
                ours, extrap = stat(r["ours_err"]), stat(r["extrap_err"])
                bayes = None
                if ours > 0.5 * extrap and r["bayes"] is not None:
                    bayes = (bayes_exceedance(r, 0.5 * extrap), allowed)
                msg += "; " + _error_target(name, ours, extrap, stat(r["oracle_err"]), stat(r["floor_err"]), bayes)
        print(msg)


def timing(n_paths: int, seed: int, tmp: Path, timeout: float, cache: Path | None = None, repeats: int = 3) -> None:
    """Each tool `repeats` times as fresh processes, interleaved (ours, Extra-P, ours, ...), and the
    medians: on a shared machine one run of either moved the ratio by 10% (19.2x to 21.3x)."""
    funcs, pts, values = make_case(seed + 99, 2, n_paths, 0.02)
    path = tmp / f"timing_{n_paths}.jsonl"
    write_jsonl(path, 2, pts, values)
    params = funcs[0].model.parameters
    key = f"timing_{n_paths}_{seed}"
    cached = cache is not None and (cache / f"{cache_key(key, path)}.json").exists()
    ours, extrap = [], []
    for i in range(repeats):
        ours.append(run_ours(path, params, timeout)[1])  # as a user runs it: no range asked
        if cached and i:
            continue
        ex = run_extrap(path, params, timeout, cache if i == 0 else None, key)
        if ex is not None:
            extrap.append(ex[1])
    print(f"\nend to end, {n_paths} call paths, 2 parameters, 2% noise (fresh process: start, read, model, print JSON;"
          f" median of {repeats}, interleaved):")
    o = float(np.median(ours))
    print(f"  ours:    {o:7.2f} s   (runs: {', '.join(f'{w:.2f}' for w in ours)})")
    if not extrap:
        print("  Extra-P: not installed (make extrap-venv)")
        return
    e = float(np.median(extrap))
    if cache is not None and not cached and len(extrap) > 1:  # the cache keeps the median
        entry = cache / f"{cache_key(key, path)}.json"
        d = json.loads(entry.read_text())
        d["wall"] = e
        entry.write_text(json.dumps(d))
    if cached:  # from another run: a ratio to this run's time would not be a same-run ratio
        print(f"  Extra-P: {e:7.2f} s   (cached by --extrap-cache: another run's time, no ratio taken)")
        return
    print(f"  Extra-P: {e:7.2f} s   (runs: {', '.join(f'{w:.2f}' for w in extrap)})   ratio {e / o:.1f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paths", type=int, default=100, help="call paths per setting (default 100)")
    ap.add_argument("--params", default="1,2,3", help="parameter counts (default 1,2,3)")
    ap.add_argument("--noise", default="0,0.02,0.05,0.1", help="noise levels (default 0,0.02,0.05,0.1)")
    ap.add_argument("--timing-paths", type=int, default=1000, help="call paths of the end-to-end timing (0: skip)")
    ap.add_argument("--timing-repeats", type=int, default=3, help="runs of each tool in the timing, interleaved; "
                    "the medians are compared (default 3)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the generated functions and noise (default 1)")
    ap.add_argument(
        "--seeds", metavar="LIST",
        help="comma-separated seeds whose call paths are pooled per setting (overrides --seed): steadier "
        "percentiles than one set of --paths",
    )
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per tool run")
    ap.add_argument("--keep", type=Path, help="write the generated files here instead of a temporary directory")
    ap.add_argument(
        "--extrap-cache", type=Path, metavar="DIR",
        help="reuse Extra-P's models and wall times saved in DIR for the same setting, data (a hash of the "
        "generated file) and Extra-P version (saved there on the first run); for exploring: a cached time is "
        "marked * and gives no ratio, the final table should run Extra-P afresh",
    )
    ap.add_argument(
        "--bayes-exponents", type=int, default=0, metavar="L",
        help="also compute the Bayes bound with 3 parameters, its forms built from the L best exponents "
        "per parameter (10 is enough; about a minute per 100 call paths and noise level); default 0: not",
    )
    args = ap.parse_args(argv)
    try:
        seeds = [int(v) for v in args.seeds.split(",")] if args.seeds else [args.seed]
    except ValueError:
        ap.error(f"--seeds: expected comma-separated integers, got {args.seeds!r}")
    if args.bayes_exponents < 0 or args.bayes_exponents > 42:
        ap.error(f"--bayes-exponents: expected 0 to 42, got {args.bayes_exponents}")
    if not EXTRAP_PYTHON.exists():
        print(f"note: {EXTRAP_PYTHON} not found, run `make extrap-venv`; only our columns are filled")
    with tempfile.TemporaryDirectory() as td:
        tmp = args.keep or Path(td)
        tmp.mkdir(parents=True, exist_ok=True)
        rows = []
        for n_params in [int(v) for v in args.params.split(",")]:
            for noise in [float(v) for v in args.noise.split(",")]:
                rows.append(setting(n_params, noise, args.paths, seeds, tmp, args.timeout, args.extrap_cache,
                                    args.bayes_exponents))
                print(f"done: {n_params} parameter(s), noise {noise:.0%}", file=sys.stderr, flush=True)
        print_table(rows)
        print_ranges(rows)
        check_targets(rows)
        if args.timing_paths:
            timing(args.timing_paths, args.seed, tmp, args.timeout, args.extrap_cache, args.timing_repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
