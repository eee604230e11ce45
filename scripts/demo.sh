#!/usr/bin/env bash
# The whole job on the sample application: instrument it, sweep batch size x model width with
# repetitions, fit performance models and write the HTML report. `make demo` runs it as
#   bash scripts/demo.sh .venv/bin/python
# Re-running it resumes: finished runs are kept and only missing or failed ones run again.
#   bash scripts/demo.sh PYTHON --fresh    start over (removes demo/)
# Environment: DEMO_REPEAT (repetitions, default 2; more give steadier models on a busy machine),
# DEMO_BATCH / DEMO_WIDTH (comma-separated values, five each by default), DEMO_TIMEOUT (seconds
# per run, default 300), DEMO_AT (the point to predict, beyond the measured range; default
# batch=256,width=64, four times the largest measured batch size, about three times the width).
set -euo pipefail

PY=${1:-.venv/bin/python}
FRESH=${2:-}
REPEAT=${DEMO_REPEAT:-2}
BATCH=${DEMO_BATCH:-4,8,16,32,64}
WIDTH=${DEMO_WIDTH:-4,8,12,16,24}
RUN_TIMEOUT=${DEMO_TIMEOUT:-300}
AT=${DEMO_AT:-batch=256,width=64}

say() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

# A relative interpreter path is relative to where the user stood, not to the repository root.
case "$PY" in
    */*) [ -e "$PY" ] && PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;;
esac
for list in "BATCH=$BATCH" "WIDTH=$WIDTH"; do
    [[ "${list#*=}" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] \
        || die "DEMO_${list%%=*} must be comma-separated positive integers, got '${list#*=}'"
done
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || die "DEMO_REPEAT must be a positive integer, got '$REPEAT'"
[[ "$RUN_TIMEOUT" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DEMO_TIMEOUT must be a number of seconds, got '$RUN_TIMEOUT'"
cd "$(dirname "$0")/.."
ROOT=$(pwd)
case "$FRESH" in
    "") ;;
    --fresh) rm -rf demo ;;
    *) die "unknown option '$FRESH' (the only one is --fresh)" ;;
esac
command -v "$PY" >/dev/null 2>&1 || [ -x "$PY" ] || die "python interpreter '$PY' not found; run 'make demo' or pass one"
"$PY" -c 'import instrumentor, runtime, modeler, torch' 2>/dev/null \
    || die "'$PY' cannot import instrumentor, runtime, modeler and torch; run 'make install' first"

mkdir -p demo
START=$SECONDS
RUNS=demo/runs/sample

say "1/4 instrument testdata/sample_code -> demo/build"
"$PY" -m instrumentor.cli testdata/sample_code -o demo/build || die "instrumenting testdata/sample_code failed (see above)"

# The CNN's cost grows with batch x width^2; startup (importing torch) dominates each run, so a few
# steps per epoch suffice. --threads 1: every run uses one core, the same in every run. Every run
# and the program at the target make the same 3 steps per epoch: samples for 3 batches of the
# largest batch size of the sweep and the target (review 73: with 512, the target at batch=256
# made 2, and the demo compared its prediction with a run doing a third less work). The sample
# makes its samples on demand: more cost nothing.
STEPS=3
largest=$(tr ',' '\n' <<<"$BATCH" | sort -n | tail -1)
if [[ ",$AT," =~ ,batch=([0-9]+), ]] && (( BASH_REMATCH[1] > largest )); then largest=${BASH_REMATCH[1]}; fi
PROGRAM=(demo/build/main.py --model cnn --batch-size '{batch}' --width '{width}' --epochs 2
         --steps-per-epoch "$STEPS" --num-samples "$(( STEPS * largest ))" --eval-samples 64 --threads 1)
# The launcher itself re-runs a point whose program arguments changed (resume compares them), but
# runs of points that are no longer in the design would stay under $RUNS and be fitted together
# with the new ones: runs made with other program arguments are removed instead.
STAMP=demo/.program-args
if [ -d "$RUNS" ] && [ "$(cat "$STAMP" 2>/dev/null)" != "${PROGRAM[*]}" ]; then
    echo "demo: the runs in $RUNS were made with other program arguments; starting the sweep over" >&2
    rm -rf "$RUNS"
fi
mkdir -p "$RUNS"
printf '%s' "${PROGRAM[*]}" >"$STAMP"

npoints=$(( $(tr ',' '\n' <<<"$BATCH" | wc -l) * $(tr ',' '\n' <<<"$WIDTH" | wc -l) ))
say "2/4 sweep batch=$BATCH x width=$WIDTH, $REPEAT repetitions: $(( npoints * REPEAT )) runs -> $RUNS"
echo "(runs finished before are skipped; Ctrl-C stops, re-running this script resumes)" >&2
# The sample's own per-run log lines ("12:00:00 [rank 0] ...") and its stdout are dropped: the
# launcher's progress lines and any error stay.
set +e
"$PY" -m runtime.launch --sweep "batch=$BATCH" --sweep "width=$WIDTH" --repeat "$REPEAT" \
    --timeout "$RUN_TIMEOUT" --out demo/runs --experiment sample -- "${PROGRAM[@]}" \
    2>&1 >/dev/null | { grep --line-buffered -Ev '^[0-9:]+ \[rank [0-9]+\] ' || true; } >&2
status=${PIPESTATUS[0]}
set -e
case "$status" in
    0) ;;
    130|143) echo "demo: interrupted; run the same command again to resume the sweep" >&2; exit "$status" ;;
    2) die "the launcher refused the sweep's options (see above; check DEMO_BATCH, DEMO_WIDTH, DEMO_REPEAT, DEMO_TIMEOUT)" ;;
    *) die "some runs of the sweep did not complete (see the summary above); run the same command again to retry only those" ;;
esac

say "3/4 fit performance models: up to 20 regions that scale worst (under 1% of the run: left out, counted)"
"$PY" -m modeler fit "$RUNS" --top 20 --at "$AT" || die "modeler fit failed on $RUNS (see above)"

say "4/4 write the HTML report"
"$PY" -m modeler report "$RUNS" -o demo/report.html --at "$AT" --title "scaleprobe demo: sample CNN, batch x width" \
    || die "modeler report failed on $RUNS (see above)"

elapsed=$(( SECONDS - START ))
say "done in $(( elapsed / 60 ))m$(( elapsed % 60 ))s"
echo "report:  $ROOT/demo/report.html   (open file://$ROOT/demo/report.html in a browser)"
echo "models:  $PY -m modeler fit $RUNS --format json     runs: $ROOT/$RUNS"
