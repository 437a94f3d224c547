"""The step cache with the real steps (Beam, tf.Transform, TensorFlow) on a sample of the taxi
rows: an identical rerun reuses every step and pushes nothing; a model change reuses ingest
and transform and pushes a new version whose lineage names its run."""

import itertools
import json
import os
import time
from pathlib import Path

import pytest

from estflow.dsl.contracts import Files
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runs
from estflow.pipelines.local import warm as _warm

DATA = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"


def _pipeline(folder: Path, name: str, hidden: tuple[int, int]) -> Path:
    path = folder / f"{name}.py"
    path.write_text(
        "import dataclasses\nimport estflow.dsl as ef\n"
        "from estflow.pipelines.examples import taxi\n"
        "pipeline = dataclasses.replace(\n"
        "    taxi.pipeline, source=ef.CsvSource('sample.csv'),\n"
        "    train=ef.TrainSpec(max_steps=200, batch_size=64),\n"
        "    run_config=ef.RunConfig(save_checkpoints_steps=100, log_step_count_steps=100),\n"
        "    push=ef.PushTarget('serving', 'taxi'),\n"
        f"    model=dataclasses.replace(taxi.pipeline.model, dnn_hidden_units={hidden!r}))\n")
    return path


@pytest.fixture
def warm(monkeypatch):
    """Runs leave warm processes (ESTFLOW_WARM); none is left after the test."""
    monkeypatch.setenv("ESTFLOW_WARM", "300")
    yield
    _warm.stop_warm()


# every step reused but push, which always runs (and publishes nothing already served)
REUSED = {"ingest": "reused", "transform": "reused", "train": "reused", "evaluate": "reused",
          "push": "ran"}


def _versions(model: Path) -> list[Path]:
    """The version directories pushed under ``model`` (push's own files aside)."""
    return sorted(p for p in model.iterdir() if p.name.isdigit())


def _statuses(record: runs.RunRecord) -> dict[str, str]:
    return {name: step["status"] for name, step in record.data["steps"].items()}


@pytest.mark.slow
def test_reruns_reuse_the_real_steps_and_push_only_new_models(tmp_path, monkeypatch, capsys,
                                                              warm):
    monkeypatch.chdir(tmp_path)  # the relative push target resolves here
    with open(DATA) as src, open(tmp_path / "sample.csv", "w") as dst:
        dst.writelines(itertools.islice(src, 2001))
    base = _pipeline(tmp_path, "base", (32, 16))

    assert cli.main(["run", str(base)]) == 0
    capsys.readouterr()
    (first,) = runs.all_runs()
    versions = _versions(tmp_path / "serving" / "taxi")
    assert len(versions) == 1
    lineage = json.loads((versions[0] / Files.LINEAGE).read_text())
    assert lineage["run"] == str(first.run_dir)
    assert lineage["fingerprint"] == first.data["steps"]["train"]["outputs"]["model"][
        "fingerprint"]

    assert cli.main(["run", str(base)]) == 0
    out = capsys.readouterr().out
    second = runs.all_runs()[-1]
    if second.data["estflow_code"] != first.data["estflow_code"]:  # a shared checkout
        pytest.skip("estflow's step code was edited during the test: its steps ran again, as "
                    "they should")
    assert _statuses(second) == REUSED
    assert "already serves this model" in out and second.data["push"]["already_served"]
    assert len(_versions(tmp_path / "serving" / "taxi")) == 1

    # the warm processes the first run left (train, evaluate) have imported: a user's edit
    # takes longer than that
    spawned = [path for path, _ in _warm._SPAWNED]  # noqa: SLF001
    assert len(spawned) == 2
    deadline = time.monotonic() + 120
    while not all(path.exists() for path in spawned):
        assert time.monotonic() < deadline, "the warm processes did not get ready"
        time.sleep(0.1)
    wider = _pipeline(tmp_path, "wider", (48, 24))
    assert cli.main(["run", str(wider)]) == 0
    third = runs.all_runs()[-1]
    assert _statuses(third) == {**REUSED, "train": "ran", "evaluate": "ran"}
    assert third.data["push"]["pushed"]
    # the first run left warm train and evaluate processes; this run's steps ran in them
    for step in ("train", "evaluate"):
        assert (third.run_dir / step / "log.txt").read_text().startswith(
            "[estflow] warm process"), step
    assert len(_versions(tmp_path / "serving" / "taxi")) == 2
    baseline = json.loads(
        (Path(third.data["steps"]["evaluate"]["outputs"]["evaluation"]["path"]) /
         Files.BLESSING).read_text())["baseline"]
    # the same eval rows: the served version's outputs, stored with it at its push, are read
    assert baseline["version"] == int(versions[0].name) and baseline["outputs"] == "stored"
    assert baseline["metrics"]["auc"] == first.data["metrics"]["auc"]
    # train.json's paths hold in the cache entry the model artifact ended in
    model = Path(third.data["steps"]["train"]["outputs"]["model"]["path"])
    trained = json.loads((model / Files.TRAIN_RESULT).read_text())
    assert (model / f"{trained['checkpoint']}.index").is_file()
    assert (model / trained["export_dir"] / "saved_model.pb").is_file()
    assert os.path.isdir(third.run_dir / "train" / "model" / Files.CHECKPOINTS)
    # the version it pushed records what it was evaluated against; the same run again finds
    # it served and reuses every step, its evaluation included (keyed by that baseline)
    (pushed,) = [v for v in _versions(tmp_path / "serving" / "taxi") if v != versions[0]]
    assert json.loads((pushed / Files.LINEAGE).read_text())["evaluated_against"] == {
        "version": int(versions[0].name), "fingerprint": lineage["fingerprint"]}
    assert cli.main(["run", str(wider)]) == 0
    fourth = runs.all_runs()[-1]
    assert _statuses(fourth) == REUSED
    assert fourth.data["push"]["already_served"]
