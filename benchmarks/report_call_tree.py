"""How the HTML report's call tree scales in the browser: unfolding the root of a call tree of N
call paths, in headless Chromium, at two sizes, against folding it (linear) in the same page.

    python benchmarks/report_call_tree.py [--paths 4000,16000] [--keep DIR]

For each size it writes run files with that many call paths (one parameter, five points), runs
`modeler report` on them, adds a timing script to the page and has Chromium load it. It prints the
times in milliseconds and, per size step, how much unfolding grew against the rows: 1x for linear
work, 4x per quadrupling of the rows for quadratic (review 21: 34 ms at 1k, 57 s at 20k, before the
fold buttons were looked up once per click). Needs `chromium` on PATH (scripts/ensure_chromium.sh).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMING = """
<script>
window.addEventListener("load", function () {
  var out = [];
  function t(label, f) { var a = performance.now(); f(); document.body.offsetHeight;
    out.push(label + "=" + (performance.now() - a).toFixed(1)); }
  var tree = document.getElementById("call-tree");
  out.push("rows=" + tree.tBodies[0].rows.length);
  var root = tree.tBodies[0].rows[0].querySelector("button.fold");
  var inner = Array.prototype.slice.call(tree.tBodies[0].rows, 1).filter(function (r) {
    return r.querySelector("button.fold"); })[0].querySelector("button.fold");
  t("fold", function () { root.click(); });
  t("unfold", function () { root.click(); });
  inner.click();
  t("fold_again", function () { root.click(); });
  t("unfold_inner_folded", function () { root.click(); });
  document.title = "TIMES " + out.join(" ");
});
</script>
"""


def write_runs(out: Path, paths: int) -> None:
    """One rank file per point: main -> 32 stages -> leaves, every fourth leaf under another leaf."""
    regions = [(1, "main")] + [(2 + j, f"Stage{j}.run") for j in range(32)]
    tree = [(1,)] + [(1, 2 + j) for j in range(32)]
    leaves: list[tuple[int, ...]] = []
    for i in range(paths - len(tree)):
        rid = len(regions) + 1
        regions.append((rid, f"fn_{i}"))
        leaves.append((*leaves[i // 2], rid) if i % 4 == 3 else (1, 2 + i % 32, rid))
    tree += leaves
    for k, p in enumerate((2, 4, 8, 16, 32)):
        d = out / f"p-{p}"
        d.mkdir(parents=True)
        recs = [{"type": "header", "format": "scaleprobe-run", "version": 1, "run_id": f"r{k}", "experiment": "bench",
                 "params": {"p": p}, "repetition": 0, "rank": 0, "local_rank": 0, "world_size": 1, "pid": 100 + k}]
        recs += [{"type": "region", "id": rid, "kind": "function", "name": name, "file": "m.py", "line": rid}
                 for rid, name in regions]
        for path in tree:
            ns = int(1e6 * (1 + len(path)) * p ** (0.5 + (path[-1] % 3) / 2))
            recs.append({"type": "profile", "path": list(path), "visits": 1, "incl_ns": ns * (4 - min(len(path), 3)),
                         "excl_ns": ns, "min_ns": ns, "max_ns": ns, "sumsq_ns": 0.0})
        recs.append({"type": "end", "status": "ok", "exit_code": 0})
        (d / f"rank0.{100 + k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def measure(chromium: str, work: Path, paths: int) -> dict[str, float]:
    runs = work / f"runs{paths}"
    write_runs(runs, paths)
    page = work / f"report{paths}.html"
    subprocess.run([sys.executable, "-m", "modeler", "report", str(runs), "-o", str(page), "-q", "--min-share", "0.5"],
                   check=True, cwd=REPO)
    page.write_text(page.read_text(encoding="utf-8") + TIMING, encoding="utf-8")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=600000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=900).stdout
    found = re.search(r"TIMES ([^<]*)</title>", dom)
    if not found:
        raise SystemExit(f"chromium gave no timings for {page}")
    return {k: float(v) for k, v in (item.split("=") for item in found.group(1).split())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", default="4000,16000", help="call-path counts, comma-separated (default 4000,16000)")
    ap.add_argument("--keep", type=Path, help="keep the run files and pages here")
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("report_call_tree: chromium not found on PATH (scripts/ensure_chromium.sh installs it)", file=sys.stderr)
        return 2
    sizes = [int(x) for x in args.paths.split(",")]
    work = args.keep or Path(tempfile.mkdtemp(prefix="sp-calltree-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = [(n, measure(chromium, work, n)) for n in sizes]
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{'rows':>7} {'fold ms':>9} {'unfold ms':>10} {'unfold, inner folded ms':>24}")
    for n, t in results:
        print(f"{int(t['rows']):>7} {t['fold']:>9.1f} {t['unfold']:>10.1f} {t['unfold_inner_folded']:>24.1f}")
    for (n0, a), (n1, b) in zip(results, results[1:]):
        rows = b["rows"] / a["rows"]
        grew = (b["unfold"] / max(a["unfold"], 0.1)) / rows
        base = (b["fold"] / max(a["fold"], 0.1)) / rows
        print(f"{int(a['rows'])} -> {int(b['rows'])} rows ({rows:.1f}x): unfolding grew {grew:.2f}x the rows "
              f"(folding, linear, {base:.2f}x in the same pages); quadratic work would be {rows:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
