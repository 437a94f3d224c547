"""estflow's own object store access (components/_io/storage.py, bucket_repo.py): gs:// and
s3:// through google-cloud-storage and boto3, no TensorFlow, no tensorflow-io.

The stores are real emulators on 127.0.0.1 that each test starts and stops
(tests/components/object_store_emulators.py): moto's S3 server, named by ``AWS_ENDPOINT_URL_S3``
or by KFP's MinIO-style ``S3_ENDPOINT`` (host:port, path-style addressing), and
gcp-storage-emulator through ``STORAGE_EMULATOR_HOST``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid

import pytest

from estflow.components._io import lineage
from estflow.components._io import model_repo
from estflow.components._io import storage
from estflow.components.push import publish
from estflow.dsl.contracts import Files
from tests.components import object_store_emulators as emulators

_ENDPOINT_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_ENDPOINT", "S3_USE_HTTPS",
                  "S3_VERIFY_SSL", "AWS_PROFILE", "STORAGE_EMULATOR_HOST",
                  "GOOGLE_APPLICATION_CREDENTIALS")


@pytest.fixture(params=["s3", "s3-kfp", "gs"])
def store(request, monkeypatch):
    """A fresh prefix URI in bucket ``models`` of an emulator the environment names."""
    for name in _ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    if request.param == "gs":
        pytest.importorskip("gcp_storage_emulator")  # the test extra (pyproject.toml)
        emulator, scheme = emulators.gcs_emulator(["models"]), "gs"
    else:
        emulator = emulators.moto_s3(["models"],
                                     style="kfp" if request.param == "s3-kfp" else "aws")
        scheme = "s3"
    with emulator as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield f"{scheme}://models/{uuid.uuid4().hex[:8]}"


def _export(folder, payload=b"model"):
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(payload)
    (folder / "variables" / "variables.data-00000-of-00001").write_bytes(payload * 100)
    (folder / "assets.extra").mkdir()
    (folder / "assets.extra" / "estflow_lineage.json").write_text(
        json.dumps({"fingerprint": payload.decode()}))
    return folder


def test_objects_are_written_read_listed_copied_down_and_deleted(store, tmp_path):
    storage.write_bytes(f"{store}/a/1.txt", b"one")
    storage.write_bytes(f"{store}/a/sub/2.txt", b"two!")
    assert storage.read_bytes(f"{store}/a/1.txt") == b"one"
    assert storage.exists(f"{store}/a/1.txt") and not storage.exists(f"{store}/a")
    assert storage.list_dir(store) == ["a"]
    assert storage.list_dir(f"{store}/a") == ["1.txt", "sub"]
    assert [(o.name, o.size) for o in storage.list_files(f"{store}/a")] == [
        ("1.txt", 3), ("sub/2.txt", 4)]
    with storage.local_copy(f"{store}/a") as local:
        assert (local / "sub" / "2.txt").read_bytes() == b"two!"
    storage.delete_tree(f"{store}/a")
    assert storage.list_files(store) == [] and storage.list_dir(store) == []
    with pytest.raises(FileNotFoundError, match=f"{store}/a/1.txt: no such object"):
        storage.read_bytes(f"{store}/a/1.txt")
    with pytest.raises(FileNotFoundError, match="no objects below it"):
        storage.materialize(f"{store}/a")


def test_a_bucket_destination_publishes_whole_versions_and_never_overwrites(store, tmp_path):
    destination = model_repo.destination_for(store, "taxi")
    first = publish.push_to(destination, _export(tmp_path / "e1"), version=3)
    assert first.path == f"{store}/taxi/3"
    second = publish.push_to(destination, _export(tmp_path / "e2", b"next"))
    assert destination.list_versions() == [3, second.version]
    assert storage.read_bytes(f"{second.path}/saved_model.pb") == b"next"
    assert not [n for n in storage.list_dir(f"{store}/taxi") if n.startswith(".tmp-")]
    with pytest.raises(FileExistsError, match="version 3 already exists"):
        publish.push_to(destination, _export(tmp_path / "e3"), version=3)
    third = publish.push_to(destination, _export(tmp_path / "e4", b"third"), keep_versions=2)
    assert destination.list_versions() == [second.version, third.version]
    assert third.removed == (3,)
    served = lineage.served(store, "taxi")
    assert served == {"version": third.version, "path": third.path, "fingerprint": "third",
                      "evaluated_against": None}


def test_an_incomplete_version_is_not_served_and_stale_staging_is_cleaned(store, tmp_path):
    destination = model_repo.destination_for(store, "taxi")
    publish.push_to(destination, _export(tmp_path / "e1"), version=1)
    storage.write_bytes(f"{store}/taxi/2/variables/x", b"half a push")
    storage.write_bytes(f"{store}/taxi/.tmp-3-abc/saved_model.pb", b"killed push")
    assert destination.list_versions() == [1, 2]
    assert model_repo.latest_servable(destination) == 1
    assert lineage.served(store, "taxi")["version"] == 1
    assert destination.clean_staging(3600) == []  # fresh: a push may still be copying
    assert destination.clean_staging(-1) == [f"{store}/taxi/.tmp-3-abc"]
    assert storage.list_dir(f"{store}/taxi") == ["1", "2"]


def test_the_push_guard_claims_versions_in_the_bucket(store, tmp_path):
    destination = model_repo.destination_for(store, "taxi")
    first = publish.publish_once(destination, _export(tmp_path / "e1", b"fp1"),
                                 fingerprint="fp1")
    assert isinstance(first, publish.Published)
    again = publish.publish_once(destination, _export(tmp_path / "e2", b"fp1"),
                                 fingerprint="fp1")
    assert again == {"version": first.version, "path": first.path, "fingerprint": "fp1",
                     "pending": False}
    claims = storage.list_dir(f"{store}/taxi/.estflow-push")
    assert claims == ["after-0.json"]


_NO_TF = textwrap.dedent("""
    import sys
    from estflow.components._io import lineage, storage
    from estflow.components.push import publish
    from estflow.components._io import model_repo
    destination = model_repo.destination_for(sys.argv[1], "taxi")
    publish.publish_once(destination, sys.argv[2], fingerprint="fp")
    print(lineage.served(sys.argv[1], "taxi")["fingerprint"])
    assert "tensorflow" not in sys.modules, "TensorFlow was imported"
""")


def test_push_and_lineage_of_a_bucket_need_no_tensorflow(store, tmp_path):
    export = _export(tmp_path / "e1", b"fp")
    out = subprocess.run([sys.executable, "-c", _NO_TF, store, str(export)], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "fp"


def test_errors_name_the_uri_the_operation_and_a_missing_bucket(store):
    missing = store.replace("://models/", "://no-such-bucket/")
    with pytest.raises(storage.StorageError, match=r"cannot list .*no-such-bucket.*: no "
                                                   r"bucket 'no-such-bucket'"):
        model_repo.destination_for(missing, "taxi").list_versions()
    with pytest.raises(storage.StorageError, match=r"cannot write .*no-such-bucket/.*/x: no bucket"):
        storage.write_bytes(f"{missing}/x", b"")


def test_an_unreachable_endpoint_is_an_error_not_a_hang(monkeypatch):
    """Port 9 on loopback: nothing listens (connection refused), retried a few times."""
    for name in _ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3_ENDPOINT", "127.0.0.1:9")
    monkeypatch.setenv("S3_USE_HTTPS", "0")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    with pytest.raises(storage.StorageError, match=r"cannot read s3://b/m/1/x: the endpoint "
                                                   r"http://127.0.0.1:9 is unreachable"):
        storage.read_bytes("s3://b/m/1/x")


def test_missing_s3_credentials_are_named(monkeypatch, tmp_path):
    for name in (*_ENDPOINT_VARS, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role here
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    with pytest.raises(storage.StorageError, match=r"cannot list s3://b/m: no credentials: "
                                                   r"set AWS_ACCESS_KEY_ID"):
        storage.list_dir("s3://b/m")


def test_the_s3_endpoint_follows_the_variables_a_pod_sets(monkeypatch):
    for name in _ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    assert storage.s3_endpoint() is None
    monkeypatch.setenv("S3_ENDPOINT", "minio-service.kubeflow:9000")
    assert storage.s3_endpoint() == "https://minio-service.kubeflow:9000"
    monkeypatch.setenv("S3_USE_HTTPS", "0")
    assert storage.s3_endpoint() == "http://minio-service.kubeflow:9000"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://seaweedfs:8333")
    assert storage.s3_endpoint() == "http://seaweedfs:8333"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://minio:9000")
    assert storage.s3_endpoint() == "http://minio:9000"
    client = storage.s3_client()
    assert client.meta.endpoint_url == "http://minio:9000"
    assert client.meta.config.s3["addressing_style"] == "path"  # MinIO: bucket in the path


def test_a_stored_lineage_file_of_a_version_reads_from_the_bucket(store, tmp_path):
    destination = model_repo.destination_for(store, "taxi")
    published = publish.push_to(destination, _export(tmp_path / "e1", b"fp9"))
    assert lineage.read_lineage(published.path) == {"fingerprint": "fp9"}
    assert model_repo.read_file(f"{published.path}/{Files.LINEAGE}") == b'{"fingerprint": "fp9"}'
