"""`--format csv`: one row per model, plain numbers (full precision) for spreadsheets and pandas.

`growth_from_parts_exponent` and `growth_from_parts_log_exponent` are JSON's `growth_from_parts`:
the growth a row is ranked by where its parts grow slower than its own model (`(parts)` in the
table; empty elsewhere), so that the CSV tells why a row sits where it does (review 66 F3)."""

from __future__ import annotations

import csv
import io
import math

from ..ranking import Ranking

COLUMNS = (
    "rank", "callpath", "metric", "model", "constant", "growth_exponent", "growth_log_exponent",
    "growth_from_parts_exponent", "growth_from_parts_log_exponent", "smape", "rss", "ar2", "cv_smape", "points", "prediction", "interval_low", "interval_high", "unit",
    "prediction_from_parts", "range_low", "range_high", "prediction_from_time",
    "prediction_from_time_basis", "share_measured", "share_at_target", "share_at_target_low", "doubtful",
    "some_ranks", "prediction_ranks_that_ran_it", "growth_ranks_that_ran_it_exponent",
    "growth_ranks_that_ran_it_log_exponent", "prediction_out_of_range", "growth_level_weight",
    "growth_ranked_minor_exponent", "growth_ranked_minor_log_exponent",
)


#: what makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection"), and the quote itself
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")


def _num(v: float | None) -> str:
    return "" if v is None or not math.isfinite(v) else repr(float(v))


def _text(v: object) -> str:
    """A text cell (a name from the inputs, a formula, a note) that no spreadsheet runs or reads as a
    number: one starting with = + - @ tab or CR gets a `'` in front, as OWASP advises (a call path
    `=HYPERLINK(...)` from an Extra-P file; a model `-0.0006 + 0.004 * n^(3/4)` that Excel showed as
    #NAME?). One starting with `'` gets one too, so that taking one leading `'` off any text cell
    gives the value back. Numbers are written by `_num` as they are: a negative value is a number."""
    text = "" if v is None else str(v)
    return "'" + text if text.startswith(_FORMULA_START) else text


def render_csv(ranking: Ranking) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    # the target point, one column a parameter (review 121 LOW-3: the predictions' point was not in the file)
    at = tuple(float(v) for v in ranking.at.values())
    w.writerow((*COLUMNS, *(_text(f"at_{p}") for p in ranking.at)))
    for i, r in enumerate(ranking.rows, 1):
        fm = r.fitted
        w.writerow(
            (
                i, _text(fm.callpath), _text(fm.metric), _text(fm.model.formula(digits=None)), _num(fm.model.constant),
                _num(r.growth[0]), _num(r.growth[1]),
                *((_num(r.parts_growth[0]), _num(r.parts_growth[1])) if r.parts_growth is not None else ("", "")),
                _num(fm.smape), _num(fm.rss), _num(fm.ar2),
                _num(fm.cv_smape), fm.points, _num(r.prediction), _num(r.low), _num(r.high), _text(r.unit),
                _num(r.from_parts), _num(None if r.range is None else r.range[0]),
                _num(None if r.range is None else r.range[1]),
                _num(None if r.from_time is None else r.from_time[0]),
                "" if r.from_time is None else _text(r.from_time[1]),
                *((_num(r.share.measured), _num(r.share.at_target), _num(r.share.at_target_low)) if r.share is not None
                  else ("", "", "")),
                _text(r.doubtful()),
                # run by some ranks only (review 88 MED-1): how many, and the time of those that ran it;
                # its growth where the row is ranked by it
                _text(r.some_ranks), _num(r.ranks_prediction),
                *((_num(r.ranks_growth[0]), _num(r.ranks_growth[1])) if r.by_ranks_that_ran_it() else ("", "")),
                _text(r.out_of_range),
                # ranked with the constants, its growth not settled (`modeler.level_growth`)
                _num(r.level_weight if r.ranked_level() else None),
                # ranked by the terms that carry its value, its fastest minor (`modeler.minor_terms`)
                *((_num(r.minor_growth[0]), _num(r.minor_growth[1])) if r.ranked_minor() else ("", "")),
                *map(_num, at),
            )
        )
    return buf.getvalue()
