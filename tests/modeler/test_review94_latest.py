"""Review 94, the modeler's side.

MED-2: a traced run whose visits were all dropped (SCALEPROBE_TRACE_MAX) or open while the probes
       were off was told "no timed region ran".
LOW-5: "and N more" of a rank list counted its items, not its ranks.
LOW-6: 7170 s was "120 min", 119.5 s "120 s".
"""

from __future__ import annotations

import pytest

from modeler.errors import InputError
from modeler.report import svg
from modeler.report.ranks import _rank_list
from modeler.timeline import build_trace
from runtime.runfile import read_run
from .test_timeline_review90 import OK, run_cli, step, write


@pytest.mark.parametrize("end, said", [
    ({**OK, "trace_dropped": 5}, "none of its region visits was kept (5 dropped at SCALEPROBE_TRACE_MAX)"),
    ({**OK, "trace_unmatched": 1}, "none of its region visits was kept (1 open while the probes were switched off)"),
])
def test_a_traced_run_whose_visits_were_not_kept_is_told_why(tmp_path, end, said):
    run = read_run(write(tmp_path, [], {"trace": {"max": 0}}, end=end))
    with pytest.raises(InputError, match=r"recorded with SCALEPROBE_TRACE=1 but " + said.replace("(", r"\(")
                       .replace(")", r"\)")) as e:
        build_trace([run])
    assert "no timed region ran" not in str(e.value)


def test_its_steps_only_note_says_no_visit_was_kept(tmp_path, capsys):
    write(tmp_path, [step(0, 0, 1000)], {"trace": {"max": 0}}, end={**OK, "trace_dropped": 5})
    rc, _, err = run_cli(capsys, str(tmp_path), "-o", "-")
    assert rc == 0 and "but no region visit was kept, as follows" in err and "5 region events were dropped" in err


def test_and_more_counts_ranks():
    assert _rank_list(list(range(0, 40, 2)) + [100, 101, 102]).endswith(" and 7 more")


@pytest.mark.parametrize("seconds, text", [(7170, "1.99 h"), (119.5, "1.99 min"), (7199, "2 h"), (119.4, "119 s")])
def test_a_duration_that_rounds_to_two_of_the_next_unit_takes_it(seconds, text):
    assert svg.format_seconds(seconds) == text


def test_the_note_names_only_the_cut_that_left_something_out(tmp_path, capsys):
    # review 95 LOW-4: `--window` alone said "0 region visits shorter than --min-dur left out"
    from .test_timeline_review90 import visits

    write(tmp_path, visits(10))
    rc, _, err = run_cli(capsys, str(tmp_path), "-o", "-", "--window", "0.0035:0.0055")
    assert rc == 0 and "slices outside --window left out" in err and "--min-dur" not in err


def test_a_chart_title_wider_than_the_chart_is_cut_and_whole_in_its_tooltip():
    # review 95 LOW-3: the held values at the end of a Training chart's title were lost past its edge
    title = "step time against batch (width=24, ranks=1, a long held point of many parameters=16)"
    chart = str(svg.xy_chart([svg.PlotSeries("runs", [1, 2], [1, 2])], x_label="batch", y_label="s", title=title))
    import re
    [text] = re.findall(r'<text class="title"[^>]*>(.*?)</text>', chart)
    shown = re.sub(r"<title>.*?</title>", "", text)
    assert shown.endswith("…") and len(shown) * 7.0 <= 460 - 62
    assert f"<title>{title}</title>" in text
    short = str(svg.xy_chart([svg.PlotSeries("runs", [1, 2], [1, 2])], x_label="b", y_label="s", title="step time"))
    assert ">step time</text>" in short
