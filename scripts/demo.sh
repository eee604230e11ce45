#!/usr/bin/env bash
# The whole job on the sample application: instrument it, sweep batch size x model width with
# repetitions, fit performance models and write the HTML report. `make demo` runs it as
#   bash scripts/demo.sh .venv/bin/python
# Re-running it resumes: finished runs are kept and only missing or failed ones run again.
#   bash scripts/demo.sh PYTHON --fresh    start over (removes demo/)
# Environment: DEMO_REPEAT (repetitions, default 3), DEMO_BATCH / DEMO_WIDTH (comma-separated
# values, default five each), DEMO_TIMEOUT (seconds per run, default 300).
set -euo pipefail

PY=${1:-.venv/bin/python}
FRESH=${2:-}
REPEAT=${DEMO_REPEAT:-3}
BATCH=${DEMO_BATCH:-4,8,16,32,64}
WIDTH=${DEMO_WIDTH:-4,8,12,16,24}
RUN_TIMEOUT=${DEMO_TIMEOUT:-300}

say() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

cd "$(dirname "$0")/.."
ROOT=$(pwd)
case "$FRESH" in
    "") ;;
    --fresh) rm -rf demo ;;
    *) die "unknown option '$FRESH' (the only one is --fresh)" ;;
esac
# A relative interpreter path means relative to where the user stood; `make demo` passes .venv/bin/python
# from the repository root, which is where we are now.
command -v "$PY" >/dev/null 2>&1 || [ -x "$PY" ] || die "python interpreter '$PY' not found; run 'make demo' or pass one"
"$PY" -c 'import instrumentor, runtime, modeler, torch' 2>/dev/null \
    || die "'$PY' cannot import instrumentor, runtime, modeler and torch; run 'make install' first"

mkdir -p demo
START=$SECONDS
RUNS=demo/runs/sample

say "1/4 instrument testdata/sample_code -> demo/build"
"$PY" -m instrumentor.cli testdata/sample_code -o demo/build

npoints=$(( $(tr ',' '\n' <<<"$BATCH" | wc -l) * $(tr ',' '\n' <<<"$WIDTH" | wc -l) ))
say "2/4 sweep batch=$BATCH x width=$WIDTH, $REPEAT repetitions: $(( npoints * REPEAT )) runs -> $RUNS"
echo "(runs finished before are skipped; Ctrl-C stops, re-running this script resumes)" >&2
# The CNN's cost grows with batch x width^2; startup (importing torch) dominates each run, so a few
# steps per epoch suffice. --threads 1: every run uses one core, the same in every run.
if ! "$PY" -m runtime.launch --sweep "batch=$BATCH" --sweep "width=$WIDTH" --repeat "$REPEAT" \
        --timeout "$RUN_TIMEOUT" --out demo/runs --experiment sample \
        -- demo/build/main.py --model cnn --batch-size '{batch}' --width '{width}' \
        --epochs 2 --steps-per-epoch 3 --num-samples 512 --eval-samples 64 --threads 1 >/dev/null; then
    die "some runs of the sweep did not complete (see the summary above); run the same command again to retry only those"
fi

say "3/4 fit performance models: the 20 regions that scale worst"
"$PY" -m modeler fit "$RUNS" --top 20

say "4/4 write the HTML report"
"$PY" -m modeler report "$RUNS" -o demo/report.html --title "scaleprobe demo: sample CNN, batch x width"

elapsed=$(( SECONDS - START ))
say "done in $(( elapsed / 60 ))m$(( elapsed % 60 ))s"
echo "report:  $ROOT/demo/report.html   (open file://$ROOT/demo/report.html in a browser)"
echo "models:  $PY -m modeler fit $RUNS --format json     runs: $ROOT/$RUNS"
