"""Five nights of data, run as a user runs them: ``estflow run pipeline.py --span DAY`` each
night from the project directory (relative paths, the default environment). Night 3's
partition never arrived and night 4's payment types drifted: both nights stop before training
(exit status 4), name the anomaly and push nothing; nights 1, 2 and 5 train and push."""

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

PIPELINE = '''
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="nightly-taxi",
    source=ef.CsvSource("data/{span:%Y-%m-%d}/*.csv", spans=ef.Spans()),
    features=(ef.Numeric("fare", default=0.0, normalize="z_score"),
              ef.CategoricalVocab("payment_type", default="")),
    label=ef.Label("tipped"),
    model=ef.LinearClassifier(feature_columns=("fare", "payment_type")),
    train=ef.TrainSpec(max_steps=20, batch_size=64),
    push=ef.PushTarget("serving", "taxi"),
    checks=ef.DataChecks(min_examples=50, drift={"payment_type": 0.3}),
)
'''


def _night(folder: Path, seed: int, flood: bool = False) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    lines = ["fare,payment_type,tipped"]
    for _ in range(400):
        kind = "Mobile" if flood and rng.random() < 0.7 else \
            rng.choice(("Cash", "Credit Card", "Credit Card"))
        fare = round(rng.uniform(3, 40), 2)
        lines.append(f"{fare},{kind},{int(kind != 'Cash' and rng.random() < 0.7)}")
    (folder / "trips.csv").write_text("\n".join(lines) + "\n")


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ESTFLOW_", "PYTEST"))}
    estflow = Path(sys.executable).with_name("estflow")
    return subprocess.run([str(estflow), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def _versions(cwd: Path) -> list[str]:
    base = cwd / "serving" / "taxi"
    return sorted(p.name for p in base.iterdir() if p.name.isdigit()) if base.is_dir() else []


@pytest.mark.slow
def test_five_nights_the_faulty_ones_stop_before_training(tmp_path):
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    for day, flood in ((1, False), (2, False), (4, True), (5, False)):  # day 3: never came
        _night(tmp_path / "data" / f"2024-01-0{day}", seed=day, flood=flood)
    pushed = []
    for day in range(1, 6):
        runs_before = sorted((tmp_path / "estflow_runs" / "nightly-taxi").glob("2*"))
        out = _run(tmp_path, "run", "pipeline.py", "--span", f"2024-01-0{day}")
        said = out.stdout + out.stderr
        if day == 3:
            assert out.returncode == 4, said
            assert "SPAN_MISSING (span 2024-01-03)" in said
            # stopped before any step: no run started
            assert sorted((tmp_path / "estflow_runs" / "nightly-taxi").glob("2*")) == \
                runs_before
        elif day == 4:
            assert out.returncode == 4, said
            assert "payment_type: COMPARATOR_L_INFTY_HIGH (All Examples)" in said
            assert "allowed 0.3" in said
            (run,) = set((tmp_path / "estflow_runs" / "nightly-taxi").glob("2*")) - \
                set(runs_before)
            assert not (run / "train").exists()  # stopped before training
            report = run / "validate" / "validation" / "data_report.html"
            assert "COMPARATOR_L_INFTY_HIGH" in report.read_text()
            found = json.loads((report.parent / "validation.json").read_text())["anomalies"]
            assert [(a["column"], a["kind"], a["split"]) for a in found] == [
                ("payment_type", "COMPARATOR_L_INFTY_HIGH", "All Examples")]  # once: the span
        else:
            assert out.returncode == 0, said
            pushed.append(day)
        assert len(_versions(tmp_path)) == len(pushed), (day, said)
    version = tmp_path / "serving" / "taxi" / _versions(tmp_path)[-1]
    assert (version / "assets.extra" / "estflow_statistics.pb").is_file()
    # night 5's evaluation report: its data next to the served (night 2) model's training data
    runs = tmp_path / "estflow_runs" / "nightly-taxi"
    last = sorted(runs.glob("2*/evaluate/*/report.html"))[-1]
    page = last.read_text()
    assert "Data statistics (train split)" in page and "served model&#x27;s training data" in page
    mine, theirs = re.search(r"<tr><th>examples</th><td>(\d+)</td><td>(\d+)</td>", page).groups()
    assert int(mine) > 0 and int(theirs) > 0


@pytest.mark.slow
def test_a_rolling_window_trains_on_the_last_two_nights(tmp_path):
    (tmp_path / "pipeline.py").write_text(
        PIPELINE.replace("spans=ef.Spans()", "spans=ef.Spans(last=2)"))
    for day in (1, 2, 3):
        _night(tmp_path / "data" / f"2024-01-0{day}", seed=day)
    out = _run(tmp_path, "run", "pipeline.py")  # the latest: nights 2 and 3
    assert out.returncode == 0, out.stdout + out.stderr
    assert "spans 2024-01-02 to 2024-01-03 (2, the last 2)" in out.stdout
    (stats,) = (tmp_path / "estflow_runs" / "nightly-taxi").glob("*/ingest/*/statistics.pb")
    from estflow.components._statistics.statistics import read_statistics  # noqa: PLC0415
    from estflow.components._statistics.statistics import span_dataset  # noqa: PLC0415
    from estflow.components._statistics.statistics import split_datasets  # noqa: PLC0415
    written = read_statistics(str(stats))
    assert sum(d.num_examples for d in split_datasets(written)) == 800
    assert span_dataset(written).num_examples == 800
    out = _run(tmp_path, "run", "pipeline.py", "--span", "2024-01-01")  # 2023-12-31 missing
    assert out.returncode == 4, out.stdout + out.stderr
    assert "SPAN_MISSING (span 2023-12-31)" in out.stderr
