"""Two runs of evaluate and push against a bucket, end to end, without tensorflow-io: the first
pushes to ``s3://`` (or ``gs://``), the second's evaluate reads its baseline from there (the
version's SavedModel, downloaded), its push publishes the next version with lineage, the
fingerprint step reads the served lineage and a source's objects from the bucket, and the
same model is not pushed twice.

The stores are real emulators on 127.0.0.1 that each test starts and stops
(``tests/components/object_store_emulators.py``): moto's S3 server, addressed as a MinIO
endpoint is (both ways a pod names it: ``AWS_ENDPOINT_URL_S3``, and KFP's ``S3_ENDPOINT``),
and gcp-storage-emulator through ``STORAGE_EMULATOR_HOST``. The steps run through their
command-line entry points with only those variables set, as in a pod.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

import pytest

import estflow.dsl as ef
from estflow.components import evaluate
from estflow.components import fingerprint as fingerprint_step
from estflow.components import push
from estflow.components._io import lineage
from estflow.components._io import outside_facts
from estflow.components._io import storage
from estflow.dsl.contracts import Files
from tests.components import _eval_fixtures as fx
from tests.components import object_store_emulators as emulators

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("object-store-e2e")
    fx.write_examples(root / "examples", fx.make_rows(400, seed=1))
    fx.good_model(root / "good" / "export")
    fx.random_model(root / "random" / "export")
    return root


@pytest.fixture(params=["s3", "s3-kfp", "gs"])
def bucket_env(request, monkeypatch):
    """(scheme, the pod's environment) of a fresh emulator with bucket ``models``."""
    if request.param == "gs":
        pytest.importorskip("gcp_storage_emulator")  # the test extra (pyproject.toml)
        store, scheme = emulators.gcs_emulator(["models"]), "gs"
    else:
        store = emulators.moto_s3(["models"], style="kfp" if request.param == "s3-kfp" else "aws")
        scheme = "s3"
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_ENDPOINT", "AWS_PROFILE",
                 "STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    with store as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield scheme, env


def _steps(data, folder, spec, model, fingerprint):
    """One run's evaluate and push, through their entry points; push.json's content."""
    evaluation, pushed = folder / "evaluation", folder / "pushed"
    assert evaluate.main(["--spec", str(spec), "--examples", str(data / "examples"),
                          "--model", str(data / model), "--evaluation", str(evaluation)]) == 0
    assert push.main(["--spec", str(spec), "--model", str(data / model), "--evaluation",
                      str(evaluation), "--pushed", str(pushed),
                      "--model-fingerprint", fingerprint]) == 0
    return json.loads((pushed / Files.PUSH_RESULT).read_text())


def test_two_runs_push_to_a_bucket_and_the_second_evaluates_against_the_first(
        data, tmp_path, bucket_env):
    scheme, _env = bucket_env
    base = f"{scheme}://models/{uuid.uuid4().hex[:8]}/serving"
    pipeline = fx.pipeline(None, thresholds=(ef.Threshold("auc", max_regression=0.0),))
    pipeline = _with_push(pipeline, base)
    spec = tmp_path / "pipeline.json"
    spec.write_text(pipeline.to_json())

    first = _steps(data, tmp_path / "run1", spec, "random", "fp-random")
    assert first["pushed"] is True and first["path"] == f"{base}/taxi/{first['version']}"
    served = lineage.served(base, "taxi")
    assert served == {"version": first["version"], "path": first["path"],
                      "fingerprint": "fp-random", "evaluated_against": None}
    # a version pushed by an older estflow carries no stored outputs: the second run must
    # load the baseline's SavedModel from the bucket to score it
    storage.delete(f"{first['path']}/{Files.SERVED_EVAL_OUTPUTS}")

    second = _steps(data, tmp_path / "run2", spec, "good", "fp-good")
    blessing = json.loads((tmp_path / "run2" / "evaluation" / "blessing.json").read_text())
    assert blessing["baseline"]["version"] == first["version"]
    assert blessing["baseline"]["path"] == first["path"]
    assert blessing["baseline"].get("error") is None, blessing["baseline"]
    assert blessing["baseline"]["outputs"] == "scored"
    assert 0.3 < blessing["baseline"]["metrics"]["auc"] < 0.7  # the random model's
    assert blessing["blessed"] is True
    assert second["pushed"] is True and second["version"] > first["version"]
    assert lineage.served(base, "taxi")["evaluated_against"] == {
        "version": first["version"], "fingerprint": "fp-random"}
    version = storage.list_files(second["path"])
    assert {"saved_model.pb", Files.LINEAGE, Files.SERVED_EVAL_OUTPUTS} <= {
        o.name for o in version}
    assert not [n for n in storage.list_dir(f"{base}/taxi") if n.startswith(".tmp-")]

    # the fingerprint step: the served lineage and a source's objects, from the bucket
    storage.write_bytes(f"{scheme}://models/data/trips.csv", b"fare,big_tipper\n1.0,0\n")
    facts = fingerprint_step.gather(pipeline, None, [])
    assert facts.served["version"] == second["version"]
    assert facts.served["fingerprint"] == "fp-good"
    source = outside_facts.source_fingerprint(ef.CsvSource(f"{scheme}://models/data/*.csv"),
                                              "/")
    assert [o["path"] for o in source["objects"]] == [f"{scheme}://models/data/trips.csv"]

    # the same model again: not pushed twice
    again = push.main(["--spec", str(spec), "--model", str(data / "good"), "--evaluation",
                       str(tmp_path / "run2" / "evaluation"), "--pushed",
                       str(tmp_path / "run3"), "--model-fingerprint", "fp-good"])
    assert again == 0
    result = json.loads((tmp_path / "run3" / Files.PUSH_RESULT).read_text())
    assert result["already_served"] is True and result["version"] == second["version"]


def _with_push(pipeline, base):
    return dataclasses.replace(pipeline, push=ef.PushTarget(base, "taxi"))
