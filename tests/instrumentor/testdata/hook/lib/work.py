"""A module whose traceback lines must survive instrumentation."""


def outer(n):
    """Doc."""
    total = 0
    for i in range(n):
        total += i
    return inner(total)


def inner(value):
    if value > 1:
        raise ValueError(f"too big: {value}")
    return value
