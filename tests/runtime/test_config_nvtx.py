"""SCALEPROBE_NVTX=1 without the nvtx package is a configuration error naming it, not a
ModuleNotFoundError traceback at the first instrumented import (review 33 L4)."""

import importlib.util

import pytest

from runtime import config
from runtime.config import ConfigError, from_env


def test_nvtx_without_the_package_is_a_config_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nvtx" else real(name, *a))
    with pytest.raises(ConfigError, match=r"SCALEPROBE_NVTX=1 needs the nvtx package.*pip install nvtx"):
        from_env({"SCALEPROBE_NVTX": "1"})
    assert from_env({"SCALEPROBE_NVTX": "0"}).nvtx is False  # nothing is looked up when it is off


def test_nvtx_with_the_package_is_on():
    if importlib.util.find_spec("nvtx") is None:
        pytest.skip("the nvtx package is not installed here")
    assert from_env({"SCALEPROBE_NVTX": "1"}).nvtx is True
    assert config._missing("nvtx") is False
