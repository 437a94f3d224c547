"""The select step (estflow.components.select): which candidate wins, and what it writes.

``pick`` is checked against a brute-force reference on generated rows (the winner is the
blessed row with the best finite value, ties to the first by name; None when no blessed row
has a number). ``run`` is run on fake candidate folders as the candidates' train and evaluate
steps leave them: the outputs hold the winner's files, and the candidates' own files (which
the outputs hard-link) are never written through.
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import estflow.dsl as ef
from estflow.components.select import __main__ as select_main
from estflow.components.select.step import pick
from estflow.components.select.step import run
from estflow.dsl.contracts import CANDIDATES_FILE
from estflow.dsl.contracts import Files

# --- pick against a brute-force reference ------------------------------------------------------

def _eligible(row: dict) -> bool:
    value = row["value"]
    return (row["blessed"] and isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _reference(rows: list[dict], higher_is_better: bool) -> str | None:
    """The name of the row no other eligible row beats (better value, or the same value and
    an earlier name); None when no row is eligible."""
    eligible = [r for r in rows if _eligible(r)]

    def beats(a: dict, b: dict) -> bool:
        if a["value"] != b["value"]:
            return a["value"] > b["value"] if higher_is_better else a["value"] < b["value"]
        return a["name"] < b["name"]

    winners = [r["name"] for r in eligible
               if all(beats(r, other) for other in eligible if other is not r)]
    assert len(winners) <= 1
    return winners[0] if winners else None


NAMES = st.text(alphabet="abz_1", min_size=1, max_size=3).filter(lambda s: not s[0].isdigit())
VALUES = st.one_of(
    st.sampled_from([0.0, -0.0, 0.5, 1.0, 0.9375]),  # ties are likely
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-3, max_value=3),
    st.none(),
    st.sampled_from(["0.9", float("nan"), float("inf"), float("-inf")]),
)


@st.composite
def _rows(draw) -> list[dict]:
    names = draw(st.lists(NAMES, min_size=1, max_size=7, unique=True))
    rows = [{"name": n, "value": draw(VALUES), "blessed": draw(st.booleans()),
             "reasons": [], "metrics": {}} for n in names]
    return draw(st.permutations(rows))  # in any order: pick orders by name itself


@settings(max_examples=400, deadline=None)
@given(rows=_rows(), higher=st.booleans())
def test_pick_agrees_with_the_brute_force_reference(rows, higher):
    expected = _reference(rows, higher)
    picked = pick(rows, higher)
    assert (picked and picked["name"]) == expected
    if picked is not None:
        assert picked is next(r for r in rows if r["name"] == expected)  # the row itself


@settings(max_examples=100, deadline=None)
@given(rows=_rows(), higher=st.booleans())
def test_pick_does_not_reorder_or_change_its_rows(rows, higher):
    before = [dict(r) for r in rows]
    pick(rows, higher)
    assert [r["name"] for r in rows] == [r["name"] for r in before]
    assert all(a.keys() == b.keys() and all(
        a[k] is b[k] or a[k] == b[k] for k in a) for a, b in zip(rows, before, strict=True))


def test_pick_breaks_ties_by_name_and_ignores_the_unblessed_best():
    rows = [{"name": "zeta", "value": 0.9, "blessed": True},
            {"name": "alpha", "value": 0.9, "blessed": True},
            {"name": "best", "value": 0.99, "blessed": False}]
    assert pick(rows, True)["name"] == "alpha"
    assert pick(rows, False)["name"] == "alpha"
    rows[2]["blessed"] = True
    assert pick(rows, True)["name"] == "best"
    assert pick(rows, False)["name"] == "alpha"
    assert pick([dict(r, blessed=False) for r in rows], True) is None
    assert pick([dict(r, value=float("nan")) for r in rows], True) is None


# --- run on fake candidate folders ---------------------------------------------------------------

REPORT = ("<!DOCTYPE html>\n<html><head><title>{name} evaluation</title></head><body>"
          "<h1>Evaluation of {name}</h1><p>the report of {name}</p></body></html>\n")


def _pipeline(names, best_by="auc", higher_is_better=None) -> ef.Pipeline:
    models = {n: ef.DNNClassifier(hidden_units=(i + 2,), feature_columns=("x",))
              for i, n in enumerate(names)}
    return ef.Pipeline(name="cands", source=ef.CsvSource("data.csv"),
                       features=(ef.Numeric("x"),), label=ef.Label("y"),
                       model=ef.Candidates(models, best_by=best_by,
                                           higher_is_better=higher_is_better),
                       train=ef.TrainSpec(max_steps=10))


def _candidate(root: Path, name: str, metrics: dict, blessed: bool,
               report: str | None = REPORT) -> tuple[str, str]:
    """A candidate's model and evaluation folders as its train and evaluate steps write them."""
    model, evaluation = root / f"model_{name}", root / f"evaluation_{name}"
    (model / Files.EXPORT / "variables").mkdir(parents=True)
    (model / Files.EXPORT / "saved_model.pb").write_bytes(f"graph of {name}".encode() * 7)
    (model / Files.EXPORT / "variables" / "variables.index").write_text(f"index {name}")
    (model / Files.TRAIN_RESULT).write_text(json.dumps({"model": name, "global_step": 10}))
    evaluation.mkdir(parents=True)
    (evaluation / Files.METRICS).write_text(json.dumps(
        {"head": "binary", "metrics": metrics, "slices": {}}))
    reasons = ([f"PASS auc of {name}"] if blessed else [f"FAIL auc of {name} below 0.99"])
    (evaluation / Files.BLESSING).write_text(json.dumps(
        {"blessed": blessed, "reasons": reasons, "baseline": None}))
    if report is not None:
        (evaluation / Files.REPORT).write_text(report.format(name=name))
    (evaluation / Files.KFP_METRICS).write_text(json.dumps(metrics))
    return str(model), str(evaluation)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _inodes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_ino for p in folder.rglob("*")
            if p.is_file()}


CASES = {
    "linear": ({"auc": 0.91, "average_loss": 0.40, "accuracy": 0.8, "examples": 40}, True),
    "dnn": ({"auc": 0.93, "average_loss": 0.45, "accuracy": 0.7, "examples": 40}, True),
    "wide": ({"auc": 0.97, "average_loss": 0.30, "accuracy": 0.9, "examples": 40}, False),
}


@pytest.fixture
def candidates(tmp_path):
    root = tmp_path / "candidates"
    return {n: _candidate(root, n, *CASES[n]) for n in CASES}


def _expected(best_by: str, higher: bool, cases=CASES) -> str | None:
    rows = [{"name": n, "value": m.get(best_by), "blessed": b} for n, (m, b) in cases.items()]
    return _reference(rows, higher)


def _run(pipeline, candidates, tmp_path):
    model_out, evaluation_out = tmp_path / "out" / "model", tmp_path / "out" / "evaluation"
    model_out.mkdir(parents=True)
    evaluation_out.mkdir(parents=True)
    before = {n: (_tree(Path(m)), _tree(Path(e))) for n, (m, e) in candidates.items()}
    summary = run(pipeline, candidates, str(model_out), str(evaluation_out))
    after = {n: (_tree(Path(m)), _tree(Path(e))) for n, (m, e) in candidates.items()}
    assert after == before, "select wrote into a candidate's own files"
    return summary, model_out, evaluation_out


@pytest.mark.parametrize("best_by, higher", [("auc", None), ("average_loss", None),
                                             ("accuracy", None), ("auc", False)])
def test_the_outputs_are_the_winner_s_files(candidates, tmp_path, best_by, higher):
    pipeline = _pipeline(sorted(candidates), best_by, higher)
    summary, model_out, evaluation_out = _run(pipeline, candidates, tmp_path)
    higher = pipeline.model.higher_is_better
    winner = _expected(best_by, higher)
    assert winner is not None and summary["picked"] == winner
    model, evaluation = (Path(p) for p in candidates[winner])
    assert _tree(model_out) == _tree(model)
    out = _tree(evaluation_out)
    own = _tree(evaluation)
    assert set(out) == set(own) | {CANDIDATES_FILE}
    for name in set(own) - {Files.BLESSING, Files.REPORT}:
        assert out[name] == own[name], name
    # what was written is new files, never a write through the candidate's hard links
    inodes = _inodes(evaluation)
    for name in (Files.BLESSING, Files.REPORT):
        assert (evaluation_out / name).stat().st_ino != inodes[name]

    blessing = json.loads((evaluation_out / Files.BLESSING).read_text())
    own_blessing = json.loads((evaluation / Files.BLESSING).read_text())
    assert blessing["blessed"] is True and blessing["candidate"] == winner
    assert blessing["reasons"][:-1] == own_blessing["reasons"]
    why = blessing["reasons"][-1]
    assert repr(winner) in why and best_by in why
    for other in set(CASES) - {winner}:
        assert repr(other) in why, other
    assert ("(not blessed)" in why) == any(not b for n, (_, b) in CASES.items() if n != winner)


def test_candidates_json_holds_every_candidate(candidates, tmp_path):
    pipeline = _pipeline(sorted(candidates), "average_loss")
    summary, _, evaluation_out = _run(pipeline, candidates, tmp_path)
    written = json.loads((evaluation_out / CANDIDATES_FILE).read_text())
    assert written == json.loads(json.dumps(summary))
    assert (written["best_by"], written["higher_is_better"]) == ("average_loss", False)
    assert written["picked"] == _expected("average_loss", False)
    assert [r["name"] for r in written["candidates"]] == sorted(CASES)
    for row in written["candidates"]:
        metrics, blessed = CASES[row["name"]]
        assert row["metrics"] == metrics and row["blessed"] is blessed
        assert row["value"] == metrics["average_loss"]
        own = json.loads((Path(candidates[row["name"]][1]) / Files.BLESSING).read_text())
        assert row["reasons"] == own["reasons"]


def test_the_report_opens_with_the_comparison(candidates, tmp_path):
    pipeline = _pipeline(sorted(candidates))
    summary, _, evaluation_out = _run(pipeline, candidates, tmp_path)
    winner = summary["picked"]
    text = (evaluation_out / Files.REPORT).read_text()
    own = (Path(candidates[winner][1]) / Files.REPORT).read_text()
    table_at, heading_at = text.find('<table id="candidates">'), text.find("<h1>Evaluation of")
    assert 0 <= table_at < heading_at
    # the winner's report whole, the comparison inserted before its first heading
    start = own.find("<h1")
    assert text.startswith(own[:start]) and text.endswith(own[start:])
    table = text[table_at:text.index("</table>", table_at)]
    rows = table.split("<tr")[2:]  # after the header row
    assert len(rows) == len(CASES)
    for name, row in zip(sorted(CASES), rows, strict=True):
        assert f"<td>{html.escape(name)}" in row
        assert (' class="picked"' in row) == (name == winner)
        metrics, blessed = CASES[name]
        assert f"<td>{'yes' if blessed else 'no'}</td>" in row
        assert f"<td>{metrics['auc']:.4f}</td>" in row
    # the other candidates' reports are not in it
    for other in set(CASES) - {winner}:
        assert f"the report of {other}" not in text


def test_none_blessed_writes_blessed_false_with_every_candidate_s_reasons(tmp_path):
    cases = {n: (m, False) for n, (m, _) in CASES.items()}
    root = tmp_path / "candidates"
    candidates = {n: _candidate(root, n, *cases[n]) for n in cases}
    pipeline = _pipeline(sorted(candidates))
    summary, model_out, evaluation_out = _run(pipeline, candidates, tmp_path)
    assert summary["picked"] is None
    blessing = json.loads((evaluation_out / Files.BLESSING).read_text())
    assert blessing["blessed"] is False and blessing["candidate"] is None
    assert len(blessing["reasons"]) == len(cases)
    for name, reason in zip(sorted(cases), blessing["reasons"], strict=True):
        own = json.loads((Path(candidates[name][1]) / Files.BLESSING).read_text())
        assert repr(name) in reason
        assert all(r in reason for r in own["reasons"])
    written = json.loads((evaluation_out / CANDIDATES_FILE).read_text())
    assert written["picked"] is None
    assert all(r["blessed"] is False for r in written["candidates"])
    # the best candidate by the metric is kept for the report; nothing says it is picked
    best = max(cases, key=lambda n: cases[n][0]["auc"])
    assert _tree(model_out) == _tree(Path(candidates[best][0]))
    assert ' class="picked"' not in (evaluation_out / Files.REPORT).read_text()


def test_a_blessed_candidate_without_the_metric_is_not_picked(tmp_path):
    root = tmp_path / "candidates"
    candidates = {"a": _candidate(root, "a", {"accuracy": 0.99}, True),
                  "b": _candidate(root, "b", {"auc": 0.6}, True),
                  "c": _candidate(root, "c", {"auc": float("nan")}, True)}
    summary, model_out, _ = _run(_pipeline(sorted(candidates)), candidates, tmp_path)
    assert summary["picked"] == "b"
    assert _tree(model_out) == _tree(Path(candidates["b"][0]))


def test_blessed_candidates_without_a_number_are_not_called_unblessed(tmp_path):
    root = tmp_path / "candidates"
    candidates = {"a": _candidate(root, "a", {"auc": float("nan")}, True),
                  "b": _candidate(root, "b", {"accuracy": 0.5}, True),
                  "c": _candidate(root, "c", {"auc": 0.99}, False)}
    summary, _, evaluation_out = _run(_pipeline(sorted(candidates)), candidates, tmp_path)
    assert summary["picked"] is None
    blessing = json.loads((evaluation_out / Files.BLESSING).read_text())
    assert blessing["blessed"] is False
    reasons = dict(zip("abc", blessing["reasons"], strict=True))
    for name in ("a", "b"):
        assert "no candidate blessed" not in reasons[name]
        assert "not a number" in reasons[name] and repr(name) in reasons[name]
    assert "FAIL auc of c" in reasons["c"]


@pytest.mark.parametrize("report", [
    "<html><body><p>no heading in {name}</p></body></html>",
    "<p>neither body nor heading in {name}</p>",
])
def test_a_report_without_a_heading_gets_the_comparison_first(tmp_path, report):
    root = tmp_path / "candidates"
    candidates = {n: _candidate(root, n, *CASES[n], report=report) for n in ("dnn", "linear")}
    summary, _, evaluation_out = _run(_pipeline(sorted(candidates)), candidates, tmp_path)
    own = report.format(name=summary["picked"])
    text = (evaluation_out / Files.REPORT).read_text()
    table = text[text.index("<h1>Candidates"):text.index("</table>") + len("</table>")]
    assert text.replace(table, "") == own  # inserted whole, the report around it intact
    body = own.find("<body>")
    assert text.index(table) == (body + len("<body>") if body >= 0 else 0)


def test_without_a_report_select_still_writes_its_files(tmp_path):
    root = tmp_path / "candidates"
    candidates = {n: _candidate(root, n, *CASES[n], report=None) for n in ("dnn", "linear")}
    summary, _, evaluation_out = _run(_pipeline(sorted(candidates)), candidates, tmp_path)
    assert not (evaluation_out / Files.REPORT).exists()
    assert json.loads((evaluation_out / CANDIDATES_FILE).read_text())["picked"] == \
        summary["picked"] == "dnn"


def test_select_run_again_into_what_an_interrupted_attempt_left(candidates, tmp_path):
    """``estflow run --resume`` continues a stopped step in the outputs it left: the
    hard links of the first attempt are there; select replaces them, writing through none."""
    pipeline = _pipeline(sorted(candidates))
    first, model_out, evaluation_out = _run(pipeline, candidates, tmp_path)
    written = _tree(evaluation_out)
    again = run(pipeline, candidates, str(model_out), str(evaluation_out))
    assert again == first
    assert _tree(evaluation_out) == written
    assert _tree(model_out) == _tree(Path(candidates[first["picked"]][0]))
    for name, (_, evaluation) in candidates.items():
        own = (Path(evaluation) / Files.BLESSING).read_text()
        assert json.loads(own).get("candidate") is None, name


# --- the entry point ----------------------------------------------------------------------------

def test_the_entry_point_takes_each_candidate_s_folders_by_name(candidates, tmp_path, capsys):
    pipeline = _pipeline(sorted(candidates))
    spec = tmp_path / "spec.json"
    spec.write_text(pipeline.to_json())
    outs = {a: tmp_path / "main" / a for a in ("model", "evaluation")}
    for path in outs.values():
        path.mkdir(parents=True)
    argv = ["--spec", str(spec)]
    for name, (model, evaluation) in candidates.items():
        argv += [f"--model_{name}", model, f"--evaluation_{name}", evaluation]
    argv += ["--model", str(outs["model"]), "--evaluation", str(outs["evaluation"])]
    assert select_main.main(argv) == 0
    winner = _expected("auc", True)
    assert json.loads((outs["evaluation"] / CANDIDATES_FILE).read_text())["picked"] == winner
    out = capsys.readouterr().out
    assert f"picked {winner} by auc" in out
    for name in candidates:
        assert f"{name}: auc=" in out
    # a candidate's folders missing: argparse's usage error (status 2), naming the flag
    with pytest.raises(SystemExit) as info:
        select_main.main([a for a in argv if "wide" not in a])
    assert info.value.code == 2
    assert "--model_wide" in capsys.readouterr().err


def test_the_entry_point_refuses_a_spec_without_candidates(tmp_path, capsys):
    single = ef.Pipeline(name="one", source=ef.CsvSource("data.csv"),
                         features=(ef.Numeric("x"),), label=ef.Label("y"),
                         model=ef.LinearClassifier(feature_columns=("x",)),
                         train=ef.TrainSpec(max_steps=10))
    spec = tmp_path / "spec.json"
    spec.write_text(single.to_json())
    assert select_main.main(["--spec", str(spec), "--model", "m", "--evaluation", "e"]) == 2
    assert "Candidates" in capsys.readouterr().err
    assert not os.path.exists("m") and not os.path.exists("e")
