"""A TFJob's ``cluster.shared_dir`` in a bucket (``gs://``, ``s3://``): the job's inputs are
staged there and its model copied back through estflow's storage module (TensorFlow has no
filesystem for either scheme without tensorflow-io).

The stores are real emulators on 127.0.0.1 that each test starts and stops
(tests/components/object_store_emulators.py): moto's S3 server (KFP's ``S3_ENDPOINT``) and
gcp-storage-emulator (``STORAGE_EMULATOR_HOST``).
"""

from __future__ import annotations

import pytest

from estflow.components._io import storage
from estflow.components.tfjob import staging
from tests.components.test_storage_warm_start import bucket_store


@pytest.fixture(params=["s3-kfp", "gs"])
def store(request, monkeypatch):
    yield from bucket_store(request.param, monkeypatch)


def test_inputs_are_staged_to_a_bucket_and_the_model_copied_back(store, tmp_path):
    inputs = tmp_path / "transformed"
    (inputs / "train").mkdir(parents=True)
    (inputs / "train" / "part-0.tfrecord.gz").write_bytes(b"\x1f\x8b records")
    (inputs / "schema.json").write_text("{}")
    shared = f"{store}/shared/run-1"
    staging.copytree(str(inputs), f"{shared}/transformed")
    staging.write_text(f"{shared}/pipeline.json", '{"name": "taxi"}')
    assert [o.name for o in storage.list_files(shared)] == [
        "pipeline.json", "transformed/schema.json", "transformed/train/part-0.tfrecord.gz"]
    assert storage.read_bytes(f"{shared}/pipeline.json") == b'{"name": "taxi"}'

    storage.write_bytes(f"{shared}/model/export/saved_model.pb", b"pb")
    storage.write_bytes(f"{shared}/model/checkpoints/checkpoint", b"state")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "kept.txt").write_text("already here")
    staging.copytree(f"{shared}/model", str(tmp_path / "model"))
    assert (tmp_path / "model" / "export" / "saved_model.pb").read_bytes() == b"pb"
    assert (tmp_path / "model" / "checkpoints" / "checkpoint").read_bytes() == b"state"
    assert (tmp_path / "model" / "kept.txt").read_text() == "already here"


def test_a_missing_shared_directory_is_a_clear_error(store, tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{store}/shared/none: no objects below it"):
        staging.copytree(f"{store}/shared/none", str(tmp_path / "model"))
