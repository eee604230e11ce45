"""Where the rewriter stands: the enclosing definitions and the regions open there."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Func:
    rid: int
    scan: bool  # visit expressions: the body may contain yield/await
    is_async: bool
    has_yield: bool = False
    suspends: int = 0  # yields, awaits and wrapped async for/with bracketed so far


@dataclass(frozen=True)
class Scope:
    prefix: str  # qualname prefix for definitions inside
    owner: str  # qualname used to name loops
    in_class: bool = False
    func: Func | None = None
    loops: tuple[int, ...] = ()  # loop regions open inside `func`, outermost first
