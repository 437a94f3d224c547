"""``estflow run`` on a night whose numeric column turned to text in 5% of its rows: a data
anomaly, exit status 4, the column named, and no ``--resume`` hint (a resume reads the same
data). Within ``max_rejected_fraction`` the validate step stops the run (UNEXPECTED_DATA_TYPE
against the served model's training data); past it, the ingest step does. Both runs stop
before training, so only ingest and validate run (real steps, no TensorFlow)."""

from __future__ import annotations

import os
import random
import textwrap
from pathlib import Path

import pytest

from estflow.dsl.contracts import Files
from estflow.pipelines import cli

REPO = Path(__file__).resolve().parents[2]

PIPELINE = '''
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="nightly-taxi",
    source=ef.CsvSource("data/{{span:%Y-%m-%d}}/*.csv", spans=ef.Spans(),
                        max_rejected_fraction={limit}),
    features=(ef.Numeric("fare", default=0.0, normalize="z_score"),
              ef.CategoricalVocab("payment_type", default="")),
    label=ef.Label("tipped"),
    model=ef.LinearClassifier(feature_columns=("fare", "payment_type")),
    train=ef.TrainSpec(max_steps=20, batch_size=64),
    push=ef.PushTarget("serving", "taxi"),
    checks=ef.DataChecks(min_examples=50),
)
'''


@pytest.fixture(autouse=True)
def _steps_import_the_tests(monkeypatch):
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + path if path else ""))


def _project(tmp_path: Path, limit: float) -> Path:
    (tmp_path / "pipeline.py").write_text(textwrap.dedent(PIPELINE.format(limit=limit)))
    for day, text in (("2024-01-01", 0.0), ("2024-01-02", 0.05)):
        rng = random.Random(day)
        folder = tmp_path / "data" / day
        folder.mkdir(parents=True)
        lines = ["fare,payment_type,tipped"]
        for _ in range(2000):
            fare = round(rng.uniform(3, 40), 2)
            kind = rng.choice(("Cash", "Credit Card", "Credit Card"))
            cell = f"${fare:.2f}" if rng.random() < text else f"{fare}"
            lines.append(f"{cell},{kind},{int(kind != 'Cash' and rng.random() < 0.7)}")
        (folder / "trips.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "pipeline.py"


def _serve_the_clean_night(tmp_path: Path, pipeline: Path) -> None:
    """A served version trained on 2024-01-01 (its statistics, as push stores them), without
    training one: the clean night's ingest output."""
    from estflow.components.ingest import __main__ as ingest  # noqa: PLC0415
    from estflow.pipelines import loader  # noqa: PLC0415
    from estflow.pipelines.cli import backfill  # noqa: PLC0415

    loaded = backfill.select(loader.load(str(pipeline)), "2024-01-01")
    out = tmp_path / "clean-examples"
    assert ingest.main(["--spec", loaded.pipeline.to_json(), "--examples", str(out),
                        "--source-root", str(tmp_path)]) == 0
    version = tmp_path / "serving" / "taxi" / "1"
    (version / "assets.extra").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"")
    (version / Files.SERVED_STATISTICS).write_bytes((out / Files.STATISTICS).read_bytes())


def test_within_the_rejected_limit_the_validate_step_stops_the_night(tmp_path, monkeypatch,
                                                                      capsys):
    pipeline = _project(tmp_path, limit=0.1)
    _serve_the_clean_night(tmp_path, pipeline)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "pipeline.py", "--span", "2024-01-02"]) == 4
    said = capsys.readouterr()
    said = said.out + said.err
    assert "fare: UNEXPECTED_DATA_TYPE (All Examples)" in said
    assert "the data broke a blocking check" in said and "--resume" not in said
    (run,) = (Path(os.environ["ESTFLOW_HOME"]) / "nightly-taxi").glob("2*")
    assert (run / "validate").is_dir() and not (run / "train").exists()


def test_past_the_rejected_limit_the_ingest_step_stops_it_with_exit_4(tmp_path, monkeypatch,
                                                                       capsys):
    _project(tmp_path, limit=0.01)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "pipeline.py", "--span", "2024-01-02"]) == 4
    said = capsys.readouterr()
    said = said.out + said.err
    assert "fare: UNEXPECTED_DATA_TYPE:" in said and "are not a finite float, e.g. '$" in said
    assert "a resume would read the same data" in said and "--resume" not in said
