"""One answer for a raw row, however it is scored: the training path (ingest's reader, then the
model the train step exported), batch scoring (``estflow predict`` and the batch prediction
step) and the REST server (``:classify``) agree row for row, on rows generated with the
missing-value tokens, defaults and bad cells a user's own CSV has.

The pipeline is a user's: a 3-class string label, a source that declares its own missing
tokens (``column_na_values={"sex": ("", "NA", ".")}``, ``"?"`` missing in numeric columns,
``"n/a"`` in string ones) and a default ``"unknown"`` for ``sex``. It is trained once with the
documented command (``estflow run penguins.py``, from its directory, in the default
environment). Before the model carried its training source's missing tokens, batch scoring read
``"NA"`` in ``sex`` as a category the model never saw, where training read it as missing (the
default ``"unknown"``), and scored those rows differently.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
CLASSES = ("Adelie", "Chinstrap", "Gentoo")
HEADER = ("row_id", "species", "island", "bill_length_mm", "body_mass_g", "sex")

PIPELINE = textwrap.dedent("""\
    import estflow.dsl as ef

    pipeline = ef.Pipeline(
        name="penguins",
        source=ef.CsvSource("penguins.csv", na_values=("", "NA", "?"),
                            string_na_values=("", "n/a"),
                            column_na_values={"sex": ("", "NA", ".")}),
        features=(
            ef.Numeric("bill_length_mm", default=0.0, normalize="z_score"),
            ef.Numeric("body_mass_g", dtype="int", default=0, normalize="z_score"),
            ef.CategoricalVocab("island", default="", num_oov_buckets=1),
            ef.CategoricalVocab("sex", default="unknown", num_oov_buckets=1),
        ),
        label=ef.Label("species", dtype="string", vocabulary=("Adelie", "Chinstrap", "Gentoo")),
        model=ef.DNNClassifier(hidden_units=(8,), n_classes=3,
                               label_vocabulary=("Adelie", "Chinstrap", "Gentoo"),
                               feature_columns=("bill_length_mm", "body_mass_g",
                                                ef.Indicator("island"), ef.Indicator("sex"))),
        train=ef.TrainSpec(max_steps=150, batch_size=32),
        run_config=ef.RunConfig(save_checkpoints_steps=150, log_step_count_steps=150),
        checks=ef.DataChecks(drift_linf=0.5),
        push=ef.PushTarget(base_path="serving_models", model_name="penguins"),
    )
""")
# The source's tokens, as the pipeline above declares them (what training read as missing).
MISSING = {"island": ("", "n/a"), "sex": ("", "NA", "."), "bill_length_mm": ("", "NA", "?"),
           "body_mass_g": ("", "NA", "?")}


def _training_rows(n: int = 344, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        k = int(rng.integers(3))
        bill = f"{38 + 6 * k + rng.normal():.1f}" if rng.random() > 0.02 else "NA"
        mass = str(int(3500 + 700 * k + rng.normal() * 200)) if rng.random() > 0.02 else "NA"
        sex = rng.choice(["male", "female"]) if rng.random() > 0.05 else rng.choice(["NA", "."])
        island = ["Torgersen", "Dream", "Biscoe"][k] if rng.random() > 0.3 else "Biscoe"
        rows.append((f"p{i}", CLASSES[k], island, bill, mass, sex))
    return rows


def _write_csv(path: Path, rows) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A user's project trained with ``estflow run penguins.py`` from its directory."""
    root = tmp_path_factory.mktemp("penguins")
    (root / "penguins.py").write_text(PIPELINE)
    _write_csv(root / "penguins.csv", _training_rows())
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "ESTFLOW_"))}
    proc = subprocess.run([sys.executable, "-m", "estflow.pipelines", "run", "penguins.py"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


def _version(project: Path) -> Path:
    (version,) = [p for p in (project / "serving_models" / "penguins").iterdir()
                  if p.name.isdigit()]
    return version


# --- the three paths ----------------------------------------------------------------------------

def _training_path(project: Path, csv_path: Path) -> dict[str, list[float]]:
    """Row id -> scores, reading the rows with ingest's own reader for the training pipeline
    (what the train step was fed) and scoring the raw Examples it encodes with the export."""
    import tensorflow as tf

    from estflow.components._io.example_codec import encode_examples
    from estflow.components._sources.csv_source import ReadCsv
    from estflow.pipelines.loader import load

    pipeline = load(str(project / "penguins.py")).pipeline
    ids = [r[0] for r in csv.reader(csv_path.read_text().splitlines())][1:]
    kept, batches = set(range(len(ids))), []
    for chunk in ReadCsv(pipeline, 1 << 16).process(str(csv_path)):
        for line in chunk.rejected:
            kept.discard(json.loads(line)["line"] - 2)  # line 1 is the header
        batches.append(chunk.batch)
    serialized = []
    for batch in batches:
        s = encode_examples(batch)
        serialized += [s.data[a:a + n].tobytes() for a, n in zip(s.starts, s.lengths, strict=True)]
    classify = tf.saved_model.load(str(_version(project))).signatures["classify"]
    scores = classify(inputs=tf.constant(serialized, tf.string))["scores"].numpy() \
        if serialized else np.zeros((0, 3))
    rows = sorted(kept)
    assert len(rows) == len(scores)
    return {ids[r]: s.tolist() for r, s in zip(rows, scores, strict=True)}


def _batch_path(project: Path, csv_path: Path, out: Path) -> dict[str, list[float]]:
    """Row id -> scores from the batch prediction step, declared as ``estflow predict``
    declares it (its own CSV source: default missing tokens)."""
    import argparse

    from estflow.components.predict import step as predict
    from estflow.pipelines.cli.prediction import prediction_pipeline

    args = argparse.Namespace(input=str(csv_path), input_format=None, delimiter=None,
                              max_rejected_fraction=1.0, keys="row_id", format="jsonl",
                              signature="classify", batch_size=8192, fail_on_skew=False,
                              model=str(project / "serving_models" / "penguins"))
    predict.run(prediction_pipeline(args), str(out))
    lines = [json.loads(line) for f in sorted(out.glob("predictions-*.jsonl"))
             for line in f.read_text().splitlines()]
    return {row["row_id"]: row["scores"] for row in lines}


def _json_row(row: tuple) -> dict:
    """A raw row as a client sends it to ``:classify``: typed values, a missing cell (one of
    the tokens the pipeline declares) left out so that the model's default applies."""
    _, _, island, bill, mass, sex = row
    values = {"island": island, "bill_length_mm": bill, "body_mass_g": mass, "sex": sex}
    out = {}
    for name, cell in values.items():
        if cell in MISSING[name]:
            continue
        out[name] = (float(cell) if name == "bill_length_mm" else
                     int(cell) if name == "body_mass_g" else cell)
    return out


def _server_path(project: Path, rows: list[tuple]) -> dict[str, list[float]]:
    """Row id -> scores from ``estflow serve``'s ``:classify`` (TF Serving's REST API)."""
    from estflow.components.serve import __main__ as serve
    from tests.components import _serving_fixtures as fx

    if not rows:
        return {}
    with serve.serve(project / "serving_models", poll_seconds=0) as server:
        status, payload = fx.http_request(server.host, server.port, "POST",
                                          "/v1/models/penguins:classify",
                                          {"examples": [_json_row(r) for r in rows]})
    assert status == 200, payload
    return {r[0]: [score for _, score in sorted(result, key=lambda p: CLASSES.index(p[0]))]
            for r, result in zip(rows, payload["results"], strict=True)}


def _scorable(row: tuple) -> bool:
    """Whether every cell of ``row`` reads under the pipeline's declaration (else ingest and
    batch scoring both reject it, and the server is not asked)."""
    _, _, _, bill, mass, _ = row
    for cell, kind in ((bill, float), (mass, int)):
        if cell in MISSING["bill_length_mm"]:
            continue
        try:
            kind(cell)
        except ValueError:
            return False
    return True


# --- generated rows -----------------------------------------------------------------------------

_CELLS = {
    "island": st.sampled_from(["Biscoe", "Dream", "Torgersen", "n/a", "", "NA", "Atlantis"]),
    "sex": st.sampled_from(["male", "female", "NA", ".", "", "unknown", "MALE", "n/a"]),
    "bill": st.one_of(st.floats(30, 60).map(lambda v: f"{v:.2f}"),
                      st.sampled_from(["", "NA", "?", "N/A", "abc"])),
    "mass": st.one_of(st.integers(2500, 6500).map(str), st.sampled_from(["", "NA", "?", "1.5"])),
}
_ROW = st.tuples(st.sampled_from(CLASSES), _CELLS["island"], _CELLS["bill"], _CELLS["mass"],
                 _CELLS["sex"])


@pytest.mark.slow
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(_ROW, min_size=1, max_size=25))
def test_training_batch_scoring_and_the_server_agree_row_for_row(project, tmp_path_factory,
                                                                   cells):
    tmp = tmp_path_factory.mktemp("rows")
    rows = [(f"r{i}", *c) for i, c in enumerate(cells)]
    csv_path = _write_csv(tmp / "to_score.csv", rows)

    trained = _training_path(project, csv_path)
    batch = _batch_path(project, csv_path, tmp / "out")
    served = _server_path(project, [r for r in rows if r[0] in trained])

    # the same rows are kept (bad cells rejected by both readers), and each scores the same
    assert set(batch) == set(trained) == {r[0] for r in rows if _scorable(r)}
    assert set(served) == set(trained)
    for row_id, scores in trained.items():
        np.testing.assert_allclose(batch[row_id], scores, rtol=1e-5, atol=1e-6,
                                   err_msg=f"batch scoring, row {row_id}: {rows}")
        np.testing.assert_allclose(served[row_id], scores, rtol=1e-5, atol=1e-6,
                                   err_msg=f"the server, row {row_id}: {rows}")


@pytest.mark.slow
def test_the_model_carries_its_training_readings_and_estflow_predict_uses_them(project,
                                                                               tmp_path):
    """The export records each raw feature's missing tokens and default; ``estflow predict``,
    the documented command, run from the project's directory, reads ``NA`` in ``sex`` as
    missing (and says so), as training did."""
    doc = json.loads((_version(project) / "assets.extra" / "estflow_raw_features.json")
                     .read_text())
    columns = {c["name"]: c for c in doc["columns"]}
    assert columns["sex"]["na_values"] == ["", "NA", "."]
    assert columns["sex"]["default"] == "unknown"
    assert columns["bill_length_mm"]["na_values"] == ["", "NA", "?"]
    assert columns["island"]["na_values"] == ["", "n/a"]

    rows = [("a", "Adelie", "Dream", "39.1", "3700", "NA"),
            ("b", "Adelie", "Dream", "39.1", "3700", ""),
            ("c", "Adelie", "Dream", "39.1", "3700", "unknown"),
            ("d", "Adelie", "Dream", "39.1", "3700", "male")]
    _write_csv(tmp_path / "new.csv", rows)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "ESTFLOW_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "estflow.pipelines", "predict", str(project / "serving_models"
                                                                  / "penguins"),
         "--input", "new.csv", "--output", "scores", "--keys", "row_id"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "column 'sex' reads '', 'NA', '.' as missing" in proc.stdout + proc.stderr
    out = {}
    for f in (tmp_path / "scores").glob("predictions-*.jsonl"):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            out[row["row_id"]] = row
    key = next(k for k in out["a"] if k != "row_id" and isinstance(out["a"][k], list)
               and isinstance(out["a"][k][0], float))
    # "NA", "" and the default itself are one reading; "male" is another
    np.testing.assert_allclose(out["a"][key], out["c"][key], rtol=1e-6)
    np.testing.assert_allclose(out["b"][key], out["c"][key], rtol=1e-6)
    assert not np.allclose(out["d"][key], out["c"][key])


@pytest.mark.slow
def test_skew_thresholds_travel_with_the_model_and_fail_on_skew_exits_4(project, tmp_path):
    """The drift thresholds the model was trained under are recorded in its lineage; ``estflow
    predict`` (which declares no checks) warns with them, and ``--fail-on-skew`` exits 4 after
    publishing the predictions."""
    lineage = json.loads((_version(project) / "assets.extra" / "estflow_lineage.json")
                         .read_text())
    assert lineage["checks"] == {"drift": {}, "drift_linf": 0.5, "drift_js": None}

    flood = [(f"s{i}", "Adelie", "Atlantis", "39.1", "3700", ("male", "female")[i % 2])
             for i in range(40)]
    _write_csv(tmp_path / "skewed.csv", flood)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "ESTFLOW_"))}
    model = str(project / "serving_models" / "penguins")
    for extra, status in (((), 0), (("--fail-on-skew",), 4)):
        proc = subprocess.run(
            [sys.executable, "-m", "estflow.pipelines", "predict", model, "--input",
             "skewed.csv", "--output", f"scores{len(extra)}", *extra],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        out = proc.stdout + proc.stderr
        assert proc.returncode == status, out[-3000:]
        assert "thresholds: the checks the model was trained under" in out
        assert "warning: skew:" in out and "island" in out
        summary = json.loads((tmp_path / f"scores{len(extra)}" / "predict.json").read_text())
        assert summary["scored"] == 40  # published either way
        assert [a["column"] for a in summary["skew"]["anomalies"]] == ["island"]
    assert "fail_on_skew" in out and "'island'" in out
