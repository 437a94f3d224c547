"""``Pipeline.tune`` end to end: ``estflow run`` of a pipeline file declaring a search, from the
pipeline's directory, in the default environment, on a small generated CSV.

One workspace for the module, its runs in order: the first run searches (3 trials, 2 at once),
then the final train trains with the best trial's values (its progress line says which)
and evaluate follows; ``estflow runs show`` names the best
trial and its values; an identical rerun reuses every step; a larger budget (4 trials) runs
the tune step again but trains only the one new trial (the 3 finished ones come from the
study kept beside the step cache).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.user_runs import ESTFLOW
from tests.user_runs import estflow_run
from tests.user_runs import run_record
from tests.user_runs import statuses
from tests.user_runs import tiny_csv
from tests.user_runs import user_env

pytestmark = pytest.mark.slow

PIPELINE = '''
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="tuned",
    source=ef.CsvSource("data.csv"),
    features=(ef.Numeric("x"), ef.Numeric("z")),
    label=ef.Label("y"),
    model=ef.DNNClassifier(hidden_units=(8,), feature_columns=("x", "z")),
    train=ef.TrainSpec(max_steps=40, batch_size=32),
    tune=ef.Tune({"model.learning_rate": ef.FloatRange(0.01, 0.5, log=True),
                  "model.hidden_units": ef.Choice(((8,), (16, 8)))},
                 objective="auc", trials=TRIALS, parallel=2, trial_steps=20),
)
'''


def _write(folder: Path, trials: int) -> None:
    (folder / "tuned.py").write_text(PIPELINE.replace("TRIALS", str(trials)))


def _output(record: dict, step: str, artifact: str) -> Path:
    return Path(record["steps"][step]["outputs"][artifact]["path"])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("tune-e2e")
    tiny_csv(folder, rows=200)
    _write(folder, 3)
    first = estflow_run(folder, "tuned.py")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    return {"folder": folder, "first": first, "record": run_record(folder, "tuned", first.stdout)}


def test_the_search_runs_then_the_final_train_uses_the_best_trial(workspace):
    record, out = workspace["record"], workspace["first"].stdout
    assert statuses(record) == {"ingest": "ran", "transform": "ran", "tune": "ran",
                                "train": "ran", "evaluate": "ran"}
    tuned = _output(record, "tune", "hyperparameters")
    trials = json.loads((tuned / "trials.json").read_text())["trials"]
    assert len(trials) == 3 and all(t["state"] == "COMPLETE" for t in trials)
    best = json.loads((tuned / "best.json").read_text())
    assert best["value"] == max(t["value"] for t in trials)
    assert best["trial"] == next(t["number"] for t in trials if t["value"] == best["value"])
    # the final train says which trial's values it trains with (shown as the run goes)
    line = next(line for line in out.splitlines() if "training with the tuned" in line)
    assert line.strip().startswith("[train") and f"of trial {best['trial']} " in line
    assert all(f"{path}=" in line for path in best["assignment"])
    assert (tuned / "report.html").read_text().count("<svg") >= 2


def test_runs_show_names_the_best_trial_and_its_values(workspace):
    folder, record = workspace["folder"], workspace["record"]
    best = json.loads((_output(record, "tune", "hyperparameters") / "best.json").read_text())
    shown = subprocess.run([ESTFLOW, "runs", "show", record["run"]], cwd=folder,
                           env=user_env(), capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if line.strip().startswith("tuned:"))
    assert f"trial {best['trial']}" in line and "3 complete" in line
    for path, value in best["assignment"].items():
        assert f"{path}={json.dumps(value)}" in line


def test_an_identical_rerun_reuses_every_step(workspace):
    folder = workspace["folder"]
    again = estflow_run(folder, "tuned.py")
    assert again.returncode == 0, again.stdout[-3000:]
    shown = statuses(run_record(folder, "tuned", again.stdout))
    assert set(shown.values()) == {"reused"}, (shown, again.stdout[-3000:])


def test_a_larger_budget_trains_only_the_new_trial(workspace):
    folder = workspace["folder"]
    before = json.loads((_output(workspace["record"], "tune", "hyperparameters")
                         / "trials.json").read_text())["trials"]
    _write(folder, 4)
    more = estflow_run(folder, "tuned.py")
    assert more.returncode == 0, more.stdout[-3000:]
    record = run_record(folder, "tuned", more.stdout)
    assert statuses(record)["tune"] == "ran"
    started = [line for line in more.stdout.splitlines() if "] trial " in line
               and " started" in line]
    assert len(started) == 1, started  # trials 0-2 come from the study, trial 3 is new
    trials = json.loads((_output(record, "tune", "hyperparameters")
                         / "trials.json").read_text())["trials"]
    assert len(trials) == 4
    assert [(t["number"], t["value"]) for t in trials[:3]] == [
        (t["number"], t["value"]) for t in before]
