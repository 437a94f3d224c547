"""The statistics side by side (the data report and the evaluation report): each column's
figures from this run and from the served model's training data, as the statistics hold them."""

from __future__ import annotations

import html
import re

from estflow.components._statistics.report import side_by_side
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


# The whole report (components/_statistics/report.py render) -----------------------------------

def _summary(**anomaly) -> dict:
    row = {"column": "payment_type", "kind": "ENUM_TYPE_UNEXPECTED_STRING_VALUES",
           "split": "All Examples", "observed": 0.25, "allowed": 0.0, "family": "domain",
           "blocks": True, "description": "column 'payment_type': 0.25 of the values are "
           "outside its domain (allowed 0), e.g. ['Bitcoin', 'Barter']"}
    row.update(anomaly)
    return {"passed": False, "anomalies": [row], "warnings": [], "schema": "schema.pbtxt",
            "baseline": None, "examples": {"train": 90, "eval": 10, "All Examples": 100}}


def _anomaly_cells(page: str) -> list[str]:
    table = page.split("<h2>Blocking anomalies</h2>", 1)[1].split("</table>", 1)[0]
    row = re.findall(r"<tr>((?:<td>.*?</td>)+)</tr>", table)[0]
    return [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)]


def test_an_allowed_zero_is_shown_as_0_not_as_all_rows():
    from estflow.components._statistics.report import render

    page = render("taxi", _summary(), vd.stats_list(vd.statistics(vd.night(1, rows=50))), None)
    cells = _anomaly_cells(page)
    assert cells[:5] == ["payment_type", "ENUM_TYPE_UNEXPECTED_STRING_VALUES", "All Examples",
                         "0.25", "0"]
    whole = _anomaly_cells(render("taxi", _summary(column="", kind="DATASET_LOW_NUM_EXAMPLES",
                                                   observed=0, allowed=100), None, None))
    assert whole[:5] == ["(all rows)", "DATASET_LOW_NUM_EXAMPLES", "All Examples", "0", "100"]


def test_the_anomaly_keeps_its_example_values():
    from estflow.components._statistics.report import render

    cells = _anomaly_cells(render("taxi", _summary(), None, None))
    assert "e.g. ['Bitcoin', 'Barter']" in cells[5]


def test_the_report_has_a_stylesheet_and_a_coloured_verdict():
    from estflow.components._statistics.report import render

    stopped = render("taxi", _summary(), None, None)
    style = re.search(r"<style>(.*?)</style>", stopped, re.S).group(1)
    assert "border-collapse:collapse" in style and "font-family" in style
    assert "padding" in style and "background" in style
    assert "<p class='verdict stopped'>STOPPED before training" in stopped
    passed = render("taxi", dict(_summary(), passed=True, anomalies=[]), None, None)
    assert "<p class='verdict passed'>PASSED" in passed
