"""The CPU image reads and writes ``s3://`` and ``gs://`` itself, without tensorflow-io: inside
a container of it, estflow's step entry points push SavedModel versions to a bucket, score the
evaluation baseline from the bucket, and fingerprint a bucket source and the served lineage;
this host then reads the bucket with boto3 / google-cloud-storage and finds the version whole.

The stores are real emulators on this host's 127.0.0.1 that each test starts and stops
(``tests/components/object_store_emulators.py``): moto's S3 server, addressed as a MinIO
endpoint is (both ways a pod names it: ``AWS_ENDPOINT_URL_S3``, and KFP's ``S3_ENDPOINT``), and
gcp-storage-emulator through ``STORAGE_EMULATOR_HOST``. The containers run with
``--network host``: this Docker daemon runs without a bridge (``--bridge=none``), so sharing
the host's network namespace is the only way a container reaches the host's loopback. They
run as the image's user (uid 1000) with only the store's variables set, as in a pod.

The slim image is not run here: its tasks (report, ``<step>-placement``) read no store.

Also here: under ``kfp.local.DockerRunner`` an image whose ENTRYPOINT is Beam's worker boot (the
image ``make image IMAGE_BASE=hub`` builds) runs its task only with ``entrypoint=[]``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl.contracts import Files
from estflow.pipelines.plan import build_plan
from tests.components import object_store_emulators as emulators
from tests.pipelines import images_fixture

pytestmark = pytest.mark.slow

# ``make image`` once for this module (shared with test_images.py).
images = images_fixture.images

# In the image, one process (TensorFlow imported once): two runs' evaluate and push through the
# steps' entry points (the second scores the first's version as its baseline), then the
# fingerprint step's.
IN_IMAGE = textwrap.dedent("""
    import json
    import sys
    from estflow.components import evaluate, fingerprint, push
    from estflow.components._io import storage
    from estflow.dsl.contracts import Files
    work, fingerprint_argv = sys.argv[1], json.loads(sys.argv[2])
    spec = f"{work}/pipeline.json"
    for run, model in (("run1", "random"), ("run2", "good")):
        evaluation, pushed = f"{work}/{run}/evaluation", f"{work}/{run}/pushed"
        assert evaluate.main(["--spec", spec, "--examples", f"{work}/examples", "--model",
                              f"{work}/{model}", "--evaluation", evaluation]) == 0
        assert push.main(["--spec", spec, "--model", f"{work}/{model}", "--evaluation",
                          evaluation, "--pushed", pushed, "--model-fingerprint",
                          f"fp-{model}"]) == 0
        if run == "run1":  # as an older estflow pushed it: the baseline needs its SavedModel
            with open(f"{pushed}/{Files.PUSH_RESULT}") as f:
                storage.delete(json.load(f)["path"] + "/" + Files.SERVED_EVAL_OUTPUTS)
    sys.exit(fingerprint.main(fingerprint_argv))
""")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Raw eval examples and two SavedModels (a good one, a random one), made on this host."""
    from tests.components import _eval_fixtures as fx  # TensorFlow: only when the test runs

    root = tmp_path_factory.mktemp("models")
    fx.write_examples(root / "examples", fx.make_rows(400, seed=1))
    fx.good_model(root / "good" / Files.EXPORT)
    fx.random_model(root / "random" / Files.EXPORT)
    return root, fx.pipeline(None, thresholds=(ef.Threshold("auc", max_regression=0.0),))


@pytest.fixture(params=["s3", "s3-kfp", "gs"])
def store(request):
    """(scheme, the pod's environment) of a fresh emulator with bucket ``models``."""
    if request.param == "gs":
        pytest.importorskip("gcp_storage_emulator")  # the test extra (pyproject.toml)
        emulator, scheme = emulators.gcs_emulator(["models"]), "gs"
    else:
        style = "kfp" if request.param == "s3-kfp" else "aws"
        emulator, scheme = emulators.moto_s3(["models"], style=style), "s3"
    with emulator as env:
        yield scheme, env


def test_the_image_pushes_to_a_bucket_and_fingerprints_it(images, models, store, tmp_path):
    (data, pipeline), (scheme, env) = models, store
    base = f"{scheme}://models/{uuid.uuid4().hex[:8]}/serving"
    pipeline = dataclasses.replace(pipeline, source=ef.CsvSource(f"{scheme}://models/data/*.csv"),
                                   push=ef.PushTarget(base, "taxi"))
    work = _work_dir(tmp_path, data, pipeline)
    _put(scheme, env, "data/trips.csv", b"fare,big_tipper\n1.0,0\n")
    plan = build_plan(pipeline, source_root=str(work))
    argv = plan.fingerprint.argv(str(work / "pipeline.json"),
                                 {"fingerprints": str(work / "fingerprints")})
    done = _in_image(images[0], env, work, ["python3", "-c", IN_IMAGE, str(work), json.dumps(argv)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]

    first, second = (json.loads((work / run / "pushed" / Files.PUSH_RESULT).read_text())
                     for run in ("run1", "run2"))
    assert first["pushed"] and first["path"] == f"{base}/taxi/{first['version']}"
    blessing = json.loads((work / "run2" / "evaluation" / Files.BLESSING).read_text())
    baseline = blessing["baseline"]
    assert baseline.get("error") is None and baseline["outputs"] == "scored", baseline
    assert baseline["version"] == first["version"] and blessing["blessed"] is True
    assert second["pushed"] and second["version"] > first["version"]

    # the served lineage and the bucket source, as the fingerprint step read them in the image
    facts = json.loads((work / "fingerprints" / Files.FINGERPRINTS).read_text())
    assert facts["served"] == {"version": second["version"], "path": second["path"],
                               "fingerprint": "fp-good", "evaluated_against": {
                                   "version": first["version"], "fingerprint": "fp-random"}}
    assert [o["path"] for o in facts["source"]["objects"]] == [
        f"{scheme}://models/data/trips.csv"]

    # on this host, through the store's own client: the version holds the whole SavedModel
    key = second["path"].removeprefix(f"{scheme}://models/")
    landed = _objects(scheme, env, key)
    export = data / "good" / Files.EXPORT
    local = {p.relative_to(export).as_posix(): p.read_bytes()
             for p in export.rglob("*") if p.is_file()}
    assert {name: landed.get(name) for name in local} == local
    assert json.loads(landed[Files.LINEAGE])["fingerprint"] == "fp-good"
    assert Files.SERVED_EVAL_OUTPUTS in landed
    under_model = _objects(scheme, env, key.rsplit("/", 1)[0])
    assert not [name for name in under_model if name.startswith(".tmp-")]  # nothing half-done


def _work_dir(tmp_path: Path, data: Path, pipeline: ef.Pipeline) -> Path:
    """A folder the image's user (uid 1000) writes in, with the spec, examples and models."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("examples", "good", "random"):
        shutil.copytree(data / name, work / name)
    (work / "pipeline.json").write_text(pipeline.to_json())
    subprocess.run(["chmod", "-R", "a+rwX", str(work)], check=True)
    return work


def _in_image(image: str, env: dict[str, str], work: Path,
              command: list[str]) -> subprocess.CompletedProcess:
    """``command`` in a container of ``image``, as its user, on the host's network (the only
    way to the emulators on 127.0.0.1: the daemon has no bridge), ``work`` mounted."""
    variables = [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]
    return subprocess.run(["docker", "run", "--rm", "--network", "host", "-v",
                           f"{work}:{work}", *variables, image, *command],
                          capture_output=True, text=True, timeout=900)


def _endpoint(env: dict[str, str]) -> str:
    return env.get("AWS_ENDPOINT_URL_S3") or f"http://{env['S3_ENDPOINT']}"


def _put(scheme: str, env: dict[str, str], key: str, body: bytes) -> None:
    """Write ``models/key`` through the store's own client."""
    if scheme == "s3":
        _s3(env).put_object(Bucket="models", Key=key, Body=body)
    else:
        _gcs(env).bucket("models").blob(key).upload_from_string(body)


def _objects(scheme: str, env: dict[str, str], prefix: str) -> dict[str, bytes]:
    """Every object below ``models/prefix/``, by its name relative to it, with its bytes."""
    if scheme == "s3":
        client = _s3(env)
        pages = client.get_paginator("list_objects_v2").paginate(Bucket="models",
                                                                 Prefix=prefix + "/")
        return {o["Key"][len(prefix) + 1:]: client.get_object(
                    Bucket="models", Key=o["Key"])["Body"].read()
                for page in pages for o in page.get("Contents", [])}
    blobs = _gcs(env).list_blobs("models", prefix=prefix + "/")
    return {b.name[len(prefix) + 1:]: b.download_as_bytes() for b in blobs}


def _s3(env: dict[str, str]):
    import boto3

    return boto3.client("s3", endpoint_url=_endpoint(env), region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


def _gcs(env: dict[str, str]):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    return gcs.Client(project="test", credentials=AnonymousCredentials(),
                      client_options={"api_endpoint": env["STORAGE_EMULATOR_HOST"]})


# --- kfp.local and an image whose ENTRYPOINT is Beam's worker boot --------------------------

# Beam's boot (/opt/apache/beam/boot) takes flags only: given KFP's `sh -c ...` as arguments
# it exits ("No id provided."). This throwaway image has an ENTRYPOINT that does the same.
BOOT_IMAGE = "estflow-test/beam-boot-entrypoint:1"
BOOT_DOCKERFILE = (f"FROM {images_fixture.SLIM_IMAGE}\n"
                   'ENTRYPOINT ["/bin/sh", "-c", "echo boot: flags only, received: $* >&2; '
                   'exit 1", "boot"]\n')

# A file, not `python -c`: a lightweight component's source is read with inspect.
ENTRYPOINT_RUN = textwrap.dedent("""
    import sys
    import kfp.dsl
    import kfp.local

    image, root, entrypoint = sys.argv[1], sys.argv[2], sys.argv[3]

    @kfp.dsl.component(base_image=image, install_kfp_package=False)
    def hello() -> str:
        import estflow.dsl
        return "estflow.dsl from " + estflow.dsl.__name__

    extra = {"entrypoint": []} if entrypoint == "empty" else {}  # docker-py containers.run
    kfp.local.init(runner=kfp.local.DockerRunner(network_mode="none", **extra),
                   pipeline_root=root)
    print("OUTPUT:", hello().outputs.get("Output"))
""")


def test_kfp_local_runs_an_image_with_beams_entrypoint_only_when_told_entrypoint_empty(
        images, tmp_path):
    built = subprocess.run(["docker", "build", "--network", "none", "-t", BOOT_IMAGE, "-"],
                           input=BOOT_DOCKERFILE, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "DOCKER_BUILDKIT": "0"})
    assert built.returncode == 0, built.stderr
    try:
        script, root = tmp_path / "run_hello.py", tmp_path / "root"
        script.write_text(ENTRYPOINT_RUN)
        root.mkdir()
        root.chmod(0o777)  # the container runs as the image's user (uid 1000)
        as_built = _kfp_local(script, root, "as-built")
        # the task never ran; kfp.local 2.17 may still call it SUCCESS (with no outputs): it
        # takes a container already auto-removed when it asks for the exit code as exit 0
        assert "boot: flags only, received: sh -ec" in as_built.out, as_built.out[-4000:]
        assert "OUTPUT: estflow.dsl" not in as_built.out
        overridden = _kfp_local(script, root, "empty")
        assert overridden.returncode == 0, overridden.out[-4000:]
        assert "OUTPUT: estflow.dsl from estflow.dsl" in overridden.out
    finally:
        subprocess.run(["docker", "rmi", "-f", BOOT_IMAGE], capture_output=True, timeout=120)


@dataclasses.dataclass(frozen=True)
class _Done:
    returncode: int
    out: str


def _kfp_local(script: Path, root: Path, entrypoint: str) -> _Done:
    done = subprocess.run([sys.executable, str(script), BOOT_IMAGE, str(root), entrypoint],
                          cwd=script.parent, capture_output=True, text=True, timeout=600)
    return _Done(done.returncode, re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr))
