"""Builds the optional C probe backend; everything else is in pyproject.toml.

`optional=True`: without a C compiler the build still succeeds and the runtime uses its
pure-Python backend (runtime/_pyprobe.py).
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "runtime._cprobe",
            sources=["runtime/_cprobe.c"],
            # an undeclared function would be assumed to return int (a pointer cut to 32 bits):
            # fail the build instead, and the runtime falls back to the pure-Python backend
            extra_compile_args=["-O2", "-std=c11", "-Werror=implicit-function-declaration"],
            optional=True,
        ),
        # the awaitable that `async for`/`async with` wrappers return (runtime/probe.py): no Python frame
        # between the user's coroutine and the awaited one; without it, the wrappers are coroutines
        Extension(
            "runtime._asyncwrap",
            sources=["runtime/_asyncwrap.c"],
            extra_compile_args=["-O2", "-std=c11", "-Werror=implicit-function-declaration"],
            optional=True,
        ),
        # the collector pause (runtime/gc_pause.py) that no signal handler can interrupt; without it,
        # the same in Python
        Extension(
            "runtime._gcpause",
            sources=["runtime/_gcpause.c"],
            extra_compile_args=["-O2", "-std=c11", "-Werror=implicit-function-declaration"],
            optional=True,
        ),
        # a stream's write that also appends to the rank's output file (runtime/output_copy.py) with no
        # Python frame of its own; without it, no output file
        Extension(
            "runtime._teewrite",
            sources=["runtime/_teewrite.c"],
            extra_compile_args=["-O2", "-std=c11", "-Werror=implicit-function-declaration"],
            optional=True,
        ),
        # counts a signal's arrivals ahead of CPython's handler (runtime/signal_watch.py); without it,
        # no watch
        Extension(
            "runtime._sigwatch",
            sources=["runtime/_sigwatch.c"],
            extra_compile_args=["-O2", "-std=c11", "-Werror=implicit-function-declaration"],
            optional=True,
        ),
    ]
)
