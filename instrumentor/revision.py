"""The instrumentor's revision: which rewrite a build was made by.

`REWRITE_REVISION` keys the incremental build's fingerprint (project.py) and the import hook's
cache (importhook.py); `BUILD` is what the emitted header passes to `runtime.probe.define` as
`build=` and what OUT/.scaleprobe/manifest.json records. `PROBE_ABI` is the probe ABI the emitted
code is written for: the same number as `runtime.probe.ABI` (docs/internals.md section 1), kept
here because the instrumentor never imports the runtime.
"""

from __future__ import annotations

from . import __version__

# Bumped when the same source is rewritten differently, so a re-run redoes files kept from before
# (2: compound statements walked in source order; comprehensions, lambdas, class-body loops in "skipped";
#  3: none counted twice inside a subtree left out whole;
#  4: yield/await leave the regions after their operand and re-enter them in a `finally`, step/epoch
#     loops whose body suspends are not wrapped, header strings escape characters outside the BMP;
#  5: a self-documenting f-string field `{(yield v)=}` is its text plus the bracketed expression;
#  6: suspensions in a nested def's decorators/defaults, a class's bases/keywords, a lambda's defaults
#     and an `except` type are bracketed;
#  7: no local `__sp_out__`: the runtime's left()/back() note per frame that the regions were left;
#  8: a one-line `try`/`with` that suspends gets the `finally:` guard;
#  9: the handlers of a one-line `try:` body that suspends re-enter first; NVTX notes hold frames;
#  11: suspensions in `for`/`with ... as`/assignment targets are bracketed (review 64 F5); the step
#      loop is the loop that steps the optimizer (review 67 F4);
#  12: a `while` epoch or step loop ticks (`__sp_tick__`/`__sp_untick__`) and gets its records;
#  13: numba's decorators imported by name or under another name (`from numba import vectorize`,
#      `import numba as nb`) and `@stencil` leave their function as it is (review 82 F3);
#  14: a numba @jitclass class is left alone whole (review 84 L2);
#  15: the runtime header passes the probe ABI and the build to define: `abi=1, build="0.1.0.15"`
#      (review 89 M1);
#  16: an entry script with nothing to instrument gets the runtime header all the same, so that it
#      runs at its own lines and the modules it imports do too (review 100 HIGH-1))
REWRITE_REVISION = 16
BUILD = f"{__version__}.{REWRITE_REVISION}"
# Bumped together with runtime.probe.ABI when the emitted code needs another runtime: a probe added,
# or one whose arguments or meaning changed (tests/instrumentor/test_review89_abi.py checks they agree)
PROBE_ABI = 1
