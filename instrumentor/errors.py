"""The instrumentor's exceptions: one root, so the CLI can turn them into messages and exit codes."""


class InstrumentError(Exception):
    """Root of every error the instrumentor raises on purpose."""
