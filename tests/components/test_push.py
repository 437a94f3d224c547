"""Push publishes whole, blessed versions only, never overwrites, keeps the newest N; the
local and tf.io.gfile destinations; the KServe manifest."""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

import estflow.dsl as ef
from estflow.components import push
from estflow.components._io import model_repo
from estflow.components.push import publish
from estflow.components.serve import __main__ as serve
from estflow.dsl import serialization
from estflow.pipelines.local import runner as local_runner
from tests.components import _serving_fixtures as serving_fx


def _export(tmp_path, payload=b"model"):
    export = tmp_path / "export"
    (export / "variables").mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(payload)
    (export / "variables" / "variables.data-00000-of-00001").write_bytes(b"x" * 1000)
    return export


def test_push_creates_increasing_integer_versions(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "serving" / "taxi"
    first = push.push_directory(export, base)
    second = push.push_directory(export, base)
    assert int(second.name) > int(first.name)
    assert push.list_versions(base) == [int(first.name), int(second.name)]
    assert (second / "saved_model.pb").read_bytes() == b"model"
    assert not [p for p in base.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_push_never_overwrites_a_version(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "serving" / "taxi"
    push.push_directory(export, base, version=7)
    with pytest.raises(FileExistsError, match="version 7 already exists"):
        push.push_directory(_export(tmp_path / "other", b"new"), base, version=7)
    assert (base / "7" / "saved_model.pb").read_bytes() == b"model"


def test_keep_versions_prunes_oldest(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "m"
    for v in (1, 2, 3, 4):
        push.push_directory(export, base, version=v, keep_versions=2)
    assert push.list_versions(base) == [3, 4]


def test_missing_saved_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="saved_model.pb is missing"):
        push.push_directory(tmp_path, tmp_path / "m")


def _modes(root):
    return {str(p.relative_to(root)): p.stat().st_mode & 0o777
            for p in [root, *sorted(root.rglob("*"))]}


@pytest.mark.parametrize("umask, directories, files", [(0o022, 0o755, 0o644),
                                                        (0o027, 0o750, 0o640),
                                                        (0o077, 0o700, 0o600)])
def test_pushed_versions_follow_the_umask(tmp_path, umask, directories, files):
    """The train step's export is private (its temporary directory is 0700), and a server
    running as another user must still read the pushed version when the umask allows it."""
    export = _export(tmp_path)
    for path in [export, *export.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    old = os.umask(umask)
    try:
        version = push.push_directory(export, tmp_path / "serving" / "taxi", version=1)
    finally:
        os.umask(old)
    assert _modes(version) == {".": directories, "saved_model.pb": files,
                               "variables": directories,
                               "variables/variables.data-00000-of-00001": files}


def test_concurrent_pushes_take_the_next_version(tmp_path, monkeypatch):
    """Pushes in the same second (here: 8 at once, the clock stopped) all succeed, each with its
    own version."""
    monkeypatch.setattr(publish.time, "time", lambda: 1_700_000_000.0)
    export = _export(tmp_path)
    base = tmp_path / "serving" / "taxi"
    barrier = threading.Barrier(8)
    results, errors = [], []

    def one_push():
        barrier.wait()
        try:
            results.append(push.push_directory(export, base))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one_push) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(int(p.name) for p in results) == list(range(1_700_000_000, 1_700_000_008))
    assert push.list_versions(base) == list(range(1_700_000_000, 1_700_000_008))
    assert not [p for p in base.iterdir() if p.name.startswith(".")]


class _StaleListing(model_repo.LocalDestination):
    """Lists versions as they were before another push published ``taken``."""

    def __init__(self, path, taken):
        super().__init__(path)
        self.taken = taken

    def list_versions(self):
        return [v for v in super().list_versions() if v not in self.taken]


def test_a_push_that_loses_the_race_for_a_version_takes_the_next_one(tmp_path, monkeypatch):
    monkeypatch.setattr(publish.time, "time", lambda: 100.0)
    export = _export(tmp_path)
    base = tmp_path / "taxi"
    push.push_directory(export, base, version=100)
    push.push_directory(export, base, version=101)
    published = push.push_to(_StaleListing(base, {100, 101}), export)
    assert published.version == 102 and published.path == str(base / "102")
    assert push.list_versions(base) == [100, 101, 102]
    assert not [p for p in base.iterdir() if p.name.startswith(".")]
    ram = model_repo.destination_for(_ram_base(), "taxi")
    push.push_to(ram, export, version=100)
    ram.list_versions = lambda: []
    assert push.push_to(ram, export).version == 101


def test_an_explicit_version_that_is_taken_is_still_a_clear_error(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "taxi"
    push.push_directory(export, base, version=5)
    with pytest.raises(FileExistsError, match="version 5 already exists"):
        push.push_to(_StaleListing(base, {5}), export, version=5)


class MemoryDestination:
    """An in-memory PushDestination: version -> files."""

    def __init__(self, versions=()):
        self.model_base = "mem://models/taxi"
        self.versions = {v: {"saved_model.pb": b"old"} for v in versions}

    def list_versions(self):
        return sorted(self.versions)

    def is_complete(self, version):
        return "saved_model.pb" in self.versions[version]

    def publish(self, export_dir, version, *, take_next=False):
        while take_next and version in self.versions:
            version += 1
        if version in self.versions:
            raise FileExistsError(f"version {version} already exists")
        self.versions[version] = {"saved_model.pb": export_dir.encode()}
        return f"{self.model_base}/{version}"

    def remove_version(self, version):
        del self.versions[version]

    def clean_staging(self, older_than_seconds):
        return []


def test_push_to_picks_a_growing_version_and_prunes_but_never_the_new_one():
    future = int(time.time()) + 10_000
    destination = MemoryDestination([3, future])
    published = push.push_to(destination, "/export", keep_versions=1)
    assert published.version == future + 1
    assert published.removed == (3, future)
    assert destination.list_versions() == [future + 1]
    with pytest.raises(FileExistsError, match=f"version {future + 1} already exists"):
        push.push_to(destination, "/other", version=future + 1)


def test_latest_servable_skips_incomplete_versions():
    destination = MemoryDestination([1, 2])
    destination.versions[3] = {"variables/v": b""}
    assert model_repo.latest_servable(destination) == 2
    assert model_repo.latest_servable(MemoryDestination()) is None


# --- tf.io.gfile destination, against TF's in-process ram:// filesystem (an object store
# analogue: flat names, directory renames do not carry files) and a local path.

def _ram_base():
    return f"ram://push-{uuid.uuid4().hex[:8]}/models"


def test_gfile_destination_publishes_verified_versions_on_ram(tmp_path):
    destination = model_repo.destination_for(_ram_base(), "taxi")
    assert isinstance(destination, model_repo.GFileDestination)
    export = _export(tmp_path)
    first = push.push_to(destination, export, version=1)
    second = push.push_to(destination, export, version=2, keep_versions=1)
    gfile = destination._gfile
    assert first.path == f"{destination.model_base}/1"
    assert destination.list_versions() == [2] and second.removed == (1,)
    assert destination.is_complete(2)
    with gfile.GFile(f"{second.path}/variables/variables.data-00000-of-00001", "rb") as f:
        assert f.read() == b"x" * 1000
    assert gfile.listdir(destination.model_base) == ["2"]  # no staging left
    with pytest.raises(FileExistsError, match="version 2 already exists"):
        push.push_to(destination, export, version=2)


def test_gfile_destination_renames_saved_model_last(tmp_path):
    destination = model_repo.destination_for(_ram_base(), "taxi")
    renames = []
    real = destination._gfile

    class Recording:
        def __getattr__(self, name):
            return getattr(real, name)

        def rename(self, src, dst, overwrite=False):
            renames.append(dst.rsplit("/1/", 1)[1])
            return real.rename(src, dst, overwrite)

    destination._gfile = Recording()
    (_export(tmp_path) / "assets").mkdir()
    (tmp_path / "export" / "assets" / "vocab.txt").write_text("a\nb\n")
    push.push_to(destination, tmp_path / "export", version=1)
    assert renames[-1] == "saved_model.pb"
    assert sorted(renames) == ["assets/vocab.txt", "saved_model.pb",
                               "variables/variables.data-00000-of-00001"]


def test_gfile_destination_cleans_only_stale_staging_on_a_local_path(tmp_path):
    destination = model_repo.GFileDestination(str(tmp_path / "taxi"))
    stale, fresh = tmp_path / "taxi" / ".tmp-5-aaaa", tmp_path / "taxi" / ".tmp-6-bbbb"
    for folder in (stale, fresh):
        (folder / "variables").mkdir(parents=True)
        (folder / "variables" / "v").write_bytes(b"x")
    two_hours_ago = time.time() - 7200
    os.utime(stale / "variables" / "v", (two_hours_ago, two_hours_ago))
    assert destination.clean_staging(3600) == [str(stale)]
    assert not stale.exists() and fresh.exists()


def test_gfile_destination_never_deletes_staging_of_unknown_age_on_ram(tmp_path):
    destination = model_repo.destination_for(_ram_base(), "taxi")
    staging = f"{destination.model_base}/.tmp-3-cccc"
    destination._gfile.makedirs(staging)
    with destination._gfile.GFile(f"{staging}/saved_model.pb", "wb") as f:
        f.write(b"x")
    assert destination.clean_staging(0) == []  # ram:// keeps no modification times


def test_local_destination_cleans_only_stale_staging(tmp_path):
    destination = model_repo.LocalDestination(tmp_path / "taxi")
    stale, fresh = tmp_path / "taxi" / ".tmp-5-aaaa", tmp_path / "taxi" / ".tmp-6-bbbb"
    for folder in (stale, fresh):
        folder.mkdir(parents=True)
        (folder / "saved_model.pb").write_bytes(b"x")
    old = time.time() - 7200
    os.utime(stale / "saved_model.pb", (old, old))
    os.utime(stale, (old, old))
    assert destination.clean_staging(3600) == [str(stale)]
    assert fresh.exists()


def test_destination_for_schemes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    local = model_repo.destination_for("serving", "taxi")
    assert isinstance(local, model_repo.LocalDestination)
    assert local.model_base == str(tmp_path / "serving" / "taxi")
    assert model_repo.destination_for(f"file://{tmp_path}", "taxi").model_base == \
        str(tmp_path / "taxi")
    # buckets go through their clients, not tf.io.gfile (no tensorflow-io for this TF)
    for base in ("s3://bucket/models", "gs://bucket/models"):
        bucket = model_repo.destination_for(base, "taxi")
        assert type(bucket).__name__ == "BucketDestination"
        assert bucket.model_base == f"{base}/taxi"
    with pytest.raises(ValueError, match=r"no filesystem is registered for hdfs://"):
        model_repo.destination_for("hdfs://namenode/models", "taxi")


# --- the push step

def _pipeline(base_path, **push_args):
    return ef.Pipeline(
        name="pushtest", source=ef.CsvSource("unused.csv"),
        features=(ef.Numeric("fare", default=0.0),), label=ef.Label("big_tipper"),
        model=ef.LinearClassifier(feature_columns=("fare",)), train=ef.TrainSpec(max_steps=1),
        push=ef.PushTarget(str(base_path), "chicago_taxi", **push_args))


def _evaluation(tmp_path, blessed, reasons=("PASS auc = 0.9 >= lower_bound 0.8",)):
    folder = tmp_path / "evaluation"
    folder.mkdir(exist_ok=True)
    checks = [{"metric": "auc", "condition": "lower_bound", "passed": r.startswith("PASS"),
               "reason": r} for r in reasons]
    (folder / "blessing.json").write_text(json.dumps(
        {"blessed": blessed, "reasons": list(reasons), "checks": checks, "baseline": None,
         "thresholds": []}))
    (folder / "metrics.json").write_text(json.dumps({"head": "binary", "metrics": {"auc": 0.9}}))
    return folder


def test_a_model_that_is_not_blessed_is_not_pushed(tmp_path, capsys):
    _export(tmp_path / "model")
    evaluation = _evaluation(tmp_path, False, ("PASS loss = 0.4 <= upper_bound 0.5",
                                               "FAIL auc = 0.61 < lower_bound 0.8"))
    result = push.run(_pipeline(tmp_path / "serving"), str(tmp_path / "model"),
                      str(evaluation), str(tmp_path / "pushed"))
    assert result == {"pushed": False, "model_name": "chicago_taxi",
                      "reasons": ["FAIL auc = 0.61 < lower_bound 0.8"]}
    assert json.loads((tmp_path / "pushed" / "push.json").read_text()) == result
    assert "not pushed: the model is not blessed: FAIL auc = 0.61" in capsys.readouterr().out
    assert not (tmp_path / "serving").exists()


def test_no_blessing_file_means_no_push(tmp_path):
    _export(tmp_path / "model")
    (tmp_path / "evaluation").mkdir()
    with pytest.raises(FileNotFoundError, match="blessing.json.*is not pushed"):
        push.run(_pipeline(tmp_path / "serving"), str(tmp_path / "model"),
                 str(tmp_path / "evaluation"), str(tmp_path / "pushed"))


def test_a_blessed_model_is_pushed_with_a_kserve_manifest(tmp_path):
    yaml = pytest.importorskip("yaml")
    _export(tmp_path / "model")
    base = _ram_base()
    pipeline = _pipeline(base, keep_versions=2, kserve_manifest=True, kserve_namespace="ml",
                         kserve_runtime_version="2.19.1-gpu", kserve_service_account="kserve-s3")
    result = push.run(pipeline, str(tmp_path / "model"), str(_evaluation(tmp_path, True)),
                      str(tmp_path / "pushed"))
    assert result["pushed"] is True and result["model_base"] == f"{base}/chicago_taxi"
    assert result["path"] == f"{base}/chicago_taxi/{result['version']}"
    manifest = yaml.safe_load((tmp_path / "pushed" / "inferenceservice.yaml").read_text())
    assert manifest == {
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "chicago-taxi", "namespace": "ml",
                     "annotations": {"estflow/model-version": str(result["version"])}},
        "spec": {"predictor": {"serviceAccountName": "kserve-s3", "model": {
            "modelFormat": {"name": "tensorflow", "version": "2"},
            "runtimeVersion": "2.19.1-gpu", "args": ["--model_name=chicago_taxi"],
            # the pushed version alone (tests/components/test_kserve_rollout.py)
            "storageUri": f"{base}/chicago_taxi/kserve/{result['version']}-only"}}}}
    assert result["kserve_manifest"] == str(tmp_path / "pushed" / "inferenceservice.yaml")


def test_kserve_manifest_without_optional_fields(tmp_path):
    yaml = pytest.importorskip("yaml")
    target = ef.PushTarget("gs://bucket/models", "taxi", kserve_manifest=True)
    manifest = yaml.safe_load(push.kserve_manifest(target, "gs://bucket/models/taxi", 12))
    assert manifest["metadata"] == {"name": "taxi",
                                    "annotations": {"estflow/model-version": "12"}}
    # The TF Serving version is always set: KServe's default (2.6.2) cannot load a TF 2.21
    # export. Schema validation: tests/pipelines/test_kserve_manifest.py.
    assert manifest["spec"]["predictor"] == {"model": {
        "modelFormat": {"name": "tensorflow", "version": "2"},
        "runtimeVersion": "2.20.0", "storageUri": "gs://bucket/models/taxi",
        "args": ["--model_name=taxi"]}}


@pytest.mark.parametrize("name, expected", [("chicago_taxi", "chicago-taxi"), ("Taxi", "taxi")])
def test_kserve_name_is_a_dns_label(name, expected):
    assert push.kserve_name(name) == expected
    assert ef.PushTarget("m", name, kserve_manifest=True).kserve_name == expected


@pytest.mark.parametrize("name", ["_2model", "taxi_", "a" * 54])
def test_a_model_name_kserve_cannot_take_is_refused_not_mangled(name):
    """Was: '_2model' served as 'm-2model', 80 characters cut to 63 (too long for KServe)."""
    with pytest.raises(ef.DslError, match="model_name.*KServe accepts"):
        ef.PushTarget("m", name, kserve_manifest=True)
    ef.PushTarget("m", name)  # without KServe any identifier is a model name


def test_push_target_kserve_fields_validate_and_round_trip():
    target = ef.PushTarget("gs://b/m", "taxi", kserve_manifest=True, kserve_namespace="ml-prod",
                           kserve_runtime_version="2.14.1-gpu")
    assert serialization.from_json(serialization.to_json(target)) == target
    with pytest.raises(ef.DslError, match="kserve_namespace.*None unless kserve_manifest"):
        ef.PushTarget("m", "taxi", kserve_namespace="ml")
    with pytest.raises(ef.DslError, match="kserve_namespace.*Kubernetes namespace"):
        ef.PushTarget("m", "taxi", kserve_manifest=True, kserve_namespace="ML_prod")
    with pytest.raises(ef.DslError, match="kserve_runtime_version.*image tag"):
        ef.PushTarget("m", "taxi", kserve_manifest=True, kserve_runtime_version="2.6 gpu")
    with pytest.raises(ef.DslError, match="kserve_runtime_version.*2.12 or newer"):
        ef.PushTarget("m", "taxi", kserve_manifest=True, kserve_runtime_version="2.6.2")
    with pytest.raises(ef.DslError, match="kserve_manifest.*True or False"):
        ef.PushTarget("m", "taxi", kserve_manifest="yes")


def _run_result(tmp_path, pushed):
    artifacts = {}
    for name, files in {"evaluation": {"metrics.json": {"head": "binary",
                                                        "metrics": {"auc": 0.6}}},
                        "model": {"train.json": {"global_step": 10}},
                        "pushed": {"push.json": pushed}}.items():
        artifacts[name] = tmp_path / name
        artifacts[name].mkdir()
        for file, content in files.items():
            (artifacts[name] / file).write_text(json.dumps(content))
    return local_runner.RunResult(tmp_path, artifacts, {"push": 0.1})


def test_run_summary_says_the_model_was_not_pushed(tmp_path):
    lines = []
    local_runner._summary(_run_result(tmp_path, {
        "pushed": False, "model_name": "taxi",
        "reasons": ["FAIL auc = 0.6 < lower_bound 0.8"]}), 1.0, lines.append)
    assert "Model NOT pushed (not blessed): FAIL auc = 0.6 < lower_bound 0.8" in lines
    assert f"Evaluation report: {tmp_path / 'evaluation' / 'report.html'}" in lines


# --- killed pushes

# The files are copied, and the process is stuck in its first fsync when it gets SIGKILL:
# the staging directory exists on disk, the rename has not happened.
_SLOW_COPY = """
import os, sys, time
from pathlib import Path
from estflow.components import push
def slow_fsync(fd):
    print("copied", flush=True)
    time.sleep(30)
os.fsync = slow_fsync
push.push_directory(Path(sys.argv[1]), Path(sys.argv[2]), version=2)
"""


def _kill_after_first_line(code, *args):
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    return line


def test_push_killed_midway_leaves_no_visible_version(tmp_path):
    export = _export(tmp_path)
    base = tmp_path / "m"
    push.push_directory(export, base, version=1)
    assert _kill_after_first_line(_SLOW_COPY, export, base).startswith("copied")
    time.sleep(0.1)
    assert any(p.name.startswith(".tmp-") for p in base.iterdir())  # it did write files
    assert push.list_versions(base) == [1]  # the half-written version is invisible


def _served_version(server, name):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.request("GET", f"/v1/models/{name}")
    status = json.loads(conn.getresponse().read())["model_version_status"]
    conn.close()
    return [s["version"] for s in status if s["state"] == "AVAILABLE"]


def test_a_killed_push_leaves_the_server_on_the_previous_version(tmp_path):
    base = tmp_path / "serving"
    export = serving_fx.save_version(tmp_path / "export", 2)
    push.push_directory(serving_fx.save_version(tmp_path / "export1", 1), base / "taxi",
                        version=1)
    with serve.serve(base, poll_seconds=0.05) as server:
        assert _kill_after_first_line(_SLOW_COPY, export, base / "taxi").startswith("copied")
        time.sleep(0.3)  # several polls over the staging directory
        assert _served_version(server, "taxi") == ["1"]
        assert server.registry.status("taxi")[0]["state"] == "AVAILABLE"  # no failed load
    with serve.serve(base, poll_seconds=0) as restarted:  # a fresh server agrees
        assert _served_version(restarted, "taxi") == ["1"]


_SLOW_GFILE_COPY = """
import sys, time
import tensorflow as tf
from estflow.components._io import model_repo
real_copy = tf.io.gfile.copy
def slow_copy(src, dst, overwrite=False):
    real_copy(src, dst, overwrite)
    print("copied", flush=True)
    time.sleep(30)
tf.io.gfile.copy = slow_copy
model_repo.GFileDestination(sys.argv[2]).publish(sys.argv[1], 2)
"""


@pytest.mark.slow
def test_a_gfile_push_killed_midway_leaves_no_visible_version(tmp_path):
    export = _export(tmp_path)
    destination = model_repo.GFileDestination(str(tmp_path / "m"))
    push.push_to(destination, export, version=1)
    assert _kill_after_first_line(_SLOW_GFILE_COPY, export, tmp_path / "m") == "copied\n"
    assert any(p.name.startswith(".tmp-2-") for p in (tmp_path / "m").iterdir())
    assert destination.list_versions() == [1]
