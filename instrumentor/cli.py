"""`instrument SRC -o OUT`: the command line. The only place that turns errors into exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .emit import BACKENDS
from .errors import InstrumentError
from .graph import ImportGraph
from .project import Options, Project, Summary

EXIT_OK, EXIT_FAILED_FILES, EXIT_USAGE = 0, 1, 2


def nonempty(text: str) -> str:
    """An argparse type: a path, never the empty string, which `Path` takes for the current directory
    (review 40: `-o "$OUT"` with OUT unset built into the working directory)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path (an unset shell variable?)")
    return text


def path_arg(text: str) -> Path:
    return Path(nonempty(text))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="instrument",
        description="Write an instrumented copy of a Python project: every function, loop, epoch and step gets probes.",
    )
    parser.add_argument("src", type=path_arg, help="the project's source directory")
    parser.add_argument("-o", "--out", type=path_arg, help="output directory (not SRC, not inside SRC)")
    parser.add_argument("--main", action="append", default=[], metavar="FILE", type=nonempty,
                        help="entry file, relative to SRC or an absolute path inside it "
                             "(repeatable; default: main.py when it exists)")
    parser.add_argument("--all", action="store_true", help="instrument every .py under SRC, not only the import graph")
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="runtime",
                        help="runtime (default: needs the runtime package) or nvtx (needs only nvtx)")
    parser.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="worker processes (default 1)")
    parser.add_argument("--file-timeout", type=int, default=120, metavar="S",
                        help="give up on a file after S seconds in its worker (default 120; 0: never)")
    show = parser.add_mutually_exclusive_group()  # each prints one thing and writes nothing
    show.add_argument("--diff", action="store_true", help="print the rewrite as a unified diff; write nothing")
    show.add_argument("--graph", action="store_true", help="print the import graph; write nothing (not with --diff)")
    parser.add_argument("--keep-going", action="store_true", help="exit 0 even when some files failed")
    parser.add_argument("--quiet", "-q", action="store_true", help="no summary (files that failed are still named, on stderr)")
    parser.add_argument("--version", action="version", version=f"instrument (scaleprobe) {__version__}")
    return parser


def format_graph(graph: ImportGraph) -> str:
    lines = [f"own modules reached ({len(graph.reached)}):"]
    lines += [f"  {r}" for r in graph.reached]
    lines.append(f"own modules not reached ({len(graph.not_reached)}):")
    lines += [f"  {r}" for r in graph.not_reached]
    lines.append(f"dynamic imports not resolved ({len(graph.unresolved)}):")
    lines += [f"  {u}" for u in graph.unresolved]
    lines.append(f"third-party modules ({len(graph.third_party)}):")
    lines += [f"  {t}" for t in graph.third_party]
    return "\n".join(lines)


def format_summary(summary: Summary) -> str:
    regions = ", ".join(f"{kind} {n}" for kind, n in sorted(summary.regions.items())) or "none"
    lines = [
        f"modules instrumented: {len(summary.instrumented)} ({len(set(summary.reused) & set(summary.instrumented))} "
        "unchanged since the last run)",
        f"files copied unchanged: {summary.copied}",
        f"regions: {sum(summary.regions.values())} ({regions})",
    ]
    if summary.graph is not None and summary.graph.unresolved:
        lines.append(f"dynamic imports not resolved: {len(summary.graph.unresolved)} (see --graph; --all instruments every module)")
    if summary.skipped:
        reasons: dict[str, int] = {}
        for _, skip in summary.skipped:
            reasons[skip.reason] = reasons.get(skip.reason, 0) + 1
        lines.append("skipped: " + ", ".join(f"{r} {n}" for r, n in sorted(reasons.items())))
    lines += format_failed(summary)
    lines += _epoch_hint(summary)
    return "\n".join(lines)


def format_failed(summary: Summary) -> list[str]:
    return [f"files failed: {len(summary.failed)}", *(f"  {f}" for f in summary.failed)]


def _epoch_hint(summary: Summary) -> list[str]:
    """Step loops but no epoch loop: the epoch rule follows calls by name, and a loop may run the
    epochs through another name (an alias, a callback), or there are no epochs (review 12)."""
    if summary.regions.get("epoch") or not summary.regions.get("step"):
        return []
    steps = sorted(f"{r.file}:{r.line} ({r.name})" for result in summary.results.values()
                   for r in result.regions if r.kind == "step")
    if not steps:
        return []
    shown = ", ".join(steps[:3]) + (f" and {len(steps) - 3} more" if len(steps) > 3 else "")
    return [f"no epoch loop found around the step loop(s) {shown}: a loop is an epoch loop when it encloses "
            "one or calls, by its name, a function that holds one; if a loop runs the epochs through "
            "another name, mark it with `# scaleprobe: epoch` to get epoch records"]


def _nvtx_missing(args: argparse.Namespace) -> list[str]:
    """A `--backend nvtx` build imports nvtx in its first line, even with SCALEPROBE_DISABLE=1: said
    when this Python cannot import it (review 70 F10: a bare ModuleNotFoundError at run time)."""
    if args.backend != "nvtx" or args.graph:  # --diff's patch gives the same modules (review 82 F6)
        return []
    import importlib.util

    try:
        if importlib.util.find_spec("nvtx") is not None:
            return []
    except (ImportError, ValueError):
        pass
    return ["--backend nvtx: the built modules import the nvtx package, which this Python cannot import: they "
            "fail with ModuleNotFoundError where it is missing, also with SCALEPROBE_DISABLE=1 (pip install nvtx "
            "where they run, or build with the default runtime backend and run with SCALEPROBE_NVTX=1)"]


def _package_src(args: argparse.Namespace, project: Project) -> list[str]:
    """SRC that is itself a package whose entry uses relative imports (review 128 LOW-6): the build
    cannot run as a script; how to build it so that it runs as `python -m`."""
    if args.graph or args.diff:
        return []
    from .package_src import hint

    try:
        found = hint(args.src, args.out, project.entries())
    except Exception:  # noqa: BLE001 - a hint never fails a build that was made
        return []
    return [found] if found is not None else []


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except BrokenPipeError:
        # `instrument src --graph | head`: the reader went away, which is not an error of ours (what
        # was built is built); point stdout at devnull so the interpreter's final flush does not raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    try:
        if args.jobs < 1:
            raise InstrumentError(f"--jobs {args.jobs}: must be at least 1")
        if args.file_timeout < 0:
            raise InstrumentError(f"--file-timeout {args.file_timeout}: must not be negative")
        if not (args.graph or args.diff) and args.out is None:
            raise InstrumentError("-o OUT is required (or --diff / --graph)")
        if args.out is not None and os.path.exists(args.out) and not os.path.isdir(args.out):
            raise InstrumentError(f"-o {args.out}: exists and is not a directory")
        project = Project(Options(args.src, args.out, args.main, args.all, args.backend, args.jobs, args.file_timeout))
        if args.graph:
            summary = project.show_graph()
            print(format_graph(summary.graph))  # type: ignore[arg-type]
        elif args.diff:
            text, summary = project.diff()
            sys.stdout.write(text)
        else:
            summary = project.build()
    except InstrumentError as exc:
        print(f"instrument: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for warning in [*summary.warnings, *_nvtx_missing(args), *_package_src(args, project)]:  # also with -q
        print(f"instrument: warning: {warning}", file=sys.stderr)
    if args.quiet:
        if summary.failed:  # -q drops the summary, never what failed
            print("\n".join(f"instrument: failed: {f}" for f in summary.failed), file=sys.stderr)
    elif not args.graph:
        print(format_summary(summary), file=sys.stderr if args.diff else sys.stdout)
    elif summary.failed:  # the graph is its own summary: it adds what it could not read, as the build names it
        print("\n".join(format_failed(summary)))
    if summary.failed and not args.keep_going:
        return EXIT_FAILED_FILES
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
