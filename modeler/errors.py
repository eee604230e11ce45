"""The modeler's exceptions: one root, so `modeler.cli.main` can map them to exit codes."""


class ModelerError(Exception):
    """Root of every error the modeler raises on purpose."""


class InputError(ModelerError):
    """A measurement file or option is unusable; the message names the file, line or option."""


class NotFittedError(ModelerError):
    """`predict` or a fitted attribute was used before `fit`."""


class TooFewPointsError(ModelerError):
    """Not enough measurement points to fit the requested model."""
