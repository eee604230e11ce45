"""`modeler`: the command line of the modeler.

Commands live in their own modules, listed in `COMMANDS`; each exposes `configure(parser)` and
`run(args) -> int`. Only the chosen command's module is imported, so a slow or broken command
never slows down or breaks another; a registered module that fails to import is an error shown
to the user when its command is asked for, never skipped silently (and a test imports them all).

`main` is the only place that turns a `ModelerError` into a message and an exit code.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import difflib
import errno
import importlib
import io
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Iterator, NoReturn, Sequence

from . import __version__
from .errors import ModelerError

EXIT_OK = 0
EXIT_ERROR = 1  # a ModelerError: bad input or option, nothing (or nothing complete) was produced
EXIT_USAGE = 2  # argparse's own code for a malformed command line
EXIT_PARTIAL = 3  # output was produced, but some input files could not be read and were skipped


@dataclass(frozen=True)
class Command:
    module: str
    summary: str


COMMANDS: dict[str, Command] = {
    "fit": Command("modeler.commands.fit", "fit performance models to runs and rank regions by scaling"),
    "export": Command("modeler.commands.export", "write measurements as Extra-P JSON Lines"),
    "report": Command("modeler.report.command", "write a self-contained HTML report"),
    "timeline": Command("modeler.timeline", "write a Chrome trace / Perfetto timeline of a traced run"),
}


class CommandImportError(ModelerError):
    """A registered command module could not be imported or lacks configure/run."""


def load_command(name: str, registry: dict[str, Command] | None = None) -> ModuleType:
    """Import the module of command `name`; a failure is a `CommandImportError` naming it."""
    registry = COMMANDS if registry is None else registry
    spec = registry[name]
    try:
        module = importlib.import_module(spec.module)
    except Exception as exc:  # any import-time failure of a plug-in is the user's business to see
        raise CommandImportError(
            f"command {name!r} is registered as module {spec.module!r}, which failed to import: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    missing = [attr for attr in ("configure", "run") if not callable(getattr(module, attr, None))]
    if missing:
        raise CommandImportError(f"command {name!r}: module {spec.module!r} does not define {' and '.join(missing)}()")
    return module


def _top_parser(registry: dict[str, Command]) -> argparse.ArgumentParser:
    width = max(len(n) for n in registry) if registry else 0
    listing = "\n".join(f"  {n.ljust(width)}  {c.summary}" for n, c in registry.items())
    parser = argparse.ArgumentParser(
        prog="modeler",
        description="Fit performance models (PMNF, as Extra-P) to scaleprobe runs and report how code regions scale.",
        epilog=f"commands:\n{listing}\n\nRun `modeler COMMAND --help` for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"modeler (scaleprobe) {__version__}")
    parser.add_argument("command", choices=list(registry), metavar="COMMAND", help="one of: " + ", ".join(registry))
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _warn(message: str) -> None:
    print(f"modeler: {message}", file=sys.stderr)


def release_stdout() -> None:
    """After a `BrokenPipeError` on stdout (`modeler fit runs/ | head`: the reader went away, which
    is not an error of ours): point stdout's file descriptor at devnull, so that later writes and
    the interpreter's final flush go nowhere instead of raising again (Python's documented recipe,
    "Note on SIGPIPE" in the `signal` module's docs). stderr stays as it is: the warnings, the
    skipped files and the exit code still follow."""
    _release(sys.stdout)


def _release(stream) -> None:
    """Point `stream`'s file descriptor at devnull (see `release_stdout`)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream (tests) has no descriptor
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def write_stdout(text: str) -> bool:
    """Write `text` to stdout and flush it; False where the reader has gone (then stdout is
    released, see `release_stdout`) and the command goes on to its warnings and exit code."""
    try:
        _write_all(sys.stdout, text)
    except BrokenPipeError:
        release_stdout()
        return False
    return True


def _write_all(stream, text: str) -> None:
    """Write all of `text` to `stream` and flush it, or raise. A text stream over an unbuffered
    binary one (`PYTHONUNBUFFERED=1`, as many container images set, or `python -u`) hands a long
    text to a single write(2), and a reader that leaves in the middle of it (`| head -1`) makes
    that write return short, without an error: the stream does not look at the count, so the rest
    was lost and the broken pipe known only at the next write, which may never come (then
    `export --extrap -` would say it wrote what the reader never got). There the bytes go in a
    loop that writes what is left until all is written or the pipe says it is broken."""
    raw = getattr(stream, "buffer", None)
    # a buffered stream (the default) writes all or raises; where the text stream would turn "\n"
    # into another line end, it is left to do so
    if not isinstance(raw, io.RawIOBase) or os.linesep != "\n":
        stream.write(text)
        stream.flush()
        return
    stream.flush()
    data = memoryview(text.encode(stream.encoding, stream.errors or "strict"))
    while data:
        written = raw.write(data)
        if written is None:  # a non-blocking stdout that is full: as the text stream would say
            raise BlockingIOError(errno.EAGAIN, "write could not complete without blocking")
        data = data[written:]


class _StderrOfAReaderGone:
    """stderr, but a reader that went away (`modeler fit runs/ 2>&1 | head -1`: stderr shares the
    pipe whose reader left) ends what stderr says, not the command: stderr is released as stdout
    is (`release_stdout`) and the command goes on to its end and its exit code (3 where inputs were
    skipped, 1 for an error), where the `BrokenPipeError` of a warning would have cut it short.
    Everything else is the stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:  # stderr is line-buffered: a line's end flushes it
            _release(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _release(self._stream)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _stderr_outlives_its_reader() -> Iterator[None]:
    """While `main` runs, stderr is a `_StderrOfAReaderGone`: every message of every command (and
    argparse's) goes through `sys.stderr`, so none of them can end the command early. The stream
    comes back as it was when `main` returns."""
    stream = sys.stderr
    if stream is None:  # started with descriptor 2 closed: there is no stderr to keep going
        yield
        return
    sys.stderr = _StderrOfAReaderGone(stream)
    try:
        yield
    finally:
        if isinstance(sys.stderr, _StderrOfAReaderGone) and sys.stderr._stream is stream:
            sys.stderr = stream


@contextlib.contextmanager
def _escaping_streams() -> Iterator[None]:
    """Under a locale that is not UTF-8 (`PYTHONUTF8=0 LC_ALL=C`, a Latin-1 cluster,
    `PYTHONIOENCODING=latin-1`), write what stdout and stderr cannot encode as backslash escapes
    (`\\u2013`) instead of ending in a UnicodeEncodeError: region names are any text, and the
    markdown report always has an en dash (its ranges). UTF-8 streams are left alone, and the
    streams' own settings come back when `main` returns. Files written with -o are UTF-8 anyway."""
    changed = []
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        try:
            utf8 = encoding is None or codecs.lookup(encoding).name == "utf-8"
        except LookupError:
            utf8 = False
        before = getattr(stream, "errors", None)
        if utf8 or before == "backslashreplace" or not callable(getattr(stream, "reconfigure", None)):
            continue
        try:
            stream.reconfigure(errors="backslashreplace")
        except (OSError, ValueError):  # a closed or broken stream: leave it as it is
            continue
        changed.append((stream, before))
    try:
        yield
    finally:
        for stream, before in changed:
            with contextlib.suppress(OSError, ValueError):
                stream.reconfigure(errors=before)


#: options of the launcher given to the modeler by mistake, and what the modeler has instead
_LAUNCHER_OPTIONS = {"--repeat": "--repetitions (how the runs are combined; the launcher's --repeat makes them)",
                     "--sweep": "--where or --at (the launcher's --sweep makes the runs)"}


class _HintingParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """argparse's error, with a hint where an unknown option is like one of ours or the
        launcher's, and where `--at a=1 b=2` left `b=2` over (review 123 LOW-8)."""
        if message.startswith("unrecognized arguments:"):
            known = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            hints, value_of_option = [], False
            for token in message.split(":", 1)[1].split():
                name = token.split("=", 1)[0]
                if name.startswith("--"):
                    close = _LAUNCHER_OPTIONS.get(name) or next(iter(difflib.get_close_matches(name, known, 1, 0.75)), None)
                    if close:
                        hints.append(f"{name}: did you mean {close}?")
                    value_of_option = "=" not in token
                    continue
                if "=" in token and not token.startswith("-") and not value_of_option:
                    hints.append(f"{token}: --at and --where take their NAME=VALUE pairs in one argument, separated "
                                 "by ',' (--at ranks=1024,batch=256)")
                value_of_option = False
            if hints:
                message += "; " + "; ".join(dict.fromkeys(hints))
        super().error(message)


def main(argv: Sequence[str] | None = None, *, registry: dict[str, Command] | None = None) -> int:
    """Run the modeler's command line; returns the exit code (see the EXIT_* constants)."""
    with _escaping_streams(), _stderr_outlives_its_reader():
        return _main(argv, registry)


def _main(argv: Sequence[str] | None, registry: dict[str, Command] | None) -> int:
    registry = COMMANDS if registry is None else registry
    argv = list(sys.argv[1:] if argv is None else argv)
    top = _top_parser(registry)
    try:
        if not argv:  # argparse also named the internal `args` (review 40)
            top.error(f"give a COMMAND: {', '.join(registry)}")
        ns = top.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors: argparse already printed
        return int(exc.code or 0)
    args = None
    try:
        module = load_command(ns.command, registry)
        parser = _HintingParser(
            prog=f"modeler {ns.command}",
            description=(module.__doc__ or registry[ns.command].summary).strip().splitlines()[0],
        )
        module.configure(parser)
        try:
            args = parser.parse_args(ns.args)
        except SystemExit as exc:
            return int(exc.code or 0)
        args.command = ns.command
        return int(module.run(args))
    except ModelerError as exc:
        if not getattr(args, "quiet", False):
            for w in exc.warnings:  # what was noticed on the way often says why nothing is left
                _warn(f"warning: {w}")
        _warn(f"error: {exc}")
        return EXIT_ERROR
    except BrokenPipeError:
        # a write to stdout that did not go through `write_stdout` (`modeler timeline -o -`, which
        # writes nothing after its output; stderr never raises it, see `_StderrOfAReaderGone`): the
        # reader going away is not an error of ours
        release_stdout()
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover - `python -m modeler` goes through __main__.py
    sys.exit(main())
