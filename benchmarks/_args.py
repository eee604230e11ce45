"""argparse types shared by the benchmark scripts: a bad value is a usage error (exit status 2 with
the script's usage line), never a traceback from deep inside a measurement (review 75 F6)."""

from __future__ import annotations

import argparse
from typing import Callable


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _number_list(convert: Callable[[str], float], what: str, low: float | None, low_ok: bool) -> Callable[[str], list]:
    bound = "" if low is None else f" {'>=' if low_ok else '>'} {low:g}"

    def parse(text: str) -> list:
        values = []
        for part in text.split(","):
            part = part.strip()
            try:
                value = convert(part)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected comma-separated {what}{bound}, got {part!r} in {text!r}") from None
            if value != value or (low is not None and (value < low or (value == low and not low_ok))):
                raise argparse.ArgumentTypeError(f"expected comma-separated {what}{bound}, got {part!r} in {text!r}")
            values.append(value)
        return values

    return parse


def int_list(low: int = 1) -> Callable[[str], list[int]]:
    """Comma-separated integers >= low."""
    return _number_list(int, "integers", low, True)


def float_list(low: float = 0.0) -> Callable[[str], list[float]]:
    """Comma-separated numbers >= low."""
    return _number_list(float, "numbers", low, True)


def synthetic_sweep_options(ap: argparse.ArgumentParser, families: tuple[str, ...], count: str = "--paths",
                            count_default: int = 40, count_help: str = "call paths per family, setting and layout") -> None:
    """The options the synthetic-shape benchmarks share: how many series, the seed, the noise levels,
    the runs per point and the families (a comma-separated subset of `families`; `choice_list`)."""
    ap.add_argument(count, type=positive_int, default=count_default, help=count_help)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float_list(0.0), default=[0.01, 0.05, 0.1], help="comma-separated noise levels")
    ap.add_argument("--runs", type=float_list(1.0), default=[1, 5], help="comma-separated runs per point")
    ap.add_argument("--families", default=",".join(families), help="comma-separated, of: " + ", ".join(families))


def choice_list(ap: argparse.ArgumentParser, option: str, given: str, known: tuple[str, ...]) -> list[str]:
    """The comma-separated names of `given`, each one of `known`; a usage error naming the others."""
    names = [f.strip() for f in given.split(",")]
    unknown = [f for f in names if f not in known]
    if unknown:
        ap.error(f"{option}: unknown {', '.join(unknown)}")
    return names
