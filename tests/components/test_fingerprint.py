"""The fingerprint step and what it reads (components/fingerprint.py, _io/outside_facts.py,
_io/user_code.py, _io/lineage.py); push's "only what is new" and the lineage it writes; what a killed train step
leaves. No TensorFlow: sources and push targets are local files or fake bucket clients."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.components import fingerprint as fingerprint_step
from estflow.components import push
from estflow.components._io import leftovers
from estflow.components._io import lineage
from estflow.components._io import outside_facts as facts
from estflow.components._io import user_code
from estflow.dsl.contracts import Files
from estflow.dsl.refs import CallableRef
from estflow.pipelines.examples import taxi
from estflow.pipelines.plan import build_plan

# --- the source ---------------------------------------------------------------------------------

def test_local_files_are_fingerprinted_by_content(tmp_path):
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    (tmp_path / "b.csv").write_text("x,y\n3,4\n")
    source = ef.CsvSource("*.csv")
    first = facts.source_fingerprint(source, tmp_path)
    assert [Path(o["path"]).name for o in first["objects"]] == ["a.csv", "b.csv"]
    os.utime(tmp_path / "a.csv", (1, 1))  # touched, same bytes: same data
    assert facts.source_fingerprint(source, tmp_path)["digest"] == first["digest"]
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("a.csv", "b.csv"):
        (copy / name).write_bytes((tmp_path / name).read_bytes())
    assert facts.source_fingerprint(source, copy)["digest"] == first["digest"]  # what, not where
    (tmp_path / "b.csv").write_text("x,y\n3,5\n")
    assert facts.source_fingerprint(source, tmp_path)["digest"] != first["digest"]


class _Blob:
    def __init__(self, name, generation, etag, size):
        self.name, self.generation, self.etag, self.size = name, generation, etag, size

    def download_as_bytes(self):  # pragma: no cover - a fingerprint must never download
        raise AssertionError("the source was downloaded")


class _Storage:
    """A google.cloud.storage client's listing: metadata only."""

    def __init__(self, blobs):
        self.blobs, self.prefixes = blobs, []

    def list_blobs(self, bucket, prefix=None, delimiter=None, **_kw):  # retry, timeout
        self.prefixes.append((bucket, prefix))
        return [b for b in self.blobs if b.name.startswith(prefix or "")]


def test_bucket_objects_are_fingerprinted_by_generation_etag_and_size_without_download():
    blobs = [_Blob("trips/2026-11-23.csv", 11, "e1", 100),
             _Blob("trips/2026-11-24.csv", 12, "e2", 200), _Blob("trips/readme.txt", 13, "e3", 5)]
    client = _Storage(blobs)
    source = ef.CsvSource("gs://bucket/trips/*.csv")
    first = facts.source_fingerprint(source, "/unused", clients={"gs": client})
    assert client.prefixes == [("bucket", "trips/")]
    assert [(o["path"], o["generation"], o["etag"], o["size"]) for o in first["objects"]] == [
        ("gs://bucket/trips/2026-11-23.csv", 11, "e1", 100),
        ("gs://bucket/trips/2026-11-24.csv", 12, "e2", 200)]
    blobs[1].generation = 14  # the object was rewritten
    assert facts.source_fingerprint(source, "/", clients={"gs": client})["digest"] != \
        first["digest"]
    # KFP's local path for a bucket is read as the bucket
    mounted = facts.source_fingerprint(ef.CsvSource("/gcs/bucket/trips/*.csv"), "/",
                                       clients={"gs": client})
    assert [o["path"] for o in mounted["objects"]] == [o["path"] for o in first["objects"]]


class _S3:
    def __init__(self, contents):
        self.contents = contents

    def get_paginator(self, name):
        assert name == "list_objects_v2"
        return self

    def paginate(self, Bucket, Prefix):  # noqa: N803 (boto3's names)
        return [{"Contents": [c for c in self.contents if c["Key"].startswith(Prefix)]}]


def test_s3_objects_are_fingerprinted_by_etag_size_and_time():
    client = _S3([{"Key": "d/x.parquet", "ETag": '"a"', "Size": 3, "LastModified": "t1"}])
    found = facts.source_fingerprint(ef.ParquetSource("s3://b/d/*.parquet"), "/",
                                     clients={"s3": client})
    assert found["objects"] == [{"path": "s3://b/d/x.parquet", "etag": '"a"', "size": 3,
                                 "modified": "t1"}]


def test_a_bigquery_query_is_volatile():
    source = ef.BigQuerySource(query="SELECT 1")
    first, second = (facts.source_fingerprint(source, "/") for _ in range(2))
    assert first["volatile"] and first["digest"] != second["digest"]


# --- user code ----------------------------------------------------------------------------------

def test_a_function_s_code_is_its_source_and_the_helpers_it_uses(tmp_path):
    module = tmp_path / "user_pipeline.py"

    def write(helper_body: str, model: str) -> str:
        module.write_text(textwrap.dedent(f"""
            import math

            FACTOR = 0.2

            def helper(x):
                return {helper_body}

            def derive(columns):
                return {{"y": helper(columns["x"]) * FACTOR}}

            MODEL = {model!r}
        """))
        return user_code.code_fingerprint(CallableRef("user_pipeline", "derive",
                                                      file=str(module)))

    first = write("x + 1", "wide")
    assert write("x + 1", "deep") == first  # another definition of the file: unchanged
    assert write("x + 2", "deep") != first  # a helper it calls changed


def test_estflow_s_code_is_keyed_per_step_module():
    digests = facts.estflow_fingerprint(["estflow.components.push",
                                         "estflow.components.train"])
    assert set(digests["code"]) == {"estflow.components.push", "estflow.components.train"}
    assert len(set(digests["code"].values())) == 2



def test_the_readers_the_source_lookup_names_are_code_of_the_steps_that_read(monkeypatch):
    """The lookup imports its readers when first read (the fingerprint step imports no Beam);
    editing a reader must still rerun ingest and batch prediction."""
    read = []
    real = facts._read_module

    def recording(name):
        read.append(name)
        return real(name)

    monkeypatch.setattr(facts, "_read_module", recording)
    facts.estflow_fingerprint(["estflow.components.ingest", "estflow.components.predict"])
    readers = {f"estflow.components._sources.{m}" for m in
               ("csv_source", "parquet_reader", "tfrecord_reader", "bigquery_reader")}
    assert readers <= set(read)

# --- the served version and push ----------------------------------------------------------------

def _export(folder: Path) -> Path:
    export = folder / "model" / Files.EXPORT
    (export / "variables").mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(b"model")
    return export


def _evaluation(folder: Path) -> Path:
    evaluation = folder / "evaluation"
    evaluation.mkdir()
    (evaluation / Files.BLESSING).write_text(json.dumps({"blessed": True, "reasons": []}))
    (evaluation / Files.METRICS).write_text(json.dumps({"metrics": {"auc": 0.9}}))
    return evaluation


def test_push_records_what_the_model_was_evaluated_against(tmp_path):
    pipeline = dataclasses.replace(taxi.pipeline,
                                   push=ef.PushTarget(str(tmp_path / "serving"), "taxi"))
    _export(tmp_path)
    evaluation = _evaluation(tmp_path)
    (evaluation / Files.BLESSING).write_text(json.dumps({
        "blessed": True, "reasons": [],
        "baseline": {"version": 3, "path": "/m/3", "fingerprint": "fp-3", "metrics": {}}}))
    (tmp_path / "p").mkdir()
    done = push.run(pipeline, str(tmp_path / "model"), str(evaluation), str(tmp_path / "p"),
                    fingerprint="fp-4", run_ref="/runs/r2")
    recorded = json.loads((Path(done["path"]) / Files.LINEAGE).read_text())
    assert recorded["evaluated_against"] == {"version": 3, "fingerprint": "fp-3"}
    assert lineage.served(str(tmp_path / "serving"), "taxi")["evaluated_against"] == {
        "version": 3, "fingerprint": "fp-3"}


def test_push_records_lineage_and_does_not_push_the_served_model_again(tmp_path):
    pipeline = dataclasses.replace(taxi.pipeline,
                                   push=ef.PushTarget(str(tmp_path / "serving"), "taxi"))
    _export(tmp_path)
    evaluation = _evaluation(tmp_path)

    def run(fingerprint: str, out: str) -> dict:
        (tmp_path / out).mkdir()
        return push.run(pipeline, str(tmp_path / "model"), str(evaluation),
                        str(tmp_path / out), fingerprint=fingerprint, run_ref="/runs/r1")

    first = run("fp-1", "p1")
    version_dir = Path(first["path"])
    recorded = json.loads((version_dir / Files.LINEAGE).read_text())
    assert recorded["fingerprint"] == "fp-1" and recorded["run"] == "/runs/r1"
    assert recorded["metrics"] == {"auc": 0.9}
    assert not (tmp_path / "model" / Files.EXPORT / Files.LINEAGE).exists()  # artifact as made
    assert recorded["evaluated_against"] is None  # its evaluation had no baseline
    assert lineage.served(str(tmp_path / "serving"), "taxi") == {
        "version": first["version"], "path": str(version_dir), "fingerprint": "fp-1",
        "evaluated_against": None}

    again = run("fp-1", "p2")
    assert again["pushed"] is False and again["already_served"] is True
    assert again["version"] == first["version"]
    assert push.list_versions(tmp_path / "serving" / "taxi") == [first["version"]]
    assert json.loads((tmp_path / "p2" / Files.PUSH_RESULT).read_text()) == again

    new = run("fp-2", "p3")
    assert new["pushed"] and new["version"] > first["version"]


# The served version of a bucket, read without TensorFlow: tests/components/test_storage.py
# (against real emulators).


# --- the step -----------------------------------------------------------------------------------

def test_the_fingerprint_step_keys_every_step_without_tensorflow(tmp_path):
    pipeline = dataclasses.replace(taxi.pipeline,
                                   push=ef.PushTarget(str(tmp_path / "serving"), "taxi"))
    plan = build_plan(pipeline, source_root=str(Path(taxi.__file__).parent))
    spec = tmp_path / "pipeline.json"
    spec.write_text(pipeline.to_json())
    out = tmp_path / "fingerprints"
    code = ("import sys\nfrom estflow.components import fingerprint\n"
            "rc = fingerprint.main(sys.argv[1:])\n"
            "assert 'tensorflow' not in sys.modules and 'apache_beam' not in sys.modules\n"
            "sys.exit(rc)\n")
    done = subprocess.run([sys.executable, "-c", code,
                           *plan.fingerprint.argv(str(spec), {"fingerprints": str(out)})],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "[fingerprint" in done.stdout and "served: none" in done.stdout
    found = json.loads((out / Files.FINGERPRINTS).read_text())
    assert set(found["steps"]) == {"ingest", "transform", "train", "evaluate", "push"}
    assert found["source"]["objects"][0]["path"].endswith("data/chicago_taxi/data.csv")
    ingest = ef.Pipeline.from_json(found["steps"]["ingest"]["spec"])
    assert ingest.source == pipeline.source and ingest.push is None
    assert found["steps"]["push"]["inputs"]["model"] == \
        found["steps"]["train"]["outputs"]["model"]


def test_gather_reads_the_served_lineage(tmp_path):
    target = ef.PushTarget(str(tmp_path / "serving"), "taxi")
    version = tmp_path / "serving" / "taxi" / "3"
    (version / "assets.extra").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"")
    (version / Files.LINEAGE).write_text(json.dumps({"fingerprint": "abc"}))
    found = fingerprint_step.gather(dataclasses.replace(taxi.pipeline, push=target),
                                    str(Path(taxi.__file__).parent), [])
    assert found.served == {"version": 3, "path": str(version), "fingerprint": "abc",
                            "evaluated_against": None}


# --- leftovers ----------------------------------------------------------------------------------

def test_a_killed_train_step_s_temporary_exports_are_removed(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    for name in (f".export-new-{gone}", f".export-old-{gone}", f".export-new-{os.getpid()}",
                 "export", ".checkpoints-new-1"):
        (tmp_path / name).mkdir()
    removed = leftovers.clean_temporary_exports(tmp_path)
    assert sorted(p.name for p in removed) == [f".export-new-{gone}", f".export-old-{gone}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["export", f".export-new-{os.getpid()}", ".checkpoints-new-1"])


@pytest.mark.parametrize("path, url", [("/gcs/b/k.csv", "gs://b/k.csv"),
                                       ("/s3/b/k", "s3://b/k"), ("/data/k", "/data/k")])
def test_bucket_mounts_read_as_urls(path, url):
    assert facts.bucket_url(path) == url
