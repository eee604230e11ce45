"""scaleprobe's runtime: probes, run files and the launcher.

Importing this package must stay cheap: no torch, nvtx, numpy or json here.
"""

__version__ = "0.1.0"
