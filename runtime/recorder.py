"""The per-process recorder: start-up from the environment, region table, periodic and final
flushes, exit/signal/exception/fork hooks. Everything here runs off the hot path.

Started by the first `probe.define` (or the manual API), so `python build/main.py` records without
the launcher: to $SCALEPROBE_OUT, or to ./scaleprobe-runs/<run id>/, named on stderr at exit.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from fnmatch import fnmatchcase
from typing import Any, NoReturn

from . import _backend, exec_hook, gc_pause, run_signals, signal_disguise, signal_watch, stale_visits
from .config import Config, ConfigError, RankSet, from_env
from .errors import ScaleprobeRuntimeError
from .fork_signals import stand_in, stands_in
from .process_identity import (_MP_PARENT, clock_pair, _cpus, _cuda_version, _from_mp_parent, _identity, _job_run_id,
                               _mp_parent_pid, _torch_version)
from .profile_deltas import _by_path
from .signal_disguise import real_getsignal, real_signal
from .runfile import RunWriter, file_on_the_way, rename_run_file, run_file_name
from .step_thinning import StepThinning
from .sysexit import exit_status

impl = _backend.impl

_UNSET = object()

# Region ids the runtime hands out itself (comm, manual, reserve): RESERVED_BASE up to RESERVED_END.
# A build gives its modules ids below them, and a build of more ids goes on from RESERVED_END
# (instrumentor.regions.RUNTIME_IDS), so that a module imported later never has one of them.
RESERVED_BASE = 1 << 16
RESERVED_END = 1 << 18

# An epoch end asks the flush thread for a write; it writes at most this often for such requests
# (and never more often than SCALEPROBE_FLUSH_INTERVAL), merging the requests in between, so that a
# loop of many tiny epochs does not turn into one write per epoch.
EPOCH_FLUSH_SPACING_S = 1.0

# Measurements a failed write (disk full, file size limit) leaves are kept and written first by the
# next flush; past this many bytes waiting they are given up and counted in the end record.
MAX_UNWRITTEN_BYTES = 64 << 20

# A signal that the watch takes (signal_watch: the main thread is blocked in C) ends the process
# even when the end record cannot be written: what holds the recorder's lock gets this long.
END_LOCK_WAIT_S = 3.0


class Recorder:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.lock = threading.RLock()
        self.regions: dict[int, tuple[str, str, str, int, str]] = {}
        #: the regions whose record the file has: a flush writes those of the ids its records use
        #: first (a project's 10,000 functions, of which a run calls 4, made 1 MB of every file)
        self.written_regions: set[int] = set()
        self.pending_rank: dict | None = None  # a `rank` record to write (`note_rank`)
        self.rank_source = "none"  # where the rank came from: variable, torch.distributed, parent, none
        self._run_id_for_children: str | None = None
        self.unselected = False  # not among SCALEPROBE_RANKS, but the rank is not known yet
        self.rank_noted = False  # torch.distributed's rank and world size are known
        self.modules: list[dict] = []
        self.on = True
        self.enabled = True  # False: this rank is not profiled, nothing is written
        self.next_reserved = RESERVED_BASE
        self.series: deque[dict] = deque()  # epoch/step records from the recording threads
        self.series_wait: list[dict] = []  # records whose GPU time is not resolved yet
        # (op, group_size, callpath) -> [calls, bytes, time_ns, gpu_ns, gpu_calls, GPU intervals unread]
        self.comm: dict[tuple, list] = {}
        # summaries written while some of their GPU intervals were unread: [key, summary, gpu_ns
        # written, gpu_calls written]; what resolves later goes into the next flush (review 33 L2)
        self.comm_late: list[list] = []
        self.comm_lock = threading.Lock()
        from .comm import CommSpans

        self.comm_spans = CommSpans()  # when communication ran, for the epoch and step records
        self.region_totals: dict[int, list[int]] = {}  # rid -> [visits, incl]
        self.in_steps: set[int] = set()  # regions visited inside a step loop (the GPU rotation's first turns)
        self.step_rids: set[int] = set()  # the step loops' region ids
        self.throttled: dict[int, tuple[int, float]] = {}
        self.writer: RunWriter | None = None
        self.path: str | None = None
        self.header: dict[str, Any] = {}
        self.flushes = 0
        self.failed_writes = 0  # flushes in a row whose write failed (their records wait in the writer)
        self.lost_flushes = 0  # flushes whose records were given up after failed writes
        self.file_removed = False  # the run file was deleted while the program ran (said at the end)
        self.last_error: str | None = None  # the flush thread's last error message, said once
        self.steps_seen = 0  # steps of the whole run: the schedule counts these
        #: SCALEPROBE_STEP_RECORDS (None: every step is written)
        self.thinning: StepThinning | None = StepThinning(cfg.step_records) if cfg.step_records > 0 else None
        self.finished = False
        self.finishing = False
        self.fork_file_open = False  # a forked child's own file has its header (after_fork_child)
        self.finishing_thread: int | None = None  # the thread writing the end record
        self.closing_own = False  # the final flush ends this thread's open visits too (`finish`)
        self.deferred_signal: int | None = None  # a signal that came to that thread meanwhile
        self.status: str | None = None
        self.exc_type: str | None = None
        self.signal: int | None = None
        self.stop_mark = run_signals.mark()  # a stop signal the program's own handler takes: `finish`
        self.exit_code: int | None = None  # decided by the excepthook
        self.exit_frozen: Any = _UNSET  # backend's exit_seen() when interpreter shutdown began
        self.main_code: Any = None  # code object of `__main__` (watched on Python 3.12+)
        self.main_exit: tuple | None = None  # (code,) of the SystemExit that unwound `__main__`
        self.wake = gc_pause.Wake()
        self.thread: threading.Thread | None = None
        self.sigwatch: signal_watch.Watch | None = None  # stand-in signals the flush thread takes: signal_watch
        self.flush_requested = False  # an epoch ended since the last flush (see request_flush)
        self.last_flush = time.monotonic()  # when the last flush began (the start counts as one)
        self.pid = os.getpid()
        self.start_ns, self.start_unix = clock_pair()
        self.end_ns: int | None = None  # when the end record's duration was taken (_end_now)
        self.default_dir = False
        self.gpu = None  # runtime.gpu.GpuTimer once the program uses CUDA
        self.gpu_rotation = None  # runtime.gpu.Rotation: GPU samples of ordinary regions
        self.tracer = None  # runtime.trace.Tracer with SCALEPROBE_TRACE=1
        if cfg.trace:
            from .trace import Tracer

            self.tracer = Tracer(self, cfg.trace_max)
        self.rank = 0
        self._include = cfg.include
        self._exclude = cfg.exclude

    # ----- identity, header, file -------------------------------------------------------------

    def open(self) -> None:
        ident = _identity()
        parent = _mp_parent_pid()
        inherited = _from_mp_parent(parent)
        from_variable = ident.get("launcher") not in (None, "none")
        if inherited is not None and (not from_variable or inherited.get("source") == "torch.distributed"):
            # a child is its parent's helper, of the parent's rank where no rank variable gives its
            # own, or where torch.distributed made the parent a rank (a spawned rank's DataLoader
            # worker inherits no RANK, or the launcher's for the process that started the ranks)
            ident = dict(ident, rank=inherited["rank"], world_size=inherited["world_size"])
            self.rank_source = "parent" if inherited.get("source") == "none" else str(inherited.get("source"))
        else:
            self.rank_source = "variable" if from_variable else "none"
        # the image this process replaced with os.exec*, where it recorded: the same rank and run
        before = exec_hook.continued(self.pid)
        if before is not None and inherited is None and not from_variable and isinstance(before.get("rank"), int) \
                and isinstance(before.get("world_size"), int):
            ident = dict(ident, rank=before["rank"], world_size=before["world_size"])
            self.rank_source = str(before.get("rank_source") or "none")
        self.rank = ident["rank"]
        self._run_id_for_children = (inherited or {}).get("run_id") or (before or {}).get("run_id")
        if self.cfg.ranks and ident["rank"] not in RankSet.parse(self.cfg.ranks):
            if self.rank_known:
                self.enabled = False
                self.on = False
                self._tell_mp_children()  # its workers are its rank's, not selected either (review 23)
                return
            self.unselected = True  # recorded until it is known: dropped at the end if never selected
        job = _job_run_id(ident["world_size"])
        run_id = self.cfg.run_id or job or (inherited or {}).get("run_id") or (before or {}).get("run_id")
        if job and not self.cfg.run_id and parent is None:
            # as our launcher gives it: the rank's spawned DataLoader workers (whose parent is
            # the rank, not the torchrun agent) join its run
            os.environ["SCALEPROBE_RUN_ID"] = job
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S", time.localtime()) + f"-{self.pid}"
        out = self.cfg.out_dir
        if out is None:
            out = os.path.join("scaleprobe-runs", run_id)
            self.default_dir = True
        self.header = {
            "run_id": run_id,
            "experiment": self.cfg.experiment,
            "params": self.cfg.params,
            "repetition": self.cfg.repetition,
            **ident,
            "launcher": self.cfg.launcher or ident.get("launcher") or "none",
            **_cpus(),
            # where the rank came from: a rank variable, the multiprocessing parent, or nothing (0)
            "rank_source": self.rank_source,
            "pid": self.pid,
            "ppid": os.getppid(),
            "python": sys.version.split()[0],
            "torch": _torch_version(),
            "cuda": _cuda_version(),
            "backend": _backend.NAME,
            "clock": "perf_counter_ns",
            "start_ns": self.start_ns,
            "start_unix": self.start_unix,  # read with start_ns (clock_pair)
            "argv": list(sys.argv),
            "schedule": None if self.cfg.schedule is None else vars(self.cfg.schedule),
            "throttle": {"calls": self.cfg.throttle_calls, "ns": self.cfg.throttle_ns},
            "step_records": self.cfg.step_records,
            # recorded with SCALEPROBE_TRACE=1: a timeline without events says they were lost (review 90 F4)
            "trace": {"max": self.cfg.trace_max} if self.cfg.trace else None,
            # the instrumentor that wrote the module whose `define` started recording (review 89 M1:
            # runs of different builds could not be told apart); null for the manual API alone
            "build": _first_build(),
        }
        if self.cfg.ranks:  # rank selection: the ranks that record, so that readers can tell one that died
            selected = RankSet.parse(self.cfg.ranks)
            self.header["recorded_ranks"] = [r for r in range(max(1, int(ident["world_size"]))) if r in selected]
        if parent is not None:  # a spawned multiprocessing child (e.g. a DataLoader worker), not a rank
            self.header["child_of"] = parent
        if before is not None:  # readers add its file to the rank's (or to its helper process's)
            self.header["exec_of"] = before["file"]
            for key in ("child_of", "forked_from"):
                if before.get(key) is not None and key not in self.header:
                    self.header[key] = before[key]
        self._open_file(out)
        self._tell_mp_children()

    @property
    def rank_known(self) -> bool:
        """The rank came from a rank variable or torch.distributed; a process whose rank no variable
        gives may be made one by init_process_group (torch's spawn; its fork-started ranks too)."""
        return self.rank_source in ("variable", "torch.distributed")

    def _tell_mp_children(self) -> None:
        """Spawned multiprocessing children (a fresh interpreter each) join this process's run, and
        take its rank where no rank variable tells theirs: `SCALEPROBE_MP_PARENT`, read by the
        children of this very process only (an unrelated program it starts makes a run of its own)."""
        import json

        header = getattr(self, "header", None) or {}
        os.environ[_MP_PARENT] = json.dumps({
            "pid": self.pid, "run_id": header.get("run_id", self._run_id_for_children), "rank": self.rank,
            "world_size": header.get("world_size", 1), "source": self.rank_source})

    def _leave_unrecorded(self) -> None:
        """A rank that SCALEPROBE_RANKS does not select, known only now: it records nothing, and
        the file it wrote meanwhile goes, as if it had never started."""
        with self.lock:
            self.set_on(False)
            self.enabled = False
            self.on = False
            writer, self.writer = self.writer, None
            if writer is not None:
                writer.close()
                try:
                    os.unlink(self.path)
                    if self.default_dir:
                        os.rmdir(os.path.dirname(self.path))  # only when no other process wrote there
                except OSError:
                    pass

    def note_rank(self, rank: int, world_size: int) -> None:
        """torch.distributed's rank and world size, now that its group is up. Where the header says
        otherwise, or calls this process a multiprocessing child (a rank started by
        `torch.multiprocessing.spawn` reads no RANK at import, and its parent started it), a `rank`
        record says them and readers take them (docs/format.md); its workers started from now on
        are its rank's."""
        h = self.header
        self.rank_noted = True
        if not self.enabled or (rank, world_size) == (h.get("rank"), h.get("world_size")) and h.get("child_of") is None:
            return
        started_by = h.get("child_of")
        try:  # the process that started it: for a forkserver's child, not the forkserver
            started = sys.modules["multiprocessing"].parent_process()
            if started is not None and started_by is not None:
                started_by = started.pid
        except Exception:  # noqa: BLE001 - no multiprocessing, or an unusual context
            pass
        self.rank_source = "torch.distributed"
        if self.cfg.ranks:
            selected = RankSet.parse(self.cfg.ranks)
            if rank not in selected:  # rank selection, now that the rank is known (review 22)
                self._leave_unrecorded()
                self.rank = rank
                self._tell_mp_children()
                return
            self.unselected = False
            h = dict(h, recorded_ranks=[r for r in range(world_size) if r in selected])
        with self.lock:
            self.pending_rank = {"type": "rank", "rank": rank, "world_size": world_size, "started_by": started_by}
            if "recorded_ranks" in h:
                self.pending_rank["recorded_ranks"] = h["recorded_ranks"]
            self.header = {k: v for k, v in h.items() if k not in ("child_of", "forked_from")}
            self.header.update(rank=rank, world_size=world_size)
            self.rank = rank
            if self.path is not None and self.writer is not None:
                # the file is named by its rank: rank0.<pid>.jsonl becomes rank1.<pid>.jsonl (the
                # descriptor stays good; the `rank` record is what readers go by)
                named = rename_run_file(self.path, rank, self.pid)
                if named != self.path:
                    self.path = named
                    self.writer.path = type(self.writer.path)(named)
        self._tell_mp_children()
        self.request_flush()

    def end_for_exec(self) -> dict[str, Any] | None:
        """The program replaces itself with os.exec*: the run ends here (status `exec`, the open
        visits of this thread too, as at a signal's default action); what the new image is told
        (runtime/exec_hook.py), or None where this process records nothing."""
        if self.finished or self.finishing or os.getpid() != self.pid:
            return None
        recording = self.enabled and not self.unselected and self.writer is not None and self.path is not None
        told = {
            "pid": self.pid, "file": os.path.basename(self.path or ""), "run_id": self.header.get("run_id"),
            "rank": self.rank, "world_size": self.header.get("world_size"), "rank_source": self.rank_source,
            "child_of": self.header.get("child_of"), "forked_from": self.header.get("forked_from"),
        }
        self.finish(status="exec", close_own=True)
        return told if recording else None

    def _open_file(self, out: str) -> None:
        self.path = os.path.join(out, run_file_name(self.rank, self.pid))
        try:
            os.makedirs(out, exist_ok=True)
            # never appended to another file: this process's image before an os.exec* has its name
            self.writer = RunWriter.create(out, self.rank, self.pid, self.header)
            self.path = str(self.writer.path)
        except OSError as e:
            where = "SCALEPROBE_OUT" if self.cfg.out_dir else "the default directory"
            why = e.strerror or str(e)
            if isinstance(e, (FileExistsError, NotADirectoryError)) and (said := file_on_the_way(e.filename)):
                why = said  # review 26: it said `File exists`; review 65 F6: for a device, a FIFO too
            raise ConfigError(f"cannot write the run file {self.path} ({where}): {why}") from None

    # ----- regions -----------------------------------------------------------------------------

    def add_regions(self, module: str, relpath: str, regions) -> None:
        for reg in regions:
            rid, kind, qualname, line = reg
            rid = int(rid)
            old = self.regions.get(rid)
            new = (kind, qualname, relpath, int(line), module)
            if old is not None and old[1:3] != new[1:3]:
                raise ConfigError(
                    f"region id {rid} defined twice: {old[2]}:{old[3]} {old[1]} and {relpath}:{line} {qualname}"
                    " (instrument the whole project in one run so that ids are unique)"
                )
            if old is None:
                if kind == "step":
                    self.step_rids.add(rid)
                self.regions[rid] = new
                impl.ensure_capacity(rid + 1)
                if not self._selected(qualname, module):
                    impl.set_off(rid, True)
                if self.next_reserved <= rid < RESERVED_END:  # (a module of `--instrument`'s, carried)
                    self.next_reserved = rid + 1

    def _selected(self, name: str, module: str) -> bool:
        full = f"{module}.{name}" if module else name
        if self._include and not any(fnmatchcase(name, p) or fnmatchcase(full, p) for p in self._include):
            return False
        return not any(fnmatchcase(name, p) or fnmatchcase(full, p) for p in self._exclude)

    def reserve(self, n: int) -> int:
        with self.lock:
            base = self.next_reserved
            if base + n > RESERVED_END:
                raise ConfigError(f"the runtime's own region ids ({RESERVED_BASE} to {RESERVED_END - 1}) are used up: "
                                  f"{base - RESERVED_BASE} given, {n} more asked for (the modules that --instrument "
                                  "compiled, manual regions, collectives); instrument the project with `instrument` "
                                  "instead of --instrument")
            self.next_reserved += n
        impl.ensure_capacity(base + n)
        return base

    def new_region(self, kind: str, name: str, file: str = "", line: int = 0) -> int:
        with self.lock:  # a region and its id come together for a flush
            rid = self.reserve(1)
            self.add_regions("", file, [(rid, kind, name, line)])
        return rid

    def set_on(self, on: bool) -> None:
        on = bool(on) and self.enabled and not self.finished
        if on == self.on:
            return
        if on:
            # before the probes see it: the visits of functions that returned meanwhile end now
            try:
                gc_pause.pause()  # (inside the try: see gc_pause)
                stale_visits.end_stale(impl, self.regions)
            finally:
                gc_pause.resume()
            impl.note_on()  # and those open now span a window with probes off: see note_on
            if self.tracer is not None:
                self.tracer.note_on()  # (as their events: runtime.trace)
        self.on = on
        for g in self.modules:
            g["__sp_on__"] = on

    # ----- flushing ----------------------------------------------------------------------------

    def start_thread(self) -> None:
        if self.cfg.flush_interval_s <= 0 or not self.enabled:
            return
        t = threading.Thread(target=self._loop, name="scaleprobe-flush", daemon=True)
        self.thread = t
        # The thread starts with the signals the program may handle blocked, so that the kernel
        # delivers them to the program's own threads: a SIGTERM taken by this thread would leave a
        # main thread blocked on a lock asleep (a Pool worker told to stop by terminate() then hung)
        mask = _block_async_signals()
        gc_pause.pause()  # handed to the thread (_loop): its start-up allocates as well
        try:
            t.start()
        except BaseException:
            gc_pause.resume()
            raise
        finally:
            _restore_signals(mask)

    def request_flush(self) -> None:
        """An epoch ended: have its records written soon, without waiting for the write here.

        The flush thread writes FLUSH_INTERVAL after the previous flush, or, with a request
        pending, min(FLUSH_INTERVAL, EPOCH_FLUSH_SPACING_S) after it (at once when that is past).
        All requests until then are one write. Without a thread (FLUSH_INTERVAL=0) the flush
        happens here, at every epoch end."""
        if self.thread is None:
            self.flush()
        elif not self.flush_requested:
            self.flush_requested = True
            self.wake.set()

    def _loop(self) -> None:
        # With the collector paused (by start_thread) but for the waits: the program's finalizers
        # run on its own threads, never on this one (gc_pause).
        try:
            self._flush_loop()
        finally:
            gc_pause.resume()

    def _flush_loop(self) -> None:
        pid = os.getpid()
        interval = self.cfg.flush_interval_s
        while not self.finished and os.getpid() == pid:
            spacing = min(interval, EPOCH_FLUSH_SPACING_S)
            # The flag, not the event, says whether a request is pending: a wake-up that was
            # cleared unseen only makes this loop look again.
            due = self.last_flush + (spacing if self.flush_requested else interval)
            left = due - time.monotonic()
            if left > 0:
                watch = self.sigwatch
                gc_pause.idle(self.wake, left if watch is None else min(left, signal_watch.POLL_S))
                lost = None if watch is None else watch.lost()
                if lost is not None:
                    self._die_of(lost)
                continue
            if self.finished or os.getpid() != pid:
                return
            self.last_flush = time.monotonic()  # also when the flush fails: no busy retrying
            try:
                self.flush()
            except Exception as e:  # a flusher that dies silently would lose the run
                msg = f"scaleprobe: flush of {self.path} failed: {e!r}"
                if msg != self.last_error:  # once, not at every flush
                    print(msg, file=sys.stderr)
                    self.last_error = msg

    def _die_of(self, signum: int) -> None:
        """A stand-in signal that never reached Python (signal_watch): end as its handler would.

        In the flush thread, while the main thread is blocked in C. The lock is had before the end
        record, so that a Python handler that runs meanwhile waits for the write (`wait_finished`);
        its holder gets END_LOCK_WAIT_S, after which the process ends without its end record,
        as the default action would have ended it."""

        def write_end() -> None:
            if not self.lock.acquire(timeout=END_LOCK_WAIT_S):
                print(f"scaleprobe: signal {signum}: the run file {self.path} could not be ended (its end record"
                      " is missing)", file=sys.stderr)
                return
            try:
                self.signal = signum
                self.finish(status="signal", exit_code=128 + signum, signal=signum)
            finally:
                self.lock.release()

        signal_watch.take_default(signum, write_end)

    def wait_finished(self, timeout: float = END_LOCK_WAIT_S + 10.0) -> None:
        """Another thread is writing the end record (the signal watch, `_die_of`): wait until the
        file is ended before the process is. Immediate in the thread that writes it (the lock is
        re-entrant: a handler that interrupted its own thread's `finish`)."""
        if self.finishing and self.lock.acquire(timeout=timeout):
            self.lock.release()

    def flush(self, final_records: list[dict] | None = None, sync: bool = False) -> bool:
        """Write what was measured since the previous flush; False if the write failed (its records
        are kept for the next flush, see _write). With the collector paused (gc_pause): a program's
        finalizer run by its allocations would run inside the snapshot."""
        try:
            gc_pause.pause()  # (inside the try: see gc_pause)
            return self._flush(final_records, sync)
        finally:
            gc_pause.resume()

    def _flush(self, final_records: list[dict] | None, sync: bool) -> bool:
        if not self.enabled or self.writer is None:
            return True
        if not self.rank_noted and "forked_from" not in self.header and "torch.distributed" in sys.modules:
            # a group set up without the patched init_process_group (a forked child inherits its
            # parent's group, and is no rank for it)
            from .comm import note_rank

            note_rank(self)
        with self.lock:
            if self.writer is None:
                return True
            # Before the records are taken: an epoch that ends after this asks again.
            self.flush_requested = False
            self.last_flush = time.monotonic()
            self.flushes += 1
            n = self.flushes
            recs: list[dict] = []
            if self.pending_rank is not None:
                recs.append(self.pending_rank)
                self.pending_rank = None
            gpu_recs: list[dict] = []
            if self.gpu is not None:
                # Before the deltas are taken: whatever happens here, this interval's profile is
                # written (review 33, H6). The timer contains CUDA errors and says them itself.
                try:
                    self.gpu.resolve(wait=final_records is not None)
                    if self.gpu_rotation is not None:
                        gpu_recs = [dict(r, flush=n) for r in self.gpu_rotation.take()]
                except Exception as e:
                    print(f"scaleprobe: reading GPU events failed: {e!r}", file=sys.stderr)
            if final_records is None:
                deltas = impl.take_deltas()
            else:
                # Daemon threads that run for the whole program still have visits open: they are
                # counted as ending now (and said so in the end record), not left out.
                # With probes off at the end (a schedule's window, set_enabled(False)) every thread's
                # open visits were left so: they end as dropped ones (review 52 F4, F5)
                closed, deltas = impl.take_final_deltas(self.closing_own, not self.on)
                if self.tracer is not None:  # their events too (review 83 LOW-5: they had none)
                    self.tracer.close_at_end(self.end_ns or time.perf_counter_ns(), self.closing_own, not self.on)
                for r in final_records:
                    if r.get("type") == "end":
                        r["closed_at_end"] = closed
                        r["dropped"] = impl.dropped()
                        if self.tracer is not None:
                            r["trace_dropped"], r["trace_unmatched"] = self.tracer.dropped, self.tracer.unmatched
            in_steps, step_rids = self.in_steps, self.step_rids
            for path, visits, incl, excl, mn, mx, sq, rec in _by_path(deltas):
                recs.append(
                    {"type": "profile", "flush": n, "path": list(path), "visits": visits, "incl_ns": incl,
                     "excl_ns": excl, "min_ns": mn, "max_ns": mx, "sumsq_ns": sq, "recursive": rec}
                )
                tot = self.region_totals.setdefault(path[-1], [0, 0])
                tot[0] += visits - rec
                tot[1] += incl
                # (a set of the step loops' ids: review 97 LOW-1, a look-up of each id's kind made a
                # flush of 22k deep paths 1.7x as long)
                if path[-1] not in in_steps and not step_rids.isdisjoint(path[:-1]):
                    in_steps.add(path[-1])
            for rid, count in impl.take_iterations():
                recs.append({"type": "iterations", "flush": n, "region": rid, "count": count})
            recs.extend(gpu_recs)
            if final_records is not None and self.thinning is not None:
                self.series.extend(self.thinning.release())  # the last weighted step of each loop
            waiting = self.series_wait
            while self.series:
                waiting.append(self.series.popleft())
            self.series_wait = []
            for s in waiting:
                (self.series_wait if s.get("gpu_ns", None) is _PENDING else recs).append(s)
            if final_records is not None:
                for s in self.series_wait:
                    s["gpu_ns"] = None  # never completed: say so rather than guess
                recs.extend(self.series_wait)
                self.series_wait = []
            with self.comm_lock:
                comm, self.comm = self.comm, {}
            recs.extend(self._comm_records(n, comm))
            if final_records is None:
                # Not at the end: every visit of the run was timed, so nothing is partial yet.
                recs.extend(self._throttle())
            if self.tracer is not None:
                recs.extend(self.tracer.take(n))
            if final_records:
                for r in final_records:
                    if r.get("type") == "end":
                        r["lost_flushes"] = self.lost_flushes
                        if self.thinning is not None and self.thinning.thinned:
                            r["steps_thinned"] = self.thinning.end_counts()  # SCALEPROBE_STEP_RECORDS
                        if self.gpu is not None and self.gpu.error is not None:
                            r["gpu_error"] = self.gpu.error  # GPU timing was turned off by it
                recs.extend(final_records)
            return self._write([*self._region_records(recs), *recs], sync, final=final_records is not None)

    def _region_records(self, recs: list[dict]) -> list[dict]:
        """The `region` records of the ids that `recs` use and the file lacks (docs/format.md: each
        written before the first record that uses it)."""
        used: set[int] = set()
        for r in recs:
            t = r["type"]
            if t == "profile":
                used.update(r["path"])
            elif t == "comm":
                used.update(r["callpath"])
            elif t == "events":
                used.update(e[0] for e in r["events"])
            elif "region" in r:  # iterations, epoch, step, gpu, throttled
                used.add(r["region"])
        out = []
        for rid in sorted(used - self.written_regions):
            known = self.regions.get(rid)
            if known is not None:
                kind, name, file, line, module = known
                out.append({"type": "region", "id": rid, "kind": kind, "name": name, "file": file, "line": line,
                            "module": module})
                self.written_regions.add(rid)
        return out

    def _write(self, recs: list[dict], sync: bool, final: bool) -> bool:
        """Write a flush's records. A failed write (disk full, file size limit) keeps its bytes in
        the writer, which writes them first at the next flush: nothing is lost while the failure is
        temporary. Past MAX_UNWRITTEN_BYTES they are given up and counted in `lost_flushes`. Said
        once per streak of failures, naming the file."""
        writer = self.writer
        try:
            writer.write_records(recs, sync=sync)
        except OSError as e:
            self.failed_writes += 1
            why = e.strerror or repr(e)
            if final:
                print(f"scaleprobe: cannot write run file {self.path}: {why}: the records of its last"
                      f" {self.failed_writes} flush(es), the end record among them, are missing (the file reads"
                      " as cut off)", file=sys.stderr)
            elif writer.pending > MAX_UNWRITTEN_BYTES:
                writer.drop_pending()
                self.written_regions = set()  # their region records went with them (review 22)
                self.lost_flushes += self.failed_writes
                print(f"scaleprobe: cannot write run file {self.path}: {why}: the measurements of {self.failed_writes}"
                      " flush(es) are given up (the end record counts them in lost_flushes)", file=sys.stderr)
                self.failed_writes = 0
            elif self.failed_writes == 1:
                print(f"scaleprobe: cannot write run file {self.path}: {why}; keeping the measurements and trying"
                      " again at the next flush", file=sys.stderr)
            return False
        if self.failed_writes:
            print(f"scaleprobe: run file {self.path} written again after {self.failed_writes} failed flush(es),"
                  " nothing lost", file=sys.stderr)
            self.failed_writes = 0
        return True

    def _comm_records(self, n: int, comm: dict[tuple, list]) -> list[dict]:
        """The `comm` records of flush n: the summaries of its interval, and for the summaries of
        earlier intervals whose GPU time resolved since they were written, that GPU time (a record
        of 0 calls): a collective's CUDA events complete after the flush that took its summary."""
        if self.finishing and "runtime.comm" in sys.modules:
            try:  # the calls still in progress end with the run (a rank blocked in a collective)
                sys.modules["runtime.comm"].take_open(comm, self.end_ns)
            except Exception as e:  # noqa: BLE001 - never lose the end record for it
                print(f"scaleprobe: counting the communication calls in progress: {e!r}", file=sys.stderr)
        out = []
        still = []
        for late in self.comm_late:
            (op, group, path), s, ns0, calls0 = late
            unread, gpu_ns, gpu_calls = s[5], s[3], s[4]  # (unread first: what it counted has been added)
            if gpu_calls > calls0:
                out.append({"type": "comm", "flush": n, "op": op, "bytes": 0, "group_size": group, "calls": 0,
                            "time_ns": 0, "gpu_ns": gpu_ns - ns0, "gpu_calls": gpu_calls - calls0,
                            "callpath": list(path)})
                late[2], late[3] = gpu_ns, gpu_calls
            if unread > 0:
                still.append(late)
        for key, s in comm.items():
            unread = s[5]
            calls, nbytes, t_ns, gpu_ns, gpu_calls = s[:5]
            op, group, path = key
            out.append({"type": "comm", "flush": n, "op": op, "bytes": nbytes, "group_size": group, "calls": calls,
                        "time_ns": t_ns, "gpu_ns": gpu_ns if gpu_calls else None, "gpu_calls": gpu_calls,
                        "callpath": list(path)})
            if s[6]:  # of `calls`, ended by an exception; still in progress at the end (comm.take_open)
                out[-1]["failed"] = s[6]
            if s[7]:
                out[-1]["unfinished"] = s[7]
            if unread > 0:
                still.append([key, s, gpu_ns, gpu_calls])
        self.comm_late = still
        return out

    def _throttle(self) -> list[dict]:
        calls, limit = self.cfg.throttle_calls, self.cfg.throttle_ns
        if calls <= 0:
            return []
        out = []
        for rid, (visits, incl) in self.region_totals.items():
            if visits > calls and rid not in self.throttled and incl < limit * visits:
                mean = incl / visits
                self.throttled[rid] = (visits, mean)
                impl.set_off(rid, True)
                out.append({"type": "throttled", "region": rid, "visits": visits, "mean_ns": round(mean, 1)})
                # a notice, as the run file's name at exit: SCALEPROBE_QUIET leaves it out, so that a program's
                # stderr can be compared or parsed (review 107 LOW-4); the `throttled` record still says it
                if self.header.get("rank", 0) == 0 and not self.cfg.quiet:
                    name = self.regions.get(rid, ("", f"#{rid}"))[1]
                    print(f"scaleprobe: throttled {name}: {visits} visits at {mean:.0f} ns each", file=sys.stderr)
        return out

    def finish(self, status: str | None = None, exit_code: int | None = None, signal: int | None = None,
               close_own: bool = False) -> None:
        """Final flush and end record. Idempotent: the first caller wins (atexit, signal, launcher).
        `close_own`: this thread's open visits end now too, as other threads' do (a signal's default
        action is about to end the process where it stands: review 42, its `main` was dropped where
        the same signal, taken by the watch, kept it)."""
        if self.finished or self.finishing or os.getpid() != self.pid:
            return
        try:
            gc_pause.pause()  # as flush: no program finalizer between the end record's parts
            self._finish(status, exit_code, signal, close_own)
        finally:
            gc_pause.resume()
        deferred, self.deferred_signal = self.deferred_signal, None
        if deferred is not None:
            os.kill(os.getpid(), deferred)  # now that the end record is whole: see _chain_signal

    def _finish(self, status: str | None, exit_code: int | None, signal: int | None, close_own: bool) -> None:
        if self.unselected:  # never became a rank that SCALEPROBE_RANKS selects
            self._leave_unrecorded()
            self.finished = True
            return
        with self.lock:
            if self.finished or self.finishing:
                return
            # Set before the final flush: a signal arriving during it must not write a second end.
            # The thread first: the stand-in handler (`_chain_signal`) that finds `finishing` set
            # must find whose it is, or it takes this very thread's finish for the watch's, waits
            # for nothing (the lock is re-entrant) and ends the process with the end record unwritten
            # (a Pool worker that terminate() signalled as it left its loop: a header alone, about
            # one run in 10 of test_sigterm_blocked's pool test)
            self.finishing_thread = threading.get_ident()
            self.finishing = True
            self.closing_own = close_own
            status, exit_code = self._outcome(status, exit_code)
            if status in ("ok", "exit") and signal is None:
                # a stop signal came and the program, handling it itself, went on to exit: the run
                # was cut short all the same (review 38: a checkpoint-and-exit-0 run ended `ok`)
                signal = self.signal or run_signals.since(self.stop_mark)
                status = "signal" if signal is not None else status
            end = {
                "type": "end", "status": status, "exit_code": exit_code,
                "signal": signal if signal is not None else self.signal,
                "exception": self.exc_type,
                "throttled": len(self.throttled), "dropped": impl.dropped(),  # (and the visits left open at the end: flush)
                "trace_dropped": self.tracer.dropped if self.tracer is not None else 0,
                "trace_unmatched": self.tracer.unmatched if self.tracer is not None else 0,
                "flushes": self.flushes + 1,
                "duration_ns": self._end_now() - self.start_ns,
                "torch": _torch_version(), "cuda": _cuda_version(),
            }
            try:
                # A failed write is said on stderr, never raised: the program's own outcome stands.
                self.flush(final_records=[end], sync=True)
            finally:
                self.finished = True
                self.wake.set()
                self.set_on(False)
                # the modules' globals, kept to switch probes, are theirs again: held here to the
                # very end, their objects were never finalized at exit (a `__del__` that removes a
                # temporary file never ran) or only after the globals were gone (review 51 F1)
                self.modules = []
                _stand_down()
            if self.writer is not None:
                removed = self.writer.removed
                self.writer.close()
                self.writer = None
                if removed:
                    self.file_removed = True  # the launcher's exit status says it (review 72 F4)
                    # review 26: "run data written to" a file whose folder had been deleted
                    print(f"scaleprobe: the run file {self.path} was deleted while the program ran: its "
                          f"measurements are lost", file=sys.stderr)
                # once per program: not by each of its DataLoader workers and other helper processes,
                # nor by each rank it started (torch's spawn)
                elif self.default_dir and not self.cfg.quiet and self.header.get("child_of") is None \
                        and self.rank_source not in ("torch.distributed", "parent"):
                    print(f"scaleprobe: run data written to {self.path}", file=sys.stderr)

    def _end_now(self) -> int:
        """The end of the run (perf_counter ns), taken once for the end record's duration and for
        the communication calls in progress then, which count up to it: never more than the run."""
        self.end_ns = time.perf_counter_ns()
        return self.end_ns

    def _outcome(self, status: str | None, exit_code: int | None) -> tuple[str, int | None]:
        """Status and exit code of the end record, from the most direct witness available: the
        caller (launcher, signal handler), the excepthook, then the SystemExit that ended the
        program (seen leaving `__main__` on 3.12+, else leaving the main thread's outermost
        region or passed to sys.exit/exit()/quit())."""
        if status is None and exit_code is None and self.status is None and self.exit_code is None:
            self._note_last_exception()
        status = status or self.status
        if exit_code is None:
            exit_code = self.exit_code
        if exit_code is None and status is None:
            seen = self.main_exit or self._c_main_exit() or (self.exit_frozen if self.exit_frozen is not _UNSET else impl.exit_seen())
            if seen is not None:
                exit_code = exit_status(seen[0])
        if exit_code is None and status in (None, "ok"):
            exit_code = 0
        if status in (None, "ok"):
            status = "ok" if exit_code == 0 else "exit"
        return status, exit_code

    def _note_last_exception(self) -> None:
        """An uncaught exception that a program's own `sys.excepthook` showed, in place of the
        runtime's, which notes it: Python keeps it in `sys.last_exc` / `sys.last_value` (review 102
        LOW-4: the end record said `ok`, exit code 0, of a process that exited 1)."""
        last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if not isinstance(last, BaseException) or isinstance(last, SystemExit):
            return
        note_uncaught(self, type(last))

    @staticmethod
    def _c_main_exit() -> tuple | None:
        main_exit = getattr(impl, "main_exit", None)
        return main_exit() if main_exit is not None else None

    def freeze_exit(self) -> None:
        """Interpreter shutdown began: the exit code is decided. atexit handlers of the program
        may still run instrumented code, which must not change what was seen."""
        if self.exit_frozen is _UNSET:
            self.exit_frozen = impl.exit_seen()

    def watch_main(self, code: Any) -> None:
        """Python 3.12+: see the SystemExit (or exception) that unwinds the `__main__` module,
        however it was raised. Earlier versions have no hook for it that costs nothing."""
        mon = getattr(sys, "monitoring", None)
        if mon is None or self.main_code is not None or not self.enabled:
            return
        for tool in WATCH_TOOL_IDS:
            try:
                mon.use_tool_id(tool, "scaleprobe")
                break
            except ValueError:
                continue
        else:
            return
        self.main_code = code
        # PY_UNWIND runs for every frame an exception leaves, the deepest one too: the C backend's
        # callback costs no frame, where a Python one would raise RecursionError in place of the
        # program's own exception at its recursion limit
        c_unwind = getattr(impl, "main_unwind", None)
        if c_unwind is not None:
            impl.watch_main(code)
            on_unwind: Any = c_unwind
        else:
            def on_unwind(unwound: Any, offset: int, exc: BaseException) -> Any:
                if unwound is code and isinstance(exc, SystemExit):
                    self.main_exit = (exc.code,)
                return None

        mon.register_callback(tool, mon.events.PY_UNWIND, on_unwind)
        mon.set_events(tool, mon.get_events(tool) | mon.events.PY_UNWIND)

    # ----- fork ----------------------------------------------------------------------------------

    def after_fork_child(self) -> None:
        """A forked child gets its own file and forgets what the parent measured."""
        self.fork_file_open = False
        self.lock = threading.RLock()
        self.finishing_thread = self.deferred_signal = None
        self.sigwatch = None  # the parent's: armed again below for the child's own signals
        self.comm_lock = threading.Lock()
        self.wake = gc_pause.Wake()
        self.flush_requested = False
        self.last_flush = time.monotonic()
        impl.reset_after_fork()
        parent = self.pid
        self.pid = os.getpid()
        self.exit_frozen = _UNSET
        self.main_exit = None
        self.series = deque()
        self.series_wait = []
        if self.thinning is not None:  # the child's loops count their steps from zero
            self.thinning.reset()
        self.comm = {}
        self.comm_late = []
        self.comm_spans = type(self.comm_spans)()
        self.region_totals = {}
        self.in_steps = set()
        self.pending_rank = None
        self.flushes = 0
        self.failed_writes = 0
        self.lost_flushes = 0
        self.last_error = None
        self.start_ns, self.start_unix = clock_pair()
        self.end_ns: int | None = None  # when the end record's duration was taken (_end_now)
        self.gpu = None  # CUDA does not survive fork
        if self.gpu_rotation is not None:
            # The modules keep its wrappers: make sure they never touch CUDA in the child.
            self.gpu_rotation.target[0] = -1
            self.gpu_rotation.left[0] = 0
        self.gpu_rotation = None
        if self.tracer is not None:
            self.tracer.reset_after_fork()
        if not self.enabled or self.finished or self.writer is None:
            self.writer = None
            return
        # the parent's descriptor (the parent keeps writing through its own); never one the program
        # reused after closing ours (review 28: a forked child closed the program's file)
        self.writer.close()
        self.written_regions = set()  # a file of its own
        self.header = dict(self.header, pid=self.pid, ppid=parent, forked_from=parent, child_of=parent,
                           start_ns=self.start_ns, start_unix=self.start_unix)
        self._open_file(os.path.dirname(self.path or "."))
        self.fork_file_open = True
        self._tell_mp_children()
        if self.cfg.flush_interval_s > 0:
            self.sigwatch = signal_watch.arm()
        self.start_thread()


_PENDING = object()  # gpu_ns placeholder until the CUDA events of a step have completed

# The sys.monitoring tool ids watch_main tries, in order (Python 3.12+; docs/runtime.md): kept for the
# whole run. 0 to 2 are the debugger's, coverage's and the profiler's; 5 the optimizer's, which no
# optimizer of CPython uses (3.12, 3.13), so a program's own tool, which takes 3 or 4, the ids PEP 669
# leaves to other tools, finds them free (review 50 F4: a program's `use_tool_id(4)` failed).
WATCH_TOOL_IDS = (5, 4, 3)


_rec: Recorder | None = None
_start_lock = threading.Lock()
_starting: int | None = None  # the thread inside start(), while it is


def _first_build() -> str | None:
    """The `build` of the first instrumented module defined (`runtime.probe.builds`), or None: the
    probe module is looked up, not imported (it imports this one)."""
    builds = getattr(sys.modules.get(__package__ + ".probe"), "builds", None)
    return next(iter(builds.values()), None) if builds else None


def get() -> Recorder | None:
    return _rec


def start() -> Recorder:
    """Start recording in this process (once). Safe to call from any thread."""
    global _rec, _starting
    if _rec is not None:
        return _rec
    if _starting == threading.get_ident():
        _reentered()  # the lock is this thread's own: waiting on it would never end
    with _start_lock:
        if _rec is not None:
            return _rec
        _starting = threading.get_ident()
        try:
            try:
                cfg = from_env()
                rec = Recorder(cfg)
                if cfg.disable:
                    rec.enabled = False
                    rec.on = False
                else:
                    rec.open()
            except ScaleprobeRuntimeError as exc:
                _refuse_to_start(exc)
            _rec = rec
            if rec.enabled:
                from . import linemap

                prev_hook = sys.excepthook
                _install_hooks(rec)
                # Python 3.10: the exceptiongroup backport, imported later, still sees Python's own
                linemap.hooked(sys.excepthook, prev_hook)
                if cfg.flush_interval_s > 0:
                    # A SIGTERM that the main thread, blocked in C (a hung collective), never takes to
                    # our handler still ends the process, as its default action would (signal_watch).
                    rec.sigwatch = signal_watch.arm(main=True)
                rec.start_thread()
            return rec
        finally:
            _starting = None


def _reentered() -> NoReturn:
    """start() called again by the thread that runs it: the runtime, starting, imported a module of
    the program (an instrumented one, whose header starts the recorder) named like a standard-library
    module that the runtime or a library it uses needs (review 50: `select.py` on Python 3.10, where
    orjson imports `uuid`, `platform`, `subprocess`, `select`). `instrument` warns of such names.
    Say which module it was and exit 2 at once: an exception would go up through the import in
    progress, and orjson's (an extension module's initialization) crashes the process on any."""
    modules = []  # innermost first: the program's module, then the modules that imported it
    frame = sys._getframe(1).f_back  # what called start() the second time
    while frame is not None and frame.f_code is not start.__code__:
        if frame.f_code.co_name == "<module>":
            modules.append((frame.f_globals.get("__name__"), frame.f_globals.get("__file__")))
        frame = frame.f_back
    if modules:
        name, path = modules[0]
        by = f" by '{modules[1][0]}'" if len(modules) > 1 and modules[1][0] else ""
        kind = "the standard-library module" if name in getattr(sys, "stdlib_module_names", ()) else "the module"
        message = (f"the program's module '{name}' ({path or 'no file'}) was imported{by} while scaleprobe's "
                   f"runtime was starting, in place of {kind} '{name}' that it needs; rename the program's module")
    else:
        message = "the recorder was started again while it was starting, from code of the program it imported"
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass
    try:
        print(f"scaleprobe: error: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass
    os._exit(2)


def _refuse_to_start(exc: ScaleprobeRuntimeError) -> NoReturn:
    """A bad SCALEPROBE_* or rank variable (or an unwritable SCALEPROBE_OUT), seen at the first
    instrumented import: say so in one line naming it and exit 2, as a bad command-line option
    would, instead of a traceback through the program's own import statement. SystemExit, not
    os._exit: the program's `finally` blocks and atexit handlers run as on any exit."""
    print(f"scaleprobe: error: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(2) from None


# ----- hooks ---------------------------------------------------------------------------------------


def _install_hooks(rec: Recorder) -> None:
    import atexit

    atexit.register(_at_exit)
    exec_hook.install(_end_for_exec)
    prev_hook = sys.excepthook

    def excepthook(tp, value, tb):
        r = _rec
        if r is not None and not r.finished:
            note_uncaught(r, tp)
        from . import linemap  # shows frames of a built tree at their original files and lines

        linemap.show(tp, value, tb, prev_hook)

    sys.excepthook = excepthook
    # atexit cannot see the exit code: sys.exit notes it for a SystemExit raised outside every
    # instrumented region; one that leaves a region is seen there again (or, caught and followed
    # by more instrumented code, forgotten). The C backend's costs no frame and no recursion level;
    # it raises SystemExit itself, so it stands in for Python's own sys.exit only.
    c_exit = getattr(impl, "sys_exit", None)
    own = getattr(sys.exit, "__self__", None) is sys
    sys.exit = c_exit if c_exit is not None and own else _py_sys_exit(sys.exit)
    _wrap_quitter()
    register = getattr(threading, "_register_atexit", None)  # runs at shutdown, before atexit
    if register is not None:
        try:
            register(_freeze_exit)
        except RuntimeError:  # already shutting down
            pass
    if threading.current_thread() is threading.main_thread():
        for sig in signal_watch.STAND_IN_SIGNALS:
            _chain_signal(sig)
    run_signals.start()
    rec.stop_mark = run_signals.mark()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before_fork, after_in_child=_after_fork)
    if rec.header.get("child_of") is not None and "multiprocessing.util" in sys.modules:
        # a spawned multiprocessing child, its `_bootstrap` still to come: whether that clears the
        # finalizers made before it and runs the after-fork callbacks depends on the start method
        # and the version, so both are set up; at least one finalizer is left (a second does nothing)
        _mp_after_fork(rec)
        _register_mp_finalizer()


def note_uncaught(r: Recorder, tp: type) -> None:
    """The end record's status for an uncaught exception of type `tp` that ends the program."""
    if issubclass(tp, KeyboardInterrupt):
        r.status, r.signal = "signal", r.signal or 2
    else:
        r.status = "exception"
    r.exc_type = f"{tp.__module__}.{tp.__qualname__}"
    r.exit_code = 1 if r.status == "exception" else 130


def _py_sys_exit(real_exit: Any) -> Any:
    def exit(status: object = None) -> None:
        if threading.current_thread() is threading.main_thread():  # elsewhere it ends a thread only
            impl.set_exit_seen(status)
        real_exit(status)

    exit.__doc__ = real_exit.__doc__
    return exit


# The recorder's handlers that stand in for a default action (signal -> handler): once the run file
# is ended there is nothing left to write, and the default action is put back (`_stand_down`).
_standing_in: dict[int, Any] = {}


def _stand_down() -> None:
    """After the end record, in the main thread: SIGTERM (and a SIGINT the program left to its
    default) kill at once again, as uninstrumented. The signal watch ends with the flush thread,
    and a process that then hangs in C (an atexit handler registered before recording started)
    would otherwise ignore them until SIGKILL (review 37)."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal is the main thread's; the watch path ends the process anyway
    import signal as _signal

    for sig, handler in list(_standing_in.items()):
        signal_disguise.forget(sig)  # the program's SIG_DFL is the default action again
        try:
            if real_getsignal(sig) is handler:
                real_signal(sig, _signal.SIG_DFL)
        except (ValueError, OSError):
            pass


def _chain_signal(sig: int) -> None:
    import signal as _signal

    try:
        prev = real_getsignal(sig)
    except (ValueError, OSError):
        return
    if prev is _signal.SIG_IGN:
        return  # the program chose to ignore it: so do we
    if prev is _signal.default_int_handler:
        # Python's own SIGINT handler raises KeyboardInterrupt in the program, which may catch it;
        # uncaught, the excepthook records it. Chaining it would add our frame to the traceback.
        return
    if prev in (_signal.SIG_DFL, None) and not signal_disguise.at_default(sig):
        # a C handler that Python does not know of (faulthandler.register(SIGUSR1) before recording
        # started, an extension's): ours would replace it, and it could not be called
        return
    if sig in signal_watch.DEFAULT_ONLY and prev not in (_signal.SIG_DFL, None) and not stands_in(sig, prev):
        return  # a profiler's SIGPROF/SIGVTALRM handler: left alone (signal_watch.DEFAULT_ONLY)

    def handler(signum, frame):
        r = _rec
        if r is not None and r.sigwatch is not None:
            r.sigwatch.note_seen(signum)
        if _in_fork_callback[0]:
            # Inside our at-fork callback Python would drop whatever the handler raises ("Exception
            # ignored in _after_fork"), and the child would go on: a Pool worker told to stop by
            # terminate() then hangs its parent. The child has run nothing of the program yet:
            # end it as the signal's default action does, its file with its end record where it
            # has one (review 51 F3: a header alone, read as a process that died)
            r = _rec
            if r is not None and r.fork_file_open and os.getpid() == r.pid:
                try:
                    r.finish(status="signal", exit_code=128 + signum, signal=signum, close_own=True)
                except Exception:  # noqa: BLE001 - the signal's action comes first
                    pass
            real_signal(signum, _signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        r = _rec
        if r is not None and not r.finished and not r.finishing and os.getpid() == r.pid:
            r.signal = signum
            try:
                # the default action, or a stand-in that ends this process as it would (the launcher's
                # in a forked worker: review 38, the worker's file had no end record)
                if prev in (_signal.SIG_DFL, None) or getattr(prev, "__sp_ends_process__", lambda: False)():
                    r.finish(status="signal", exit_code=128 + signum, signal=signum, close_own=True)
                else:
                    r.flush()  # the previous handler may let the program go on (KeyboardInterrupt)
            except Exception as e:
                print(f"scaleprobe: flush on signal {signum} failed: {e!r}", file=sys.stderr)
        elif r is not None and r.finishing and os.getpid() == r.pid:
            if r.finishing_thread == threading.get_ident() and not r.finished:
                # This very thread is writing the end record (an exit, interrupted by the signal):
                # it is sent again once the record is whole (review 38: a Pool worker stopped as
                # it exited lost its end record mid-write). Once it is written (`finished`), the
                # signal's action is taken now: `finish` may have looked for a deferred one already
                r.deferred_signal = signum
                return
            # Late: the signal watch took this signal and is writing the end record in the flush
            # thread. The process ends when that is written, not in the middle of its last line.
            r.wait_finished()
        if callable(prev):
            prev(signum, frame)
        else:
            # the launcher running the program in this process ends its run's record (review 65 F3:
            # a SIGHUP left it `running`)
            signal_watch.last_words(signum, blocked=False)
            real_signal(signum, _signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    try:
        real_signal(sig, handler)
    except (ValueError, OSError):
        return
    signal_watch.notes_arrivals(handler)
    if prev in (_signal.SIG_DFL, None):
        _standing_in[sig] = handler
    # the program sees what it would see without us (signal_disguise): the default action, or its
    # own handler, which ours calls; putting back what it was shown puts ours back
    if prev in (_signal.SIG_DFL, None) or stands_in(sig, prev):
        stand_in(sig, handler, shown=prev if prev is None else _signal.SIG_DFL)
    else:
        signal_disguise.show_as(sig, handler, prev)


def _end_for_exec() -> dict[str, Any] | None:
    r = _rec
    return r.end_for_exec() if r is not None else None


def _at_exit() -> None:
    r = _rec
    if r is not None:
        try:
            gc_pause.pause()  # the collection its allocations would start is the interpreter's, later
            r.freeze_exit()
            r.finish()
            if r.finished and os.getpid() == r.pid:
                # the frames that left() noted and no back() took (a generator that ignored
                # GeneratorExit) are let go: what they hold is finalized at exit, as in the original
                impl.release_held()
        finally:
            gc_pause.resume()


def _freeze_exit() -> None:
    r = _rec
    if r is not None and os.getpid() == r.pid:
        r.freeze_exit()


def _wrap_quitter() -> None:
    """The `exit()` and `quit()` builtins raise SystemExit themselves, not through sys.exit."""
    quitter = getattr(sys.modules.get("_sitebuiltins"), "Quitter", None)
    call = getattr(quitter, "__call__", None)
    if call is None or getattr(call, "_scaleprobe", False):
        return

    def __call__(self: Any, code: object = None) -> None:
        if threading.current_thread() is threading.main_thread():
            impl.set_exit_seen(code)
        return call(self, code)

    __call__._scaleprobe = True  # type: ignore[attr-defined]
    quitter.__call__ = __call__


_in_fork_callback = [False]
_SYNCHRONOUS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGABRT", "SIGSYS", "SIGKILL", "SIGSTOP")


def _block_async_signals() -> Any:
    """Block, in this thread, every signal but the synchronous ones (faults); returns the old mask."""
    import signal as _signal

    if not hasattr(_signal, "pthread_sigmask"):
        return None
    skip = {getattr(_signal, name) for name in _SYNCHRONOUS if hasattr(_signal, name)}
    try:
        return _signal.pthread_sigmask(_signal.SIG_BLOCK, set(_signal.valid_signals()) - skip)
    except (OSError, ValueError):
        return None


def _restore_signals(mask: Any) -> None:
    if mask is not None:
        import signal as _signal

        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)


def _after_fork() -> None:
    r = _rec
    if r is not None:
        _in_fork_callback[0] = True
        try:
            r.after_fork_child()
        finally:
            _in_fork_callback[0] = False


_mp_registered = [False]


def _before_fork() -> None:
    if _rec is not None and _rec.cfg.flush_interval_s > 0:
        signal_watch.prepare()  # children count their stand-in signals from their first instruction
    _register_mp_finalizer()


def _register_mp_finalizer() -> None:
    """atexit does not run in forked multiprocessing children before 3.13 (they leave with
    os._exit), but multiprocessing's finalizers do. Its child start-up (`BaseProcess._bootstrap`) of
    a forked child clears them after our at-fork hook, so the finalizer is created by one of its own
    after-fork callbacks, registered before the fork. Whichever ends the child, the outcome of its
    target is known by then (`_watch_targets`)."""
    _watch_targets()
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is None or _mp_registered[0] or _rec is None:
        return
    mp_util.register_after_fork(_rec, _mp_after_fork)
    _mp_registered[0] = True


def _mp_after_fork(rec: Recorder) -> None:
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, _at_exit, exitpriority=-100)


def _watch_targets() -> None:
    """A multiprocessing child's target that raises is caught by `BaseProcess._bootstrap`, which
    prints the traceback itself (no sys.excepthook runs) and returns the exit status; the end record
    said ok/0 (review 20). Its `run` is watched for the exception leaving it (`_target_ended`),
    whatever the start method and Python version (3.13 runs the finalizers after `_bootstrap`
    returned, 3.12 inside it)."""
    mp_process = sys.modules.get("multiprocessing.process")
    if mp_process is None or _watching_targets[0]:
        return
    _watching_targets[0] = True
    bootstrap = mp_process.BaseProcess._bootstrap

    import functools

    try:  # a C function: no frame of ours in the traceback the child prints (review 42)
        from ._cprobe import call_noting
    except ImportError:  # built without a C compiler: a Python wrapper, one frame more
        call_noting = None

    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        run = self.run

        def watched() -> Any:
            try:
                return run()
            except BaseException as exc:
                _target_ended(exc)
                raise

        # this child's own Process object, in the child only
        self.run = functools.partial(call_noting, run, _target_ended) if call_noting is not None else watched
        _map_bootstrap_traceback(bootstrap.__code__)
        try:
            return bootstrap(self, *args, **kwargs)
        finally:
            try:
                del self.run
            except AttributeError:
                pass

    mp_process.BaseProcess._bootstrap = _bootstrap


_watching_targets = [False]


def _map_bootstrap_traceback(bootstrap_code: Any) -> None:
    """`BaseProcess._bootstrap` prints a target's exception with `traceback.print_exc()`, no
    excepthook: a spawned child showed OUT's file and lines where the original showed its own
    (review 105 MED-1). That one call (from `_bootstrap`'s own code, with no arguments) prints the
    traceback mapped back, as the excepthook would; every other call is `print_exc` itself."""
    import functools
    import traceback

    original = traceback.print_exc
    if getattr(original, "_scaleprobe_maps", False):
        return

    def print_exc(limit: Any = None, file: Any = None, chain: bool = True) -> None:
        if limit is None and file is None and chain is True and sys._getframe(1).f_code is bootstrap_code:
            exc = sys.exc_info()[1]
            if exc is not None:
                from . import linemap

                if linemap.print_mapped(exc, exc.__traceback__):
                    return
        original(limit=limit, file=file, chain=chain)

    functools.update_wrapper(print_exc, original)
    print_exc._scaleprobe_maps = True  # type: ignore[attr-defined]
    traceback.print_exc = print_exc


def _target_ended(exc: BaseException) -> None:
    """The exception leaving a multiprocessing child's target, as `_bootstrap` turns it into the exit
    status: a SystemExit's code, else 1 (`exception`; `signal` for KeyboardInterrupt)."""
    r = _rec
    if r is None or r.finished or os.getpid() != r.pid or r.status is not None or r.exit_code is not None:
        return
    if isinstance(exc, SystemExit):
        r.exit_code = exit_status(exc.code)
        return
    r.exc_type = f"{type(exc).__module__}.{type(exc).__qualname__}"
    r.status = "signal" if isinstance(exc, KeyboardInterrupt) else "exception"
    if isinstance(exc, KeyboardInterrupt):
        r.signal = r.signal or 2
    r.exit_code = 1
