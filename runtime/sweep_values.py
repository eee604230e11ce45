"""Parameter values as the user wrote them, and `{name}` placeholders replaced by them.

A value that reads as a number is recorded as that number (`--sweep batch=016` is the parameter
batch = 16 in the run header), while `{batch}` in the program's arguments and in `--spawn` becomes
exactly the text typed (`016`): the launcher never re-formats what the program receives. So that
two values are never the same modeling point, a value given twice or two spellings of one number
(`1.1` and `1.10`) are refused, and so are `nan` and `inf`, which are no point to model, and a
number a float cannot hold in full (`1e-400` would be recorded as 0.0).
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from typing import Iterable, Mapping

from runtime.launch_errors import LaunchError

Value = int | float | str
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# `{{name}}`: the literal text `{name}` for the program (a Lightning checkpoint pattern `{{epoch}}-{{step}}`)
_ESCAPED = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
# what substitute() reads: an escaped name first, else a placeholder
_TEMPLATE = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: integers are written to the run files as 64-bit numbers: a value must be below this in size
MAX_INT = 2**63
# `{ name }`, `{name:03d}`, `{name!r}`: str.format's syntax, which substitute() does not take
_LOOKALIKE = re.compile(r"\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*([!:][^{}]*)?\}")


def parse_value(text: str) -> Value:
    """`16` -> 16, `0.5` -> 0.5, anything else stays a string."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def check_name(name: str, where: str) -> str:
    if not _NAME.match(name):
        raise LaunchError(f"{where}: parameter name {name!r} must be an identifier (letters, digits, _)")
    if name == "repetition":
        raise LaunchError(f"{where}: 'repetition' is reserved; use --repeat")
    return name


def spelled_values(pairs: Iterable[tuple[Value, str]], where: str) -> dict[Value, str]:
    """Each distinct value with its text, in the order given; the same point twice is an error."""
    spelled: dict[Value, str] = {}
    for value, text in pairs:
        if isinstance(value, float) and not math.isfinite(value):
            raise LaunchError(f"{where}: {text!r} is not a finite number")
        if isinstance(value, float) and abs(value) < sys.float_info.min and _nonzero(text):
            # review 65 F7: `1e-400` was recorded as 0.0 (and the modeler fitted it at 0)
            why = ("it would be recorded as 0.0" if value == 0 else "a float holds it only with fewer digits")
            raise LaunchError(f"{where}: {text!r} is too small a number: {why} (the smallest in full precision is "
                              f"about {sys.float_info.min:.1e})")
        check_int(value, f"{where}: {text!r}")
        if value in spelled:
            earlier = spelled[value]
            same = f"{text!r} is given twice" if earlier == text else \
                f"{earlier!r} and {text!r} are the same number, so the same modeling point"
            raise LaunchError(f"{where}: {same}: give each value once")
        spelled[value] = text
    return spelled


def _nonzero(text: str) -> bool:
    """Whether the digits of a number's mantissa (before its exponent) are not all 0."""
    mantissa = text.lower().partition("e")[0]
    return any(c.isdecimal() and int(c) != 0 for c in mantissa)


def check_int(value: object, where: str) -> None:
    """An integer the run files can hold (64 bits), or an error naming `where` (review 58 F7: a larger
    one passed the options, and then every rank died with a traceback writing its run header)."""
    if isinstance(value, int) and not isinstance(value, bool) and not -MAX_INT <= value < MAX_INT:
        raise LaunchError(f"{where}: too large an integer: the run files hold integers from -2**63 to 2**63-1")


def placeholders(arg: str) -> list[str]:
    """The names of the `{name}` placeholders of an argument (not of an escaped `{{name}}`)."""
    return [m.group(2) for m in _TEMPLATE.finditer(arg) if m.group(2) is not None]


def parse_assignment(text: str, option: str) -> tuple[str, dict[Value, str]]:
    """`name=v1,v2,...` from `--sweep` or `--param`: the name, and each value with its text as typed."""
    name, sep, values = text.partition("=")
    where = f"{option} {text!r}"
    if not sep or not values.strip():
        raise LaunchError(f"{where}: expected name=value{',value...' if option == '--sweep' else ''}")
    check_name(name.strip(), where)
    texts = [v.strip() for v in values.split(",")]
    if "" in texts:
        raise LaunchError(f"{where}: empty value")
    return name.strip(), spelled_values(((parse_value(t), t) for t in texts), where)


def substitute(args: Iterable[str], texts: Mapping[str, object], repetition: int,
               what: str = "program argument") -> list[str]:
    """Replace `{name}` in each argument by the run's text of that parameter (`{repetition}` too);
    `{{name}}` becomes the literal text `{name}` (review 58 F6: a program's own `{epoch}` pattern
    could not be passed at all); braces around anything but a name (`{"k": 1}`) stay as they are."""
    values = {**{k: str(v) for k, v in texts.items()}, "repetition": str(repetition)}

    def one(match: re.Match[str], arg: str) -> str:
        if match.group(1) is not None:
            return "{" + match.group(1) + "}"
        name = match.group(2)
        if name not in values:
            close = difflib.get_close_matches(name, sorted(values), n=1, cutoff=0.6)
            raise LaunchError(f"{what} {arg!r} names {{{name}}}, which is no parameter "
                              f"(known: {', '.join(sorted(values))})"
                              + (f"; did you mean {{{close[0]}}}?" if close else ""))  # review 123 LOW-8
        return values[name]

    args = list(args)
    for arg in args:
        _check_lookalikes(arg, values, what)
    return [_TEMPLATE.sub(lambda m, a=arg: one(m, a), arg) for arg in args]


def _check_lookalikes(arg: str, names: Mapping[str, str], what: str) -> None:
    """A parameter's name in braces that is not exactly `{name}` would reach the program as it is,
    the same at every point: an error, not a silent sweep of one command."""
    for match in _LOOKALIKE.finditer(_ESCAPED.sub("", arg)):
        name, spec, text = match.group(1), match.group(2), match.group(0)
        if name not in names or text == f"{{{name}}}":
            continue
        where = f"{what} {arg!r}" + (f": {text!r}" if text != arg else "")
        if spec:
            kind = "format specs" if spec.startswith(":") else "conversions"
            raise LaunchError(f"{where}: {kind} are not supported; write {{{name}}} (each value reaches the "
                              "program exactly as typed: type it as the program should see it, e.g. 007)")
        raise LaunchError(f"{where}: write {{{name}}}, without spaces")
