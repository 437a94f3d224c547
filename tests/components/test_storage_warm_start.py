"""Warm start from a version pushed to a bucket (``TrainSpec.warm_start`` with an ``s3://`` or
``gs://`` push target): the served version's checkpoint is downloaded and the next run starts
from it, with no tensorflow-io (TensorFlow alone has no filesystem for either scheme).

The stores are real emulators on 127.0.0.1 that each test starts and stops
(tests/components/object_store_emulators.py): moto's S3 server, named as KFP's MinIO setups
name it (``S3_ENDPOINT`` host:port, ``S3_USE_HTTPS=0``), and gcp-storage-emulator through
``STORAGE_EMULATOR_HOST``.
"""

from __future__ import annotations

import uuid

import pytest

import estflow.dsl as ef
from estflow.components._io import model_repo
from estflow.components._io import storage
from estflow.components.push import publish
from estflow.components.train import __main__ as train
from estflow.dsl.contracts import Files
from tests.components import _train_fixtures as fx
from tests.components import object_store_emulators as emulators

pytestmark = pytest.mark.slow

ENDPOINT_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_ENDPOINT", "S3_USE_HTTPS",
                 "S3_VERIFY_SSL", "AWS_PROFILE", "STORAGE_EMULATOR_HOST",
                 "GOOGLE_APPLICATION_CREDENTIALS")


def bucket_store(param: str, monkeypatch):
    """A fresh ``<scheme>://models/<random>`` prefix of an emulator the environment names
    (``param``: ``s3`` (AWS_ENDPOINT_URL_S3), ``s3-kfp`` (S3_ENDPOINT) or ``gs``)."""
    for name in ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    if param == "gs":
        pytest.importorskip("gcp_storage_emulator")  # the test extra (pyproject.toml)
        emulator, scheme = emulators.gcs_emulator(["models"]), "gs"
    else:
        emulator, scheme = emulators.moto_s3(["models"], style=param.partition("-")[2] or
                                             "aws"), "s3"
    with emulator as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield f"{scheme}://models/{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=["s3-kfp", "gs"])
def store(request, monkeypatch):
    yield from bucket_store(request.param, monkeypatch)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """A first run's export (its training checkpoint carried in assets.extra)."""
    transformed = fx.transformed(tmp_path_factory)
    root = tmp_path_factory.mktemp("first")
    # warm start declared: the export carries its checkpoint (nothing is served locally)
    result = train.run(_pipeline(root / "nothing-served", ef.WarmStart()), transformed,
                       root / "run1")
    return transformed, root / "run1" / Files.EXPORT, result


def _pipeline(base, warm_start=None):
    return fx.pipeline(train=ef.TrainSpec(max_steps=60, batch_size=16, shuffle_buffer=64,
                                          warm_start=warm_start),
                       push=ef.PushTarget(str(base), "m"))


def test_the_next_run_warm_starts_from_a_version_pushed_to_a_bucket(first_run, store,
                                                                    tmp_path):
    transformed, export, first = first_run
    pushed = publish.push_to(model_repo.destination_for(store, "m"), str(export), version=1)
    remote = f"{pushed.path}/{model_repo.SERVED_CHECKPOINT}/model.ckpt-60"
    lines = []
    result = train.run(_pipeline(store, ef.WarmStart()), transformed, tmp_path / "run2",
                       progress=lines.append)
    assert result["warm_start"] == {"version": 1, "path": pushed.path, "checkpoint": remote}
    assert f"warm start: from served version 1 ({remote})" in lines
    assert any(line.startswith("warm-started variables from ") for line in lines), lines
    # the first loop's loss continues from the served model's, not an untrained one's
    cold = train.run(_pipeline(store), transformed, tmp_path / "cold")
    assert abs(result["first_loss"] - first["final_loss"]) < abs(
        cold["first_loss"] - first["final_loss"])


def test_a_bucket_version_without_a_checkpoint_trains_from_scratch(first_run, store,
                                                                   tmp_path):
    transformed, export, _ = first_run
    pushed = publish.push_to(model_repo.destination_for(store, "m"), str(export), version=4)
    storage.delete_tree(f"{pushed.path}/{model_repo.SERVED_CHECKPOINT}")
    lines = []
    result = train.run(_pipeline(store, ef.WarmStart()), transformed, tmp_path / "run2",
                       progress=lines.append)
    assert result["warm_start"] == {"version": 4, "path": pushed.path,
                                    "reason": "no checkpoint in the served version"}
