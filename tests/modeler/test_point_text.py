"""Points in messages are written exactly: a value that `:g` rounded (1048576 -> 1.04858e+06) made
the advice `--exclude batch=1.04858e+06` select nothing, and two points read alike."""

from __future__ import annotations

import numpy as np

from modeler.dataset import Series
from modeler.export import ExportSummary
from modeler.grid import grid_gaps_warning
from modeler.pointtext import param_text, point_text
from modeler.zeros import zero_at_fewest_ranks_warning
from modeler.report import svg


def test_values_are_written_exactly():
    assert param_text(1048576.0) == "1048576"
    assert param_text(np.float64(1234567.0)) == "1234567"
    assert param_text(0.1) == "0.1"
    assert param_text(1024.5) == "1024.5"
    assert point_text(("batch", "ranks"), (1048576.0, 3.0)) == "batch=1048576, ranks=3"
    assert point_text({"batch": 1048577.0}) == "batch=1048577"
    assert svg.param_text is param_text  # the report writes values as the messages do


def test_grid_gaps_name_the_exact_missing_point():
    batches, ranks = (1048576.0, 2097152.0, 4194304.0), (1.0, 2.0)
    pts = np.array([(b, r) for b in batches for r in ranks if (b, r) != (2097152.0, 2.0)])
    text = grid_gaps_warning(("batch", "ranks"), [pts])
    assert text is not None and "(batch=2097152, ranks=2)" in text, text
    assert "e+06" not in text


def test_export_advice_excludes_the_exact_value():
    summary = ExportSummary("out.txt", missing_where={("batch", 1048576.0): ["main->comm"]})
    (note,) = summary.notes()
    assert "where batch=1048576" in note and "--exclude batch=1048576)" in note, note


def test_zero_at_fewest_ranks_advice_excludes_the_exact_value():
    ranks = np.array([[1234567.0], [2469134.0], [4938268.0], [9876536.0]])
    series = [Series("main->allreduce", "time", ranks, (np.zeros(3), np.ones(3), np.ones(3) * 2, np.ones(3) * 3))]
    text = zero_at_fewest_ranks_warning(("ranks",), series)
    assert text is not None and "--exclude ranks=1234567" in text, text


def test_a_filter_that_leaves_nothing_lists_the_exact_values():
    from modeler.pointfilter import nothing_left, parse_point_filter

    err = nothing_left(parse_point_filter(where=["batch=5"]), {"batch": [1048576.0, 2097152.0]}, "the runs")
    assert "batch = 1048576, 2097152" in str(err), str(err)


def test_at_given_twice_names_both_values_exactly():
    import pytest

    from modeler.errors import InputError
    from modeler.target_point import parse_assignments

    with pytest.raises(InputError, match=r"batch=1048576 and batch=1048577"):
        parse_assignments("batch=1048576,batch=1048577", "--at", ["batch"])


def test_far_target_names_the_exact_values():
    from modeler.reach import far_target_warning

    text = far_target_warning(("batch",), [np.array([[1048576.0], [2097152.0]])], {"batch": 1e12})
    assert text is not None and "batch=1000000000000" in text and "(1048576 to 2097152)" in text, text
