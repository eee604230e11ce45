"""Model registry: `build_model(name, ...)` builds any model registered with `@register(name)`."""
from __future__ import annotations

from typing import Callable

from torch import nn

_REGISTRY: dict[str, Callable[..., nn.Module]] = {}


def register(name: str) -> Callable[[Callable[..., nn.Module]], Callable[..., nn.Module]]:
    def decorator(factory: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        if name in _REGISTRY:
            raise ValueError(f"model {name!r} is registered twice")
        _REGISTRY[name] = factory
        return factory

    return decorator


def available_models() -> list[str]:
    return sorted(_REGISTRY)


def build_model(name: str, **kwargs: int) -> nn.Module:
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown model {name!r}; choose one of: {', '.join(available_models())}"
        ) from None
    return factory(**kwargs)


# Imported last: the model modules register themselves with the decorator defined above.
from . import mlp, resnet  # noqa: E402,F401
