"""`modeler`: the command line of the modeler.

Commands live in their own modules, listed in `COMMANDS`; each exposes `configure(parser)` and
`run(args) -> int`. Only the chosen command's module is imported, so a slow or broken command
never slows down or breaks another; a registered module that fails to import is an error shown
to the user when its command is asked for, never skipped silently (and a test imports them all).

`main` is the only place that turns a `ModelerError` into a message and an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Sequence

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


def main(argv: Sequence[str] | None = None, *, registry: dict[str, Command] | None = None) -> int:
    """Run the modeler's command line; returns the exit code (see the EXIT_* constants)."""
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
        parser = argparse.ArgumentParser(
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
        # `modeler fit runs/ | head`: the reader went away, which is not an error of ours; point
        # stdout at devnull so the interpreter's final flush does not raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover - `python -m modeler` goes through __main__.py
    sys.exit(main())
