"""scaleprobe's source-to-source compiler: rewrites a project's functions and loops with probes."""

__version__ = "0.1.0"
