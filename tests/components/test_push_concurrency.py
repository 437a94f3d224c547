"""Pushes racing each other: a model is published once, however many runs push it at the same
time, and different models each get their own complete version.

Each push runs in its own process (``multiprocessing`` with ``spawn``: a fresh interpreter, as
a pipeline's push task is) through the step's entry point, ``push.main`` with the command line
the runner gives ``python -m estflow.components.push``; a start barrier makes them reach the
check of what is served together.
"""

import json
import multiprocessing
import os

import pytest

import estflow.dsl as ef
from estflow.components import push
from estflow.components.serve import registry as serve_registry

N = 8


def _pipeline(base_path):
    return ef.Pipeline(
        name="racetest", source=ef.CsvSource("unused.csv"),
        features=(ef.Numeric("fare", default=0.0),), label=ef.Label("big_tipper"),
        model=ef.LinearClassifier(feature_columns=("fare",)), train=ef.TrainSpec(max_steps=1),
        push=ef.PushTarget(base_path, "chicago_taxi"))


def _model(folder, payload):
    export = folder / "model" / "export"
    (export / "variables").mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(payload)
    (export / "variables" / "variables.data-00000-of-00001").write_bytes(payload * 100)
    (export / "variables" / "variables.index").write_bytes(b"index")
    evaluation = folder / "evaluation"
    evaluation.mkdir()
    (evaluation / "blessing.json").write_text(json.dumps(
        {"blessed": True, "reasons": ["PASS auc = 0.9 >= lower_bound 0.8"], "checks": [],
         "baseline": None, "thresholds": []}))
    (evaluation / "metrics.json").write_text(json.dumps({"head": "binary",
                                                         "metrics": {"auc": 0.9}}))


def _one_push(barrier, argv):
    from estflow.components import push as step  # a fresh interpreter (spawn)

    barrier.wait()
    os._exit(step.main(argv))


def _race(tmp_path, fingerprints):
    """Push run ``i``'s model with ``fingerprints[i]``, all at once; each run's push.json."""
    spec = tmp_path / "pipeline.json"
    spec.write_text(_pipeline("serving").to_json())
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(fingerprints))
    processes = []
    for i, fingerprint in enumerate(fingerprints):
        run = tmp_path / f"run{i}"
        _model(run, f"model-{fingerprint}".encode())
        argv = ["--spec", str(spec), "--model", f"run{i}/model", "--evaluation",
                f"run{i}/evaluation", "--pushed", f"run{i}/pushed",
                "--model-fingerprint", fingerprint, "--run", f"run{i}"]
        processes.append(context.Process(target=_one_push, args=(barrier, argv)))
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    assert [p.exitcode for p in processes] == [0] * len(fingerprints)
    return [json.loads((tmp_path / f"run{i}" / "pushed" / "push.json").read_text())
            for i in range(len(fingerprints))]


@pytest.mark.slow
def test_the_same_model_pushed_by_8_runs_at_once_is_published_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = _race(tmp_path, ["f" * 64] * N)
    published = [r for r in results if r["pushed"]]
    assert len(published) == 1, [r.get("version") for r in published]
    version = published[0]["version"]
    base = tmp_path / "serving" / "chicago_taxi"
    assert push.list_versions(base) == [version]
    # the lock file lies beside the versions; servers load integer directories only
    assert (base / ".estflow-push.lock").is_file()
    assert serve_registry._scan(tmp_path / "serving") == ({"chicago_taxi": {
        version: base / str(version)}}, {})
    others = [r for r in results if not r["pushed"]]
    assert len(others) == N - 1
    assert all(r["already_served"] and r["version"] == version for r in others)


@pytest.mark.slow
def test_8_different_models_pushed_at_once_each_get_a_complete_version(tmp_path,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    fingerprints = [f"{i:x}" * 64 for i in range(N)]
    results = _race(tmp_path, fingerprints)
    assert all(r["pushed"] for r in results)
    versions = sorted(r["version"] for r in results)
    assert len(set(versions)) == N
    base = tmp_path / "serving" / "chicago_taxi"
    assert push.list_versions(base) == versions
    for result in results:
        folder = base / str(result["version"])
        payload = f"model-{result['fingerprint']}".encode()
        assert (folder / "saved_model.pb").read_bytes() == payload
        assert (folder / "variables" / "variables.data-00000-of-00001").read_bytes() == \
            payload * 100
        assert (folder / "variables" / "variables.index").read_bytes() == b"index"
        lineage = json.loads((folder / "assets.extra" / "estflow_lineage.json").read_text())
        assert lineage["fingerprint"] == result["fingerprint"]
    assert not [p for p in base.iterdir() if p.name.startswith(".tmp-")]
