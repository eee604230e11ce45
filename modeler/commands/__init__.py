"""The modeler's own commands (`fit`, `export`); each module exposes `configure(parser)` and `run(args) -> int`."""
