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
            extra_compile_args=["-O2", "-std=c11"],
            optional=True,
        )
    ]
)
