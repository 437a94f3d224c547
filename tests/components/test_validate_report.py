"""The statistics side by side (the data report and the evaluation report): each column's
figures from this run and from the served model's training data, as the statistics hold them."""

from __future__ import annotations

import html
import re

from estflow.components.validate.report import side_by_side
from tests.components import _validate_data as vd


def _cells(page: str, column: str) -> list[str]:
    row = re.search(rf"<tr><th>{column}</th><td>(.*?)</td><td>(.*?)</td></tr>", page)
    return [html.unescape(c) for c in row.groups()]


def test_each_column_shows_this_run_and_the_served_models_training_data():
    now = vd.night(1, rows=500, shift=3.0)
    before = vd.night(2, rows=300)
    page = side_by_side(vd.stats_list(vd.statistics(now)), vd.stats_list(vd.statistics(before)))
    assert "served model&#x27;s training data" in page
    assert _cells(page, "examples") == ["500", "300"]
    mine, theirs = _cells(page, "x")
    assert f"mean {sum(now['x']) / 500:.4g}" in mine
    assert f"mean {sum(before['x']) / 300:.4g}" in theirs
    assert "unique" in _cells(page, "color")[0]


def test_without_a_served_model_the_other_side_is_empty():
    page = side_by_side(vd.stats_list(vd.statistics(vd.night(1, rows=50))), None)
    assert _cells(page, "examples") == ["50", "-"]
    assert _cells(page, "x")[1] == "-"
