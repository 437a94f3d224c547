"""The push guard on object stores (:class:`~estflow.components.push.guard.GcsClaims`,
:class:`~estflow.components.push.guard.S3Claims`): pushes racing each other in separate
processes publish a model once and give different models different versions.

No real bucket is reachable here: the claims go to small stores on 127.0.0.1 that each test
starts and stops (``tests/components/_fake_object_stores.py``: a fake of the Cloud Storage
JSON API calls used, and moto's S3 server), through the real google-cloud-storage and boto3
clients; the versions themselves are published to a local directory.
"""

import json
import multiprocessing
import os
import uuid

import pytest

from estflow.components._io import model_repo
from estflow.components.push import guard as push_guard
from estflow.components.push import publish
from tests.components import _fake_object_stores as stores

N = 8


@pytest.fixture(params=["gs", "s3"])
def store(request):
    """(scheme, endpoint, model base URL) of a claim store on 127.0.0.1; a fresh prefix in
    bucket ``models`` (moto keeps its buckets for the whole process)."""
    url = f"{request.param}://models/{uuid.uuid4().hex[:12]}/chicago_taxi"
    if request.param == "gs":
        pytest.importorskip("google.cloud.storage")
        with stores.FakeGcs() as gcs:
            yield "gs", gcs.endpoint, url
    else:
        pytest.importorskip("boto3")
        pytest.importorskip("moto")
        with stores.MotoS3() as s3:
            client = stores.s3_client(s3.endpoint)
            if "models" not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
                client.create_bucket(Bucket="models")
            yield "s3", s3.endpoint, url


def _guard(scheme, endpoint, url, destination):
    if scheme == "gs":
        return push_guard.GcsClaims(destination, url, stores.gcs_client(endpoint))
    return push_guard.S3Claims(destination, url, stores.s3_client(endpoint))


def _export(folder, payload):
    """An export as the push step stages it: with its lineage (fingerprint ``payload``)."""
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(payload)
    (folder / "variables" / "variables.data-00000-of-00001").write_bytes(payload * 100)
    (folder / "assets.extra").mkdir()
    (folder / "assets.extra" / "estflow_lineage.json").write_text(
        json.dumps({"fingerprint": payload.decode()}))
    return folder


def _one_push(barrier, store, base, export, fingerprint, out):
    destination = model_repo.LocalDestination(base)
    guard = _guard(*store, destination)
    barrier.wait()
    found = publish.publish_once(destination, export, fingerprint=fingerprint, guard=guard)
    if isinstance(found, publish.Published):
        found = {"pushed": True, "version": found.version}
    out.write_text(json.dumps(found))
    os._exit(0)


def _race(tmp_path, store, fingerprints):
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(fingerprints))
    processes = []
    for i, fingerprint in enumerate(fingerprints):
        export = _export(tmp_path / f"export{i}", fingerprint.encode())
        processes.append(context.Process(target=_one_push, args=(
            barrier, store, tmp_path / "serving" / "chicago_taxi", export, fingerprint,
            tmp_path / f"result{i}.json")))
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    assert [p.exitcode for p in processes] == [0] * len(fingerprints)
    return [json.loads((tmp_path / f"result{i}.json").read_text())
            for i in range(len(fingerprints))]


@pytest.mark.slow
def test_the_same_model_pushed_at_once_through_claims_is_published_once(tmp_path, store):
    results = _race(tmp_path, store, ["f" * 64] * N)
    published = [r for r in results if r.get("pushed")]
    assert len(published) == 1, results
    version = published[0]["version"]
    assert publish.list_versions(tmp_path / "serving" / "chicago_taxi") == [version]
    assert [r["version"] for r in results] == [version] * N  # the others name it
    assert sum(1 for r in results if r.get("fingerprint") == "f" * 64) == N - 1


@pytest.mark.slow
def test_different_models_pushed_at_once_through_claims_get_their_own_versions(tmp_path,
                                                                                 store):
    fingerprints = [f"{i:x}" * 64 for i in range(N)]
    results = _race(tmp_path, store, fingerprints)
    assert all(r.get("pushed") for r in results), results
    versions = [r["version"] for r in results]
    assert len(set(versions)) == N
    base = tmp_path / "serving" / "chicago_taxi"
    assert publish.list_versions(base) == sorted(versions)
    for version, fingerprint in zip(versions, fingerprints, strict=True):
        assert (base / str(version) / "saved_model.pb").read_bytes() == fingerprint.encode()
        assert (base / str(version) / "variables" /
                "variables.data-00000-of-00001").read_bytes() == fingerprint.encode() * 100


def test_a_failed_push_gives_its_claim_up_so_a_retry_publishes(tmp_path, store):
    destination = model_repo.LocalDestination(tmp_path / "serving" / "chicago_taxi")
    guard = _guard(*store, destination)
    with pytest.raises(OSError, match="no space"):
        with guard.claim("a" * 64):
            raise OSError("no space left on device")  # the copy failed
    retry = publish.publish_once(destination, _export(tmp_path / "e", b"a" * 64),
                                 fingerprint="a" * 64, guard=guard)
    assert isinstance(retry, publish.Published)
    again = publish.publish_once(destination, _export(tmp_path / "e2", b"a" * 64),
                                 fingerprint="a" * 64, guard=guard)
    assert again == {"version": retry.version, "path": retry.path, "fingerprint": "a" * 64,
                     "pending": False}


def test_a_model_pushed_again_after_another_one_is_published_again(tmp_path, store):
    destination = model_repo.LocalDestination(tmp_path / "serving" / "chicago_taxi")
    guard = _guard(*store, destination)
    first = publish.publish_once(destination, _export(tmp_path / "a1", b"a" * 64),
                                 fingerprint="a" * 64, guard=guard)
    second = publish.publish_once(destination, _export(tmp_path / "b", b"b" * 64),
                                  fingerprint="b" * 64, guard=guard)
    third = publish.publish_once(destination, _export(tmp_path / "a2", b"a" * 64),
                                 fingerprint="a" * 64, guard=guard)
    assert first.version < second.version < third.version  # A, B, then A again
    assert publish.list_versions(destination.path) == [first.version, second.version,
                                                        third.version]
