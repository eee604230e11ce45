"""An experiment design: which parameter points, how many repetitions, where each run goes.

A design comes from `--sweep name=v1,v2`, `--param name=value`, `--repeat N` and an optional TOML
file; the command line wins over the file. Every point of the cross product becomes one run per
repetition, each with its own directory `<out>/<experiment>/<name>-<value>_..._rep-<k>`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from runtime.launch_errors import LaunchError
from runtime.sweep_values import Value, check_name, spelled_values, substitute

_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")


@dataclass(frozen=True)
class Run:
    params: dict[str, Value]
    repetition: int
    directory: Path
    args: list[str]  # the program's arguments, `{name}` replaced
    texts: dict[str, str] = field(default_factory=dict)  # what `{name}` became: each value as typed

    @property
    def ranks(self) -> int:
        return int(self.params["ranks"])


@dataclass
class Design:
    sweep: dict[str, list[Value]] = field(default_factory=dict)
    fixed: dict[str, Value] = field(default_factory=dict)
    repeat: int = 1
    experiment: str | None = None
    # parameter -> value -> the text typed for it on the command line (str(value) where none was)
    spelled: dict[str, dict[Value, str]] = field(default_factory=dict)

    def set_sweep(self, name: str, spelled: dict[Value, str]) -> None:
        self.sweep[name] = list(spelled)
        self.fixed.pop(name, None)
        self.spelled[name] = spelled

    def set_fixed(self, name: str, spelled: dict[Value, str]) -> None:
        (self.fixed[name],) = spelled
        self.sweep.pop(name, None)
        self.spelled[name] = spelled

    def texts(self, point: dict[str, Value]) -> dict[str, str]:
        """What `{name}` becomes at this point: each value as the user typed it."""
        return {k: self.spelled.get(k, {}).get(v, str(v)) for k, v in point.items()}

    def run(self, point: dict[str, Value], repetition: int, directory: Path, args: list[str]) -> Run:
        texts = self.texts(point)
        return Run(point, repetition, directory, substitute(args, texts, repetition), texts)

    def points(self, nproc: int) -> list[dict[str, Value]]:
        """Every parameter point, `ranks` first (from the sweep, a --param or --nproc)."""
        both = set(self.sweep) & set(self.fixed)
        if both:
            raise LaunchError(f"parameter {sorted(both)[0]!r} is both swept and fixed: give it once")
        names = list(self.sweep)
        points = []
        for combo in itertools.product(*(self.sweep[n] for n in names)):
            point: dict[str, Value] = {}
            swept = dict(zip(names, combo))
            if "ranks" not in swept and "ranks" not in self.fixed:
                point["ranks"] = nproc
            point.update({k: v for k, v in swept.items() if k == "ranks"})
            point.update({k: v for k, v in self.fixed.items() if k == "ranks"})
            point.update({k: v for k, v in swept.items() if k != "ranks"})
            point.update({k: v for k, v in self.fixed.items() if k != "ranks"})
            check_ranks([point["ranks"]], "parameter")
            points.append(point)
        return points

    def runs(self, out: Path, experiment: str, args: list[str], nproc: int,
             first_repetition: int = 0) -> list[Run]:
        """Repetition by repetition: every point once, then every point again (review 25: with a
        point's repetitions back to back, a burst of load on a shared machine hit all of them, and
        their spread, which the noise test and the intervals rely on, said nothing of it)."""
        points = [(point, run_name(point)) for point in self.points(nproc)]
        return [self.run(point, rep, out / experiment / f"{base}_rep-{rep}", args)
                for rep in range(first_repetition, first_repetition + self.repeat) for point, base in points]


def check_ranks(values, where: str) -> None:
    """The values of `ranks`, where they are given (review 40: `parameter ranks=0` named no option)."""
    for ranks in values:
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise LaunchError(f"{where}: ranks={ranks!r}: the number of ranks must be a positive integer")


def point_name(point: dict[str, Value]) -> str:
    """The parameters as a file name can hold them, in the order given (two points may come out
    alike: see run_name): the name of the oldest launchers, still looked for (`legacy_directories`)."""
    return "_".join(f"{k}-{_UNSAFE.sub('_', str(v))}" for k, v in point.items())


def _in_order(point: dict[str, Value]) -> dict[str, Value]:
    """`ranks` first, then the other parameters by name: the order of the `--sweep` options, of the
    sweep file's keys, or whether a parameter is swept or fixed, never changes a directory's name
    (review 58 F4: swapping two --sweep options made a resume redo every run into new directories)."""
    return {**{k: v for k, v in point.items() if k == "ranks"},
            **{k: point[k] for k in sorted(point) if k != "ranks"}}


def _named(point: dict[str, Value]) -> str:
    name = point_name(point)
    if any(_UNSAFE.search(str(v)) for v in point.values()):
        import hashlib

        name += "_" + hashlib.sha1(repr(sorted(point.items())).encode()).hexdigest()[:8]
    return name


#: up to this many parameters (`ranks` included) a point's older names are looked for in every order
#: of its parameters, not only the order given (5! = 120 names at most)
LEGACY_ORDERS_UP_TO = 5


def legacy_names(point: dict[str, Value]) -> list[str]:
    """The names older launchers gave this point, other than `run_name`'s: the parameters in the
    order given (with the hash where one was added), and without the hash (`point_name`); then the
    same in every other order of the parameters, up to `LEGACY_ORDERS_UP_TO` of them (review 59 F4:
    runs an older launcher made with the --sweep options in another order were made again, and the
    modeler read both copies as repetitions)."""
    orders = [point]
    if len(point) <= LEGACY_ORDERS_UP_TO:
        from itertools import permutations

        orders += [{k: point[k] for k in keys} for keys in permutations(point) if list(keys) != list(point)]
    names = []
    new = run_name(point)
    for order in orders:
        for name in (_named(order), point_name(order)):
            if name != new and name not in names:
                names.append(name)
    return names


def legacy_directories(run: Run, replaces: bool) -> list[Path]:
    """Every directory an older scaleprobe may have put this run in (`legacy_names`), for `place`:
    only when (point, repetition) names one run to resume or replace, in a sweep or with
    `--repetition K`. A plain run that takes the next free repetition never goes there: a run of the
    same index there is another, finished one (the index counts such names, see
    launch._next_repetition)."""
    if not replaces:
        return []
    return [run.directory.with_name(f"{name}_rep-{run.repetition}") for name in legacy_names(run.params)]


def run_name(point: dict[str, Value]) -> str:
    """The directory name of a point, a function of the point alone: `point_name` of its parameters
    in a fixed order (`ranks` first, then by name), plus a hash of the point when a value holds a
    character a name keeps only as `_` (`/`, a space, `_` itself), so that `a/b` and `a_b` never
    share a directory, whatever the order they are swept in."""
    return _named(_in_order(point))


def _toml_values(values: list[object], where: str) -> list[Value]:
    texts: dict[str, object] = {}
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise LaunchError(f"{where}: values must be numbers or strings, not {value!r}")
        if isinstance(value, str) and not value.strip():
            # as `--sweep n=1,` is (review 58 F11)
            raise LaunchError(f"{where}: empty value {value!r}")
        text = str(value)
        if text in texts and texts[text] != value:
            # the string "1" and the number 1: the same command twice, and a parameter the modeler
            # refuses as not always a number (review 58 F11)
            raise LaunchError(f"{where}: {texts[text]!r} and {value!r} both reach the program as {text!r}, so they "
                              f"would run the same command twice: give the value once (a number is written "
                              f"without quotes)")
        texts.setdefault(text, value)
    # a TOML number is passed to the program as Python writes it: str(value)
    return list(spelled_values(((v, str(v)) for v in values), where))


def _text(path: Path) -> str:
    """The sweep file's text: UTF-8 (as TOML is), a byte-order mark an editor put first skipped."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LaunchError(f"sweep file {path}: {exc.strerror}") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise LaunchError(f"sweep file {path}: not UTF-8 (byte 0x{raw[exc.start]:02x} at line {line}); "
                          "save it as UTF-8") from None


def load_toml(path: Path) -> Design:
    """A sweep file:

    experiment = "resnet"          # optional
    repeat = 5                     # optional
    [sweep]
    ranks = [1, 2, 4]
    batch = [16, 32, 64]
    [params]                       # optional fixed parameters
    model = "resnet50"
    """
    try:
        import tomllib
    except ImportError:  # Python 3.10: the same parser, as the tomli package (a dependency there)
        import tomli as tomllib

    try:
        data = tomllib.loads(_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise LaunchError(f"sweep file {path}: {exc}") from None
    unknown = set(data) - {"experiment", "repeat", "sweep", "params"}
    if unknown:
        raise LaunchError(f"sweep file {path}: unknown key {sorted(unknown)[0]!r} "
                          "(expected experiment, repeat, [sweep], [params])")
    design = Design()
    if "experiment" in data:
        if not isinstance(data["experiment"], str) or not data["experiment"]:
            raise LaunchError(f"sweep file {path}: experiment must be a non-empty string")
        design.experiment = data["experiment"]
    if "repeat" in data:
        repeat = data["repeat"]
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise LaunchError(f"sweep file {path}: repeat must be a positive integer, not {repeat!r}")
        design.repeat = repeat
    for table in ("sweep", "params"):
        if table in data and not isinstance(data[table], dict):
            raise LaunchError(f"sweep file {path}: {table} must be a table ([{table}])")
    for name, values in data.get("sweep", {}).items():
        where = f"sweep file {path}: sweep.{name}"
        check_name(name, where)
        if values == []:  # review 39: it said "values must be numbers or strings, not []"
            raise LaunchError(f"{where} = []: give at least one value")
        if not isinstance(values, list):
            values = [values]
        design.sweep[name] = _toml_values(values, where)
        if name == "ranks":
            check_ranks(design.sweep[name], where)
    for name, value in data.get("params", {}).items():
        where = f"sweep file {path}: params.{name}"
        check_name(name, where)
        if name in design.sweep:
            raise LaunchError(f"sweep file {path}: parameter {name!r} is in both [sweep] and [params]: give it once")
        (design.fixed[name],) = _toml_values([value], where)
        if name == "ranks":
            check_ranks([design.fixed[name]], where)
    return design
