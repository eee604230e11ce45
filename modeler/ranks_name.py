"""Which parameter counts the ranks the work is split over (`Dataset.ranks_parameter`).

The estimator fits every series also as values x the rank count (`modeler.strong_scaling`), so
that a time that rises to a plateau, `a * (p - 1) / p` (a ring allreduce), is fitted as
`c - W / p` rather than as `log2(p)`. Our runs name it `ranks`; Extra-P's files and examples call it
`p`, and other tools `np` or `world_size`. `--ranks-parameter NAME` names it (review 104 M3: the
same ring allreduce came out within 1% at 16x under `ranks` and 127% high under `p`); where the
inputs have no `ranks` but a parameter with one of those names, the fitting commands say so.
"""

from __future__ import annotations

from .dataset import RANKS_PARAMETER, Dataset
from .errors import InputError
from .pointtext import param_text

#: parameter names that usually count processes or ranks (lower case)
RANKS_LIKE = ("p", "np", "nprocs", "procs", "processes", "nranks", "num_ranks", "world_size", "gpus", "ngpus",
              "num_gpus")


def ranks_parameter(name: str | None, dataset: Dataset) -> str:
    """The rank-count parameter of `dataset`: `name` (`--ranks-parameter`), checked to be one of its
    parameters, or `ranks` where None."""
    if name is None:
        return RANKS_PARAMETER
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"--ranks-parameter: a parameter name is needed, got {name!r}")
    if name in dataset.parameters:
        return name
    if name in dataset.held:
        raise InputError(f"--ranks-parameter {name}: {name} has one value ({param_text(dataset.held[name])}) in the points "
                         "used: it is no parameter of the models")
    raise InputError(f"--ranks-parameter {name}: no parameter {name!r} in the inputs; they have "
                     f"{', '.join(dataset.parameters) or 'none'}")


def ranks_name_note(dataset: Dataset) -> str | None:
    """A note where the rank count (`Dataset.ranks_parameter`) is no parameter of `dataset` but a
    parameter has a name that usually counts ranks (`RANKS_LIKE`), else None."""
    if dataset.ranks_parameter in dataset.parameters:
        return None
    like = [p for p in dataset.parameters if p.lower() in RANKS_LIKE]
    if not like:
        return None
    p = like[0]
    return (f"parameter {p!r} may count ranks or processes: every series is fitted also as work split over the "
            f"rank count (c + W/ranks, which also fits a time rising to a plateau) only for a parameter named "
            f"'ranks'; if {p} counts them, give --ranks-parameter {p}")
