"""Warm start from what is served, end to end with the real steps on a sample of the taxi rows:
the first run (nothing served) trains from scratch and pushes a version carrying its training
checkpoint; the second run's train step is not reused (it starts from another model), starts
from that version, and its blessing compares against that same version on the same eval rows;
both runs evaluate while training."""

import itertools
import json
from pathlib import Path

import pytest

from estflow.components._io import model_repo
from estflow.dsl.contracts import Files
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runs

DATA = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"


def _pipeline(folder: Path) -> Path:
    path = folder / "retrain.py"
    path.write_text(
        "import dataclasses\nimport estflow.dsl as ef\n"
        "from estflow.pipelines.examples import taxi\n"
        "pipeline = dataclasses.replace(\n"
        "    taxi.pipeline, source=ef.CsvSource('sample.csv'),\n"
        "    train=ef.TrainSpec(max_steps=200, batch_size=64, warm_start=ef.WarmStart()),\n"
        "    eval=ef.EvalSpec(start_delay_secs=0, throttle_secs=0, thresholds=(\n"
        "        ef.Threshold('auc', max_regression=0.5),)),\n"
        "    run_config=ef.RunConfig(save_checkpoints_steps=100, log_step_count_steps=100),\n"
        "    push=ef.PushTarget('serving', 'taxi'))\n")
    return path


def _step_output(run, step: str, artifact: str) -> Path:
    return Path(run.data["steps"][step]["outputs"][artifact]["path"])


@pytest.mark.slow
def test_the_second_run_warm_starts_from_the_first_run_s_pushed_version(tmp_path, monkeypatch,
                                                                        capsys):
    monkeypatch.chdir(tmp_path)  # the relative push target resolves here
    with open(DATA) as src, open(tmp_path / "sample.csv", "w") as dst:
        dst.writelines(itertools.islice(src, 2001))
    spec = _pipeline(tmp_path)

    assert cli.main(["run", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "no version is served" in out and "training from scratch" in out
    assert "evaluation at step 100" in out and "evaluation at step 200" in out
    (first,) = runs.all_runs()
    (version,) = sorted(p for p in (tmp_path / "serving" / "taxi").iterdir() if p.name.isdigit())
    carried = version / model_repo.SERVED_CHECKPOINT
    assert (carried / "checkpoint").is_file()
    trained = json.loads((_step_output(first, "train", "model") / Files.TRAIN_RESULT)
                         .read_text())
    assert [row["step"] for row in trained["evaluations"]] == [100, 200]

    assert cli.main(["run", str(spec)]) == 0
    out = capsys.readouterr().out
    second = runs.all_runs()[-1]
    status = {n: s["status"] for n, s in second.data["steps"].items()}
    assert status["train"] == "ran" and status["evaluate"] == "ran"
    if second.data["estflow_code"] == first.data["estflow_code"]:  # not edited meanwhile
        assert status["ingest"] == status["transform"] == "reused"
    assert f"warm start: from served version {version.name}" in out
    assert "warm-started variables from" in out
    model = _step_output(second, "train", "model")
    warm = json.loads((model / Files.TRAIN_RESULT).read_text())
    assert warm["warm_start"]["version"] == int(version.name)
    # it continues from the served model: its first loop's loss is near the first run's end,
    # well below where the first (cold) run began
    assert warm["first_loss"] < trained["first_loss"]

    evaluation = _step_output(second, "evaluate", "evaluation")
    blessing = json.loads((evaluation / Files.BLESSING).read_text())
    assert blessing["baseline"]["version"] == int(version.name)
    assert blessing["baseline"]["metrics"] is not None
    candidate = json.loads((evaluation / Files.METRICS).read_text())["metrics"]
    # the same eval rows: the label mean the baseline saw is the candidate's
    assert blessing["baseline"]["metrics"]["label/mean"] == pytest.approx(
        candidate["label/mean"])
    assert any(c["condition"] == "max_regression" and f"version {version.name}" in c["reason"]
               for c in blessing["checks"])
