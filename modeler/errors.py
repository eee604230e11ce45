"""The modeler's exceptions: one root, so `modeler.cli.main` can map them to exit codes."""

from __future__ import annotations

from typing import Sequence


class ModelerError(Exception):
    """Root of every error the modeler raises on purpose. `warnings`: what was noticed on the way
    (lines skipped, series left out); they often explain the error, so the command line prints
    them before it."""

    def __init__(self, message: str = "", *, warnings: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.warnings = list(warnings)


class InputError(ModelerError):
    """A measurement file or option is unusable; the message names the file, line or option."""


class NotFittedError(ModelerError, ValueError, AttributeError):
    """`predict` was called before `fit` (a ValueError and an AttributeError, as scikit-learn's
    own, so code written against either catches it). A fitted attribute (`models_`) read before
    `fit` is a plain AttributeError, as in scikit-learn (review 103 LOW-6)."""


class TooFewPointsError(ModelerError):
    """Not enough measurement points to fit the requested model."""
