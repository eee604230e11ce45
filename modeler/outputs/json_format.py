"""`--format json`: one JSON object, `{"parameters": [...], "at": {...}, "models": [...], "warnings": [...],
"min_share": 0.01, "left_out": [...]}`."""

from __future__ import annotations

import json
import math

from ..ranking import Ranking


def _clean(v):
    # JSON has no NaN or Infinity; a model that cannot be evaluated somewhere says null there
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def ranking_to_json(ranking: Ranking) -> dict:
    return _clean(
        {
            "parameters": list(ranking.parameters),
            "at": dict(ranking.at),
            "models": [r.to_json() for r in ranking.rows],
            "warnings": list(ranking.warnings),
            "min_share": ranking.min_share,
            "left_out": left_out_json(ranking),
        }
    )


def render_json(ranking: Ranking) -> str:
    return json.dumps(ranking_to_json(ranking), indent=2, allow_nan=False) + "\n"


def left_out_json(ranking: Ranking) -> list[dict]:
    """The call paths `--min-share` left out, in ranking order: their share and the metrics modeled."""
    out: dict[str, dict] = {}
    for r in ranking.left_out:
        entry = out.setdefault(r.fitted.callpath, {"callpath": r.fitted.callpath, "metrics": [],
                                                   "share": None if r.share is None else r.share.to_json()})
        entry["metrics"].append(r.fitted.metric)
    return list(out.values())
