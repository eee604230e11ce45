"""SCALEPROBE_STEP_RECORDS: the bound on the step records of one step loop per process
(`StepThinning`), which the recorder keeps (`Recorder.thinning`) and runtime.series applies to each
step as it ends (inline, its common case)."""

from __future__ import annotations

from typing import Any


class StepThinning:
    """SCALEPROBE_STEP_RECORDS: a bound on the step records of one step loop (region) per process.

    The first `bound` steps of a region are written as they are. After that the steps are cut into
    blocks of `stride` steps, one after the other; the stride starts at 2 and doubles after every
    `bound` blocks. One step of each block is written, standing for the block: its record has
    `"weight": stride`. So a region writes about bound * (1 + log2(steps / bound)) records however
    long the run, spread over all of it.

    Which step of a block is written is drawn (a fixed-seed generator: the same steps every run),
    except in the first block, whose first step is taken: a step loop that does something every 2nd
    or 4th step (gradient accumulation synchronises on every k-th micro-step) would otherwise have
    only its synchronising steps, or none of them, written at a power-of-two stride, and the mean
    communication per step would come out k times too large, or 0. Drawn, each block is a random
    sample of itself and the weighted means are unbiased.

    Steps inside and outside a schedule's active window (`active`) are counted apart, so the active
    steps, the ones the modeler uses, are bounded on their own and a short active window is written
    whole. Thinned-out steps are measured as every step is and then forgotten; `thinned` counts
    them per region for the end record. The latest weighted record of each region is held here
    until the region's next one is taken, or the final flush, which weighs it with all steps from
    its block's start on (its block's rest, and the steps of an unfinished block whose drawn step
    never came): the weights of a region sum to its steps exactly."""

    __slots__ = ("bound", "counts", "_held", "thinned", "_seed")

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.reset()

    def reset(self) -> None:
        """Forget every count (a forked child's loops count their steps from zero). New objects:
        runtime.series keeps a loop's counts at hand and checks that they are still these."""
        #: (region, active) -> [steps seen, count of the next step to write, stride, blocks at that
        #: stride, start of the block of the next step to write]
        self.counts: dict[tuple[int, Any], list[int]] = {}
        self._held: dict[tuple[int, Any], tuple[int, dict]] = {}  # key -> (its block's start, record)
        self.thinned: dict[int, int] = {}  # region -> steps not written
        self._seed = 0x5CA1E9B0BE

    def _draw(self, stride: int) -> int:
        """A step of a block of `stride` (a 64-bit linear congruential generator, Knuth's MMIX)."""
        self._seed = x = (self._seed * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return (x >> 33) % stride

    def state(self, rid: int, active: Any) -> list[int]:
        """The counts of one region (and side of the active window): see `take`, whose first lines
        runtime.series runs itself on a state it keeps at hand."""
        key = (rid, active)
        st = self.counts.get(key)
        if st is None:
            st = self.counts[key] = [0, self.bound, 2, 0, self.bound]
        return st

    def take(self, rid: int, active: Any) -> int:
        """Count one step of `rid`: 1 to write it as it is, 0 to leave it out, or the weight (2 or
        more) of a record to give to `hold`."""
        st = self.state(rid, active)
        c = st[0]
        st[0] = c + 1
        return 1 if c < self.bound else self.past_bound(st, rid, c)

    def past_bound(self, st: list[int], rid: int, c: int) -> int:
        """`take` for the step counted `c` (0-based) of a region past its bound."""
        if c != st[1]:
            self.thinned[rid] = self.thinned.get(rid, 0) + 1
            return 0
        stride = st[2]
        start = st[4] + stride  # the next block
        st[3] += 1
        if st[3] >= self.bound:
            st[2] *= 2
            st[3] = 0
        st[4] = start
        st[1] = start + self._draw(st[2])
        return stride

    def hold(self, rid: int, active: Any, r: dict, out: Any) -> None:
        """Keep `r` (its weight, the stride `take` gave, set) until the region's next weighted
        record; the one it replaces goes to `out` (the recorder's series)."""
        key = (rid, active)
        prev = self._held.get(key)
        self._held[key] = (self.counts[key][4] - r["weight"], r)
        if prev is not None:
            out.append(prev[1])

    def release(self) -> list[dict]:
        """The held records, each weighed with the steps of its region from its block's start on
        (final flush)."""
        out = []
        for key, (start, r) in self._held.items():
            r["weight"] = self.counts[key][0] - start
            out.append(r)
        self._held = {}
        return out

    def end_counts(self) -> dict[str, int]:
        """For the end record: region id (a string, as JSON keys are) -> steps not written."""
        return {str(rid): n for rid, n in sorted(self.thinned.items()) if n}
