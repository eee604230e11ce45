"""The runtime's exceptions: one root for everything raised on purpose."""


class ScaleprobeRuntimeError(Exception):
    """Root of every error the runtime and the launcher raise on purpose."""
